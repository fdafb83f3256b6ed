//! Project-document RAG (docs/rag.md): `rag_ingest{paths}` and `rag_search{query, k?}` over
//! a project's documents, stored apart from the Memory Fabric.
//!
//! - [`extract`]: which files (`.txt .md .rst .html .json .csv .tsv .pdf .docx`) and how
//!   each becomes text.
//! - [`chunk`]: ≈1,000-token chunks with 120 tokens of overlap and exact byte/line spans;
//!   the token approximation.
//! - [`store`]: the [`RagStore`] contract; [`sqlite`] is the local backend (one database
//!   per project under the AppRoot), `lumina-rag-postgres` the cluster's; [`conformance`]
//!   (feature `testsuite`) is the suite both pass.
//! - [`Rag`] ([`ingest`](Rag::ingest), [`search`](Rag::search)): content-hash incremental
//!   ingestion (unchanged files cost a hash, nothing more), BM25 full text fused with
//!   optional dense vectors (the Memory Fabric's [`EmbeddingProvider`]) by reciprocal-rank
//!   fusion, and citations `[path#chunk-N]` ([`citation`]) that resolve to the exact chunk.
//! - [`tools`]: the two tools as [`lumina_tools::Tool`]s for the registry.

pub mod chunk;
pub mod citation;
#[cfg(feature = "testsuite")]
pub mod conformance;
pub mod corpus;
mod error;
pub mod extract;
mod ingest;
mod search;
pub mod sqlite;
pub mod store;
pub mod tools;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};

use lumina_memory::embed::EmbeddingProvider;

pub use chunk::{Chunk, ChunkOptions};
pub use citation::Citation;
pub use error::{Error, Result};
pub use ingest::{IngestReport, Skipped};
pub use search::{Hit, SearchResult};
pub use store::{ChunkKey, ChunkVector, FileRecord, RagStore, StoredChunk};

/// How ingestion and search behave; [`RagOptions::default`] is the product's.
#[derive(Debug, Clone, PartialEq)]
pub struct RagOptions {
    /// Chunk size and overlap.
    pub chunk: ChunkOptions,
    /// Files larger than this are skipped (default 32 MiB).
    pub max_file_bytes: u64,
    /// Files one ingestion call looks at, at most (default 10,000); the rest are reported.
    pub max_files: usize,
    /// Candidates each retriever contributes to fusion (default 50).
    pub candidates: usize,
    /// The `k` of reciprocal-rank fusion, `w / (k + rank)` (default 10: with the usual 60 a
    /// chunk that both lists rank middling beats full text's clear first; docs/benchmarks.md).
    pub rrf_k: f64,
    /// The dense list's weight `w` in the fusion; full text's is 1 (default 0.25, as the
    /// Memory Fabric's: a general embedder over ≈1,000-token chunks — all-MiniLM-L6-v2 reads
    /// the first 256 word pieces — is a weaker ranker than BM25 here, docs/benchmarks.md).
    pub dense_weight: f64,
    /// Chunks embedded per provider call (default 16).
    pub embed_batch: usize,
}

impl Default for RagOptions {
    fn default() -> Self {
        Self {
            chunk: ChunkOptions::default(),
            max_file_bytes: 32 * 1024 * 1024,
            max_files: 10_000,
            candidates: 50,
            rrf_k: 10.0,
            dense_weight: 0.25,
            embed_batch: 16,
        }
    }
}

/// Hits a search returns by default, and at most.
pub const DEFAULT_K: usize = 5;
/// See [`DEFAULT_K`].
pub const MAX_K: usize = 20;

/// Ingestion and search over a [`RagStore`], with an optional embedder. Cheap to share
/// (`Arc`); ingestions of one project are serialized.
pub struct Rag {
    store: Arc<dyn RagStore>,
    embedder: Option<Arc<dyn EmbeddingProvider>>,
    options: RagOptions,
    ingesting: StdMutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for Rag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rag")
            .field("embedder", &self.embedder.as_ref().map(|e| e.model_id()))
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Rag {
    /// RAG over `store`; with `embedder`, chunks also get dense vectors and search fuses
    /// them with full text.
    pub fn new(
        store: Arc<dyn RagStore>,
        embedder: Option<Arc<dyn EmbeddingProvider>>,
        options: RagOptions,
    ) -> Self {
        Self {
            store,
            embedder,
            options,
            ingesting: StdMutex::new(HashMap::new()),
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn RagStore> {
        &self.store
    }

    /// The embedding model's id, when search uses one.
    pub fn embedding_model(&self) -> Option<&str> {
        self.embedder.as_ref().map(|e| e.model_id())
    }

    /// The project id and canonical root of `project_root`.
    pub fn project(project_root: &Path) -> Result<(String, PathBuf)> {
        let root = lumina_tools::paths::canonical_root(project_root)?;
        Ok((lumina_config::project_id(&root), root))
    }

    fn project_lock(&self, project: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .ingesting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(locks.entry(project.to_string()).or_default())
    }

    /// The stored chunk a citation names, `None` when there is none.
    pub async fn resolve(
        &self,
        project_root: &Path,
        citation: &Citation,
    ) -> Result<Option<StoredChunk>> {
        let (project, _) = Self::project(project_root)?;
        self.store
            .chunk(&project, &citation.path, citation.chunk)
            .await
    }
}
