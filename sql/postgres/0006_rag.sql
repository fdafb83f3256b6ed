-- Project-document RAG (docs/rag.md), cluster profile: a tenant's projects' documents,
-- their chunks and optional embeddings, apart from the Memory Fabric's tables. Additive:
-- instances of the previous release never read or write these tables.
--
-- Every row is keyed by (tenant, project): a store is opened per tenant and every query
-- names both, so tenants never meet, nor do a tenant's projects. `project` is the project id
-- (the first 16 hex characters of the SHA-256 of the canonical project root). Paths compare
-- bytewise (COLLATE "C"): listings come in the same order as the SQLite store's.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE rag_files (
    tenant         TEXT    NOT NULL,
    project        TEXT    NOT NULL,
    path           TEXT    COLLATE "C" NOT NULL,
    content_hash   TEXT    NOT NULL,
    format         TEXT    NOT NULL,
    bytes          BIGINT  NOT NULL CHECK (bytes >= 0),
    chunks         INTEGER NOT NULL CHECK (chunks >= 0),
    ingested_at_ms BIGINT  NOT NULL,
    PRIMARY KEY (tenant, project, path)
);

-- A file's chunks. chunk_id comes from a sequence and is never reused, so a vector computed
-- for a replaced chunk cannot attach to its successor. text_tsv is the full-text index
-- (english: Snowball stemming, stopwords dropped), searched through its GIN index.
CREATE TABLE rag_chunks (
    chunk_id   BIGSERIAL PRIMARY KEY,
    tenant     TEXT    NOT NULL,
    project    TEXT    NOT NULL,
    path       TEXT    COLLATE "C" NOT NULL,
    idx        INTEGER NOT NULL CHECK (idx > 0),
    start_byte BIGINT  NOT NULL CHECK (start_byte >= 0),
    end_byte   BIGINT  NOT NULL CHECK (end_byte >= start_byte),
    line_start INTEGER NOT NULL,
    line_end   INTEGER NOT NULL,
    tokens     INTEGER NOT NULL CHECK (tokens >= 0),
    text       TEXT    NOT NULL,
    text_tsv   TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    UNIQUE (tenant, project, path, idx),
    FOREIGN KEY (tenant, project, path) REFERENCES rag_files (tenant, project, path)
        ON DELETE CASCADE
);
CREATE INDEX rag_chunks_fulltext ON rag_chunks USING GIN (text_tsv);

-- Chunk vectors per embedding model (pgvector, dimension-free: models differ). Searched by
-- exact cosine over a project's rows; tenant and project are repeated for that scan.
CREATE TABLE rag_vectors (
    chunk_id  BIGINT NOT NULL REFERENCES rag_chunks (chunk_id) ON DELETE CASCADE,
    model     TEXT   NOT NULL,
    tenant    TEXT   NOT NULL,
    project   TEXT   NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (chunk_id, model)
);
CREATE INDEX rag_vectors_by_project ON rag_vectors (tenant, project, model);
