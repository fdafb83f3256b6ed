-- Lumina runtime journal, PostgreSQL backend (cluster profile), schema version 1.
-- PostgreSQL 15+. Applied by `lumina_journal::postgres::migrate` (`lumina-backend migrate`)
-- inside one transaction that holds the migration advisory lock; the runner records the
-- version in `schema_version`, so this file does not.
--
-- Every table is keyed by (tenant, session_id, ...): a tenant is a real column, never a
-- naming convention, and no query of the backend omits it. Integers that the store contract
-- calls u64 (sequences, fences, offsets) are BIGINT with a CHECK >= 0.

-- One row per applied migration file.
CREATE TABLE IF NOT EXISTS schema_version (
    version    INTEGER     PRIMARY KEY,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE tenants (
    tenant        TEXT   PRIMARY KEY,
    created_at_ms BIGINT NOT NULL
);

-- Project roots sessions have worked in (registered on session creation; listing aid).
CREATE TABLE projects (
    tenant        TEXT   NOT NULL REFERENCES tenants (tenant),
    project_root  TEXT   NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, project_root)
);

-- One row per session. `head_seq` is the last global seq and `head_ts_ms` that event's
-- timestamp; appends advance both while holding the session's fence row lock, so seq
-- assignment is serialized per session and timestamps never go back along seq (instances'
-- clocks differ) without reading `events`.
CREATE TABLE sessions (
    tenant        TEXT    NOT NULL REFERENCES tenants (tenant),
    session_id    TEXT    NOT NULL,
    title         TEXT    NOT NULL,
    project_root  TEXT    NOT NULL,
    created_at_ms BIGINT  NOT NULL,
    updated_at_ms BIGINT  NOT NULL,
    archived      BOOLEAN NOT NULL DEFAULT false,
    -- The last projection summary; JSON null before the first put_summary.
    summary       JSONB   NOT NULL DEFAULT 'null',
    head_seq      BIGINT  NOT NULL DEFAULT 0 CHECK (head_seq >= 0),
    head_ts_ms    BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, session_id)
);

-- Session lists: newest first within a tenant.
CREATE INDEX sessions_by_update ON sessions (tenant, updated_at_ms DESC, session_id);

-- The largest fencing token any committed write has carried. Every write transaction
-- starts with `SELECT fence ... FOR UPDATE` on this row: the lock serializes the session's
-- writers and the value refuses stale ones (SYSTEM.md §6).
CREATE TABLE session_fences (
    tenant     TEXT   NOT NULL,
    session_id TEXT   NOT NULL,
    fence      BIGINT NOT NULL CHECK (fence >= 0),
    PRIMARY KEY (tenant, session_id),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, session_id) ON DELETE CASCADE
);

-- Per-stream version (its last stream_seq), for optimistic concurrency without MAX().
CREATE TABLE streams (
    tenant     TEXT   NOT NULL,
    session_id TEXT   NOT NULL,
    stream     TEXT   NOT NULL,
    version    BIGINT NOT NULL CHECK (version >= 0),
    PRIMARY KEY (tenant, session_id, stream),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, session_id) ON DELETE CASCADE
);

-- Content-addressed bytes, shared by a tenant's sessions: explicit blobs and event
-- payloads above the size threshold (and payloads JSONB cannot hold, such as \u0000).
CREATE TABLE blobs (
    tenant        TEXT   NOT NULL REFERENCES tenants (tenant),
    sha256        TEXT   NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    bytes         BYTEA  NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, sha256)
);

-- The journal. A payload lives inline (JSONB) or in `blobs`, never both. Deliberately no
-- foreign keys: rows are only written by an append that holds the session's fence lock
-- (so the session exists) and writes the payload blob first in the same transaction, and
-- per-row RI triggers would cost more than the insert itself.
CREATE TABLE events (
    tenant      TEXT   NOT NULL,
    session_id  TEXT   NOT NULL,
    seq         BIGINT NOT NULL CHECK (seq > 0),
    stream      TEXT   NOT NULL,
    stream_seq  BIGINT NOT NULL CHECK (stream_seq > 0),
    fence       BIGINT NOT NULL CHECK (fence >= 0),
    kind        TEXT   NOT NULL,
    payload     JSONB,
    blob_sha256 TEXT,
    ts_ms       BIGINT NOT NULL,
    PRIMARY KEY (tenant, session_id, seq),
    UNIQUE (tenant, session_id, stream, stream_seq),
    CHECK ((payload IS NULL) <> (blob_sha256 IS NULL))
);

-- Results of idempotent commands, inserted in the transaction of their append.
CREATE TABLE command_results (
    tenant        TEXT   NOT NULL,
    session_id    TEXT   NOT NULL,
    key           TEXT   NOT NULL,
    result        JSONB  NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, session_id, key),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, session_id) ON DELETE CASCADE
);

-- Replay progress of projections and other consumers; only ever moves forward.
CREATE TABLE consumer_offsets (
    tenant        TEXT   NOT NULL,
    session_id    TEXT   NOT NULL,
    consumer      TEXT   NOT NULL,
    "offset"      BIGINT NOT NULL CHECK ("offset" >= 0),
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, session_id, consumer),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, session_id) ON DELETE CASCADE
);

-- Snapshots of derived state (context, task state …) valid up to a journal seq, so a new
-- owner can resume without replaying from seq 1. Written under the session's fence.
CREATE TABLE checkpoints (
    tenant        TEXT   NOT NULL,
    session_id    TEXT   NOT NULL,
    name          TEXT   NOT NULL,
    seq           BIGINT NOT NULL CHECK (seq >= 0),
    state         JSONB  NOT NULL,
    fence         BIGINT NOT NULL CHECK (fence >= 0),
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, session_id, name),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, session_id) ON DELETE CASCADE
);

-- Lossless checkpoints of Team member streams inside the parent session's journal
-- (SYSTEM.md §5, §8): the parent's owner and fence cover them.
CREATE TABLE team_checkpoints (
    tenant        TEXT   NOT NULL,
    session_id    TEXT   NOT NULL,
    team_id       TEXT   NOT NULL,
    member        TEXT   NOT NULL,
    seq           BIGINT NOT NULL CHECK (seq >= 0),
    state         JSONB  NOT NULL,
    fence         BIGINT NOT NULL CHECK (fence >= 0),
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant, session_id, team_id, member),
    FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, session_id) ON DELETE CASCADE
);
