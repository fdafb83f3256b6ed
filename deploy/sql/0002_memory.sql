-- Memory Fabric (SYSTEM.md §9): per-tenant evidence ledgers, index state and vectors.
-- Every table is keyed by (tenant, space); a space name means nothing across tenants.

CREATE EXTENSION IF NOT EXISTS vector;

-- The ledger: immutable evidence. event_id increases in append order across all spaces.
CREATE TABLE memory_evidence (
    event_id      BIGSERIAL PRIMARY KEY,
    tenant        TEXT      NOT NULL,
    space         TEXT      NOT NULL,
    context       TEXT      NOT NULL,
    session_id    TEXT      NOT NULL,
    actor         TEXT      NOT NULL,
    event_time_ms BIGINT    NOT NULL,
    turn_order    BIGINT    NOT NULL,
    text          TEXT      NOT NULL,
    source_id     TEXT      NOT NULL,
    source_offset BIGINT    NOT NULL,
    checksum      TEXT      NOT NULL,
    chain         TEXT      NOT NULL,
    -- What full text sees ("actor: text (date words)"), computed by the writer.
    body          TEXT      NOT NULL,
    body_tsv      TSVECTOR  GENERATED ALWAYS AS (to_tsvector('english', body)) STORED,
    UNIQUE (tenant, space, source_id)
);
CREATE INDEX memory_evidence_space ON memory_evidence (tenant, space, event_id);
CREATE INDEX memory_evidence_fts ON memory_evidence USING GIN (body_tsv);
CREATE INDEX memory_evidence_context ON memory_evidence (tenant, space, context, turn_order, event_id);

CREATE FUNCTION memory_evidence_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'evidence is immutable';
END;
$$;
CREATE TRIGGER memory_evidence_no_change BEFORE UPDATE OR DELETE ON memory_evidence
    FOR EACH ROW EXECUTE FUNCTION memory_evidence_immutable();
CREATE TRIGGER memory_evidence_no_truncate BEFORE TRUNCATE ON memory_evidence
    FOR EACH STATEMENT EXECUTE FUNCTION memory_evidence_immutable();

-- Writer fences per (tenant, space): a write locks the row and is refused when the
-- recorded fence is newer than the writer's, as in the journal's session_fences.
CREATE TABLE memory_fences (
    tenant TEXT   NOT NULL,
    space  TEXT   NOT NULL,
    fence  BIGINT NOT NULL,
    PRIMARY KEY (tenant, space)
);

-- Index generations and the published pointer, per tenant.
CREATE TABLE memory_generations (
    tenant      TEXT   NOT NULL,
    generation  BIGINT NOT NULL,
    fingerprint TEXT   NOT NULL,
    state       TEXT   NOT NULL CHECK (state IN ('building', 'published', 'retired')),
    created_ms  BIGINT NOT NULL,
    PRIMARY KEY (tenant, generation)
);
CREATE TABLE memory_publication (
    tenant      TEXT   PRIMARY KEY,
    generation  BIGINT NOT NULL,
    fingerprint TEXT   NOT NULL
);
-- Build checkpoints: the last ledger row (and its chain) a generation covers per space.
CREATE TABLE memory_checkpoints (
    tenant        TEXT   NOT NULL,
    generation    BIGINT NOT NULL,
    space         TEXT   NOT NULL,
    last_event_id BIGINT NOT NULL,
    chain         TEXT   NOT NULL,
    rows          BIGINT NOT NULL,
    PRIMARY KEY (tenant, generation, space)
);

-- The window field of full text per generation: each indexed event's neighbouring turns
-- (up to the index window on each side within its context), refreshed by index batches.
CREATE TABLE memory_windows (
    tenant     TEXT     NOT NULL,
    generation BIGINT   NOT NULL,
    space      TEXT     NOT NULL,
    event_id   BIGINT   NOT NULL,
    window_tsv TSVECTOR NOT NULL,
    PRIMARY KEY (tenant, generation, space, event_id)
);
CREATE INDEX memory_windows_fts ON memory_windows USING GIN (window_tsv);

-- Dense vectors (pgvector). The column is dimension-free; HNSW indexes are created per
-- (tenant, space, generation) as partial expression indexes on `embedding::vector(N)`
-- once a space crosses the exact-search threshold.
CREATE TABLE memory_vectors (
    tenant     TEXT   NOT NULL,
    generation BIGINT NOT NULL,
    space      TEXT   NOT NULL,
    event_id   BIGINT NOT NULL,
    dims       INTEGER NOT NULL,
    embedding  vector NOT NULL,
    PRIMARY KEY (tenant, generation, space, event_id)
);
-- HNSW indexes built so far (so a build creates each once).
CREATE TABLE memory_hnsw (
    tenant     TEXT   NOT NULL,
    generation BIGINT NOT NULL,
    space      TEXT   NOT NULL,
    index_name TEXT   NOT NULL,
    PRIMARY KEY (tenant, generation, space)
);
