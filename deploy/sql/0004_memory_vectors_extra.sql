-- Memory Fabric: what an embedding model gives besides its dense vector, and span vectors
-- (SYSTEM.md §9, derived indexes). Derived data like the rest of memory_vectors: rebuilt
-- from the ledger when the model or the index options change.
--
-- sparse: learned sparse weights (vocabulary id → weight; little-endian pairs of u32 id and
-- f32 weight, sorted by id); tokens: token-level vectors for multi-vector MaxSim scoring (a
-- little-endian u16 dimension count, then each unit vector quantized to i8, value × 127).
-- NULL when the generation's model does not produce them.
ALTER TABLE memory_vectors
    ADD COLUMN sparse bytea,
    ADD COLUMN tokens bytea;

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
