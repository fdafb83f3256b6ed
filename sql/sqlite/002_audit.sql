-- Lumina runtime journal, SQLite backend: version 2 of a session's `runtime.sqlite`.
-- Applied after 001_journal.sql when a session is created, and to a version 1 file when
-- it is first opened (in one IMMEDIATE transaction with the version bump).

-- The approvals audit (docs/audit.md): one row per permission decision, inserted in the
-- transaction of the append that journals it; `seq` is that event's. No arguments, only
-- their hash and the preview the user was shown.
CREATE TABLE permission_audit (
    seq        INTEGER PRIMARY KEY REFERENCES events (seq),
    ts_ms      INTEGER NOT NULL,
    run_id     TEXT    NOT NULL,
    request_id TEXT    NOT NULL,
    tool       TEXT    NOT NULL,
    args_hash  TEXT    NOT NULL,
    preview    TEXT,
    decision   TEXT    NOT NULL,
    decided_by TEXT    NOT NULL,
    sub        TEXT,
    reason     TEXT
);

-- Time-window listings.
CREATE INDEX permission_audit_by_time ON permission_audit (ts_ms DESC, seq DESC);

UPDATE schema_version SET version = 2;
