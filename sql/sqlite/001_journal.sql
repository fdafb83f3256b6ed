-- Lumina runtime journal, SQLite backend: the schema of one session's `runtime.sqlite`.
-- Version 1. Applied once, in the transaction that creates the session; connection
-- settings (journal_mode=WAL, synchronous=NORMAL, foreign_keys, busy_timeout) are set by
-- the backend on every open, not here.

CREATE TABLE schema_version (
    version INTEGER NOT NULL
);

-- Exactly one row: the session this file belongs to.
CREATE TABLE session (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    tenant        TEXT    NOT NULL,
    session_id    TEXT    NOT NULL,
    title         TEXT    NOT NULL,
    project_root  TEXT    NOT NULL,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    archived      INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
    -- The last projection summary (JSON text), 'null' before the first put_summary.
    summary       TEXT    NOT NULL DEFAULT 'null'
);

-- Exactly one row: the largest fencing token any successful write has carried.
CREATE TABLE session_fence (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    fence INTEGER NOT NULL CHECK (fence >= 0)
);

-- Content-addressed bytes: explicit blobs and event payloads above the size threshold.
CREATE TABLE blobs (
    sha256 TEXT PRIMARY KEY,
    bytes  BLOB NOT NULL
);

-- The journal. `seq` is the global sequence (the rowid, so appends stay at the b-tree's
-- right edge); `stream_seq` is contiguous per stream. A payload lives inline or in
-- `blobs`, never both.
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY,
    stream      TEXT    NOT NULL,
    stream_seq  INTEGER NOT NULL,
    kind        TEXT    NOT NULL,
    payload     TEXT,
    blob_sha256 TEXT    REFERENCES blobs (sha256),
    ts_ms       INTEGER NOT NULL,
    fence       INTEGER NOT NULL,
    UNIQUE (stream, stream_seq),
    CHECK ((payload IS NULL) <> (blob_sha256 IS NULL))
);

-- Results of idempotent commands, recorded in the transaction of their append.
CREATE TABLE command_results (
    key        TEXT    PRIMARY KEY,
    result     TEXT    NOT NULL,
    created_ms INTEGER NOT NULL
) WITHOUT ROWID;

-- Replay progress of projections and other consumers; only ever moves forward.
CREATE TABLE consumer_offsets (
    consumer TEXT    PRIMARY KEY,
    "offset" INTEGER NOT NULL CHECK ("offset" >= 0)
) WITHOUT ROWID;

INSERT INTO schema_version (version) VALUES (1);
