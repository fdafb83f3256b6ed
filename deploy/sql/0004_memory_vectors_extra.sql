-- Memory Fabric: what an embedding model gives besides its dense vector, and span vectors
-- (SYSTEM.md §9, derived indexes). Derived data like the rest of memory_vectors: rebuilt
-- from the ledger when the model or the index options change.
--
-- tokens: token-level vectors for multi-vector MaxSim scoring (a little-endian u16
-- dimension count, then each unit vector quantized to i8, value × 127); NULL when the
-- generation's model does not produce them.
ALTER TABLE memory_vectors
    ADD COLUMN tokens bytea;

-- Learned sparse postings (a model's lexical weights, e.g. BGE-M3's): term = the model's
-- vocabulary id.
CREATE TABLE memory_sparse_postings (
    tenant     TEXT   NOT NULL,
    generation BIGINT NOT NULL,
    space      TEXT   NOT NULL,
    term       BIGINT NOT NULL,
    event_id   BIGINT NOT NULL,
    weight     REAL   NOT NULL,
    PRIMARY KEY (tenant, generation, space, term, event_id)
);

-- Event windows: the dense vectors of the sentence-like spans of an event that has several
-- (span = the span's position in the event), half precision.
CREATE TABLE memory_event_windows (
    tenant     TEXT    NOT NULL,
    generation BIGINT  NOT NULL,
    space      TEXT    NOT NULL,
    event_id   BIGINT  NOT NULL,
    span       INTEGER NOT NULL,
    embedding  halfvec NOT NULL,
    PRIMARY KEY (tenant, generation, space, event_id, span)
);

-- Graph edges of the event/context/concept graph (adjacent turns follow from the turn
-- order and are not stored): kind 1 = the event's context, 2 = a concept of its text.
CREATE TABLE memory_edges (
    tenant     TEXT     NOT NULL,
    generation BIGINT   NOT NULL,
    space      TEXT     NOT NULL,
    event_id   BIGINT   NOT NULL,
    node       TEXT     NOT NULL,
    kind       SMALLINT NOT NULL,
    PRIMARY KEY (tenant, generation, space, event_id, node, kind)
);
