-- Lumina runtime journal, PostgreSQL backend: the approvals audit (docs/audit.md).
-- Additive: instances of the previous release never read or write it.
--
-- One row per permission decision, inserted in the transaction of the append that
-- journals it (`seq` is that event's), so a decision and its record commit together. Only
-- the arguments' hash and the preview the user was shown are kept, never the arguments.
-- `session_id` compares bytewise (COLLATE "C"): the listing order and its cursor are the
-- same as the SQLite backend's.
CREATE TABLE permission_audit (
    tenant     TEXT   NOT NULL,
    session_id TEXT   COLLATE "C" NOT NULL,
    seq        BIGINT NOT NULL CHECK (seq > 0),
    ts_ms      BIGINT NOT NULL,
    run_id     TEXT   NOT NULL,
    request_id TEXT   NOT NULL,
    tool       TEXT   NOT NULL,
    args_hash  TEXT   NOT NULL,
    preview    TEXT,
    decision   TEXT   NOT NULL,
    decided_by TEXT   NOT NULL,
    sub        TEXT,
    reason     TEXT,
    PRIMARY KEY (tenant, session_id, seq),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, session_id) ON DELETE CASCADE
);

-- `audit.list`: a tenant's records newest first, optionally within a time window.
CREATE INDEX permission_audit_by_time
    ON permission_audit (tenant, ts_ms DESC, session_id DESC, seq DESC);
