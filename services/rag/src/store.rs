//! The store contract ([`RagStore`]): what ingestion writes and search reads, per project.
//! Backends: [`crate::sqlite::SqliteRag`] (local profile) and `lumina-rag-postgres`
//! (cluster profile); both pass [`crate::conformance`].
//!
//! A project (its id, [`lumina_config::project_id`]) holds files by project-relative path;
//! a file holds its chunks (1-based index) and, per embedding model, their vectors. Writing
//! a file replaces it whole, in one transaction: a reader never sees half of a file's
//! chunks.

use async_trait::async_trait;

use crate::chunk::Chunk;
use crate::Result;

/// What the store knows about one ingested file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// Path relative to the project root, `/`-separated.
    pub path: String,
    /// Hex SHA-256 of the file's bytes when it was ingested.
    pub content_hash: String,
    /// Its format ([`crate::extract::Format::as_str`]).
    pub format: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its chunks.
    pub chunks: u32,
    /// When it was ingested (ms since the epoch).
    pub ingested_at_ms: i64,
}

/// A stored chunk: where it is and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredChunk {
    /// The store's id of this version of the chunk: a re-ingested file's chunks get new
    /// ids, never reused, so a vector computed for an older version cannot attach to a newer.
    pub id: i64,
    /// Its file, relative to the project root.
    pub path: String,
    /// The chunk, with its span in the file's extracted text.
    pub chunk: Chunk,
}

/// Identifies a chunk within a project.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkKey {
    /// The file, relative to the project root.
    pub path: String,
    /// The 1-based chunk index.
    pub index: u32,
}

/// A chunk's vector for one model.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkVector {
    /// The chunk's [`StoredChunk::id`].
    pub chunk_id: i64,
    /// Its vector (the model's dimensions).
    pub vector: Vec<f32>,
}

/// The store behind ingestion and search. All methods are scoped to one project id; a
/// store never mixes projects (nor, in PostgreSQL, tenants: a store is opened per tenant).
#[async_trait]
pub trait RagStore: Send + Sync + 'static {
    /// Every file of a project, by path.
    async fn files(&self, project: &str) -> Result<Vec<FileRecord>>;

    /// One file, `None` when it was never ingested (or was removed).
    async fn file(&self, project: &str, path: &str) -> Result<Option<FileRecord>>;

    /// Stores `file` with exactly `chunks` (indexes 1..=n, `file.chunks == n`), replacing
    /// whatever the path held before, vectors included, in one transaction.
    async fn put_file(&self, project: &str, file: &FileRecord, chunks: &[Chunk]) -> Result<()>;

    /// Removes a file with its chunks and vectors. Returns whether it was there.
    async fn remove_file(&self, project: &str, path: &str) -> Result<bool>;

    /// The chunk `path#chunk-index`, `None` when there is none.
    async fn chunk(&self, project: &str, path: &str, index: u32) -> Result<Option<StoredChunk>>;

    /// Full-text (BM25) search over the chunks: up to `limit` keys, best first, each with its
    /// score (higher is better). `terms` are the query's words; a chunk matching any of them
    /// is a candidate.
    async fn search_text(
        &self,
        project: &str,
        terms: &[String],
        limit: usize,
    ) -> Result<Vec<(ChunkKey, f64)>>;

    /// Nearest chunks by cosine similarity to `query` among the vectors of `model`: up to
    /// `limit`, best first, each with its similarity.
    async fn search_vector(
        &self,
        project: &str,
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<(ChunkKey, f64)>>;

    /// Up to `limit` chunks that have no vector of `model` yet, in path and index order.
    async fn missing_vectors(
        &self,
        project: &str,
        model: &str,
        limit: usize,
    ) -> Result<Vec<StoredChunk>>;

    /// Stores vectors of `model` (replacing any of the same chunk and model). Vectors of
    /// chunk ids that no longer exist (the file was re-ingested meanwhile) are ignored.
    async fn put_vectors(&self, project: &str, model: &str, vectors: &[ChunkVector]) -> Result<()>;
}
