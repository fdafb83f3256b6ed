-- Memory Fabric semantic compile (SYSTEM.md §9, write path steps 2–3): nodes a model
-- proposed from the ledger and a local check grounded in it, their citations, conflicts and
-- resolutions, and the compile job's checkpoints and failed batches. All of it is derived
-- data, rebuilt from the ledger; evidence is never touched. Keyed by (tenant, space) like the
-- other memory tables; every write holds the space's memory_fences row.

-- Nodes. Rejected ones are kept (with their reason) for diagnostics and never retrieved.
-- subject_key / predicate_key are the normalized (lowercase words) subject and predicate
-- conflicts are detected on.
CREATE TABLE memory_nodes (
    node_id           BIGSERIAL PRIMARY KEY,
    tenant            TEXT    NOT NULL,
    space             TEXT    NOT NULL,
    kind              TEXT    NOT NULL
        CHECK (kind IN ('fact', 'preference', 'identity', 'time_scope')),
    subject           TEXT    NOT NULL,
    predicate         TEXT    NOT NULL,
    value             TEXT    NOT NULL,
    text              TEXT    NOT NULL,
    valid_from        TEXT,
    valid_to          TEXT,
    updates_subject   TEXT,
    updates_predicate TEXT,
    status            TEXT    NOT NULL
        CHECK (status IN ('active', 'pending', 'superseded', 'rejected')),
    reason            TEXT,
    actor             TEXT    NOT NULL,
    event_time_ms     BIGINT  NOT NULL,
    batch_event_id    BIGINT  NOT NULL,
    fingerprint       TEXT    NOT NULL,
    subject_key       TEXT    NOT NULL,
    predicate_key     TEXT    NOT NULL
);
CREATE INDEX memory_nodes_space ON memory_nodes (tenant, space, status, node_id);
CREATE INDEX memory_nodes_key ON memory_nodes (tenant, space, subject_key, predicate_key, status);

-- Citations: the ledger events (of the same tenant and space) a node rests on, with quotes.
CREATE TABLE memory_node_cites (
    node_id  BIGINT  NOT NULL REFERENCES memory_nodes (node_id) ON DELETE CASCADE,
    ord      INTEGER NOT NULL,
    tenant   TEXT    NOT NULL,
    space    TEXT    NOT NULL,
    event_id BIGINT  NOT NULL,
    quote    TEXT    NOT NULL,
    PRIMARY KEY (node_id, ord)
);
CREATE INDEX memory_node_cites_event ON memory_node_cites (tenant, space, event_id);

-- Two accepted nodes with the same key and different values: pending, or resolved.
CREATE TABLE memory_conflicts (
    conflict_id   BIGSERIAL PRIMARY KEY,
    tenant        TEXT   NOT NULL,
    space         TEXT   NOT NULL,
    subject_key   TEXT   NOT NULL,
    predicate_key TEXT   NOT NULL,
    older         BIGINT NOT NULL REFERENCES memory_nodes (node_id) ON DELETE CASCADE,
    newer         BIGINT NOT NULL REFERENCES memory_nodes (node_id) ON DELETE CASCADE,
    state         TEXT   NOT NULL CHECK (state IN ('pending', 'resolved'))
);
CREATE INDEX memory_conflicts_key
    ON memory_conflicts (tenant, space, subject_key, predicate_key, state);

-- How a conflict was decided: winner and loser, the rule (authority, time, superseded), whose
-- evidence decided, why, and when (the deciding evidence's time).
CREATE TABLE memory_resolutions (
    conflict_id BIGINT PRIMARY KEY REFERENCES memory_conflicts (conflict_id) ON DELETE CASCADE,
    tenant      TEXT   NOT NULL,
    space       TEXT   NOT NULL,
    winner      BIGINT NOT NULL,
    loser       BIGINT NOT NULL,
    rule        TEXT   NOT NULL CHECK (rule IN ('authority', 'time', 'superseded')),
    decided_by  TEXT   NOT NULL,
    reason      TEXT   NOT NULL,
    at_ms       BIGINT NOT NULL
);

-- The compile job's checkpoint per space: the last compiled ledger row (and its checksum),
-- the fingerprint its nodes were compiled under, and a revision that increases with every
-- change of the space's nodes (read views are cached by it).
CREATE TABLE memory_compile_state (
    tenant        TEXT   NOT NULL,
    space         TEXT   NOT NULL,
    last_event_id BIGINT NOT NULL,
    checksum      TEXT   NOT NULL,
    fingerprint   TEXT   NOT NULL,
    revision      BIGINT NOT NULL,
    PRIMARY KEY (tenant, space)
);

-- Batches whose model call failed or whose answer was malformed (nothing else of them is
-- written): retried from the checkpoint, abandoned after the job's attempt limit.
CREATE TABLE memory_compile_failures (
    tenant         TEXT    NOT NULL,
    space          TEXT    NOT NULL,
    first_event_id BIGINT  NOT NULL,
    last_event_id  BIGINT  NOT NULL,
    attempts       INTEGER NOT NULL,
    error          TEXT    NOT NULL,
    state          TEXT    NOT NULL CHECK (state IN ('failed', 'abandoned', 'recovered')),
    fingerprint    TEXT    NOT NULL,
    PRIMARY KEY (tenant, space, first_event_id)
);
