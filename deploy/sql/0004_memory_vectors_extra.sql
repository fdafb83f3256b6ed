-- Memory Fabric: what an embedding model gives besides its dense vector (SYSTEM.md §9,
-- derived indexes): learned sparse weights (vocabulary id → weight; little-endian pairs of
-- u32 id and f32 weight, sorted by id) and token-level vectors for multi-vector MaxSim
-- scoring (a little-endian u16 dimension count, then each unit vector quantized to i8,
-- value × 127), and the dense vectors of an event's spans when it has more than one (the
-- same layout, in span order). NULL when the generation's model or index options do not
-- produce them. Derived data like the rest of memory_vectors: rebuilt from the ledger when
-- the model changes.
ALTER TABLE memory_vectors
    ADD COLUMN sparse bytea,
    ADD COLUMN tokens bytea,
    ADD COLUMN spans bytea;
