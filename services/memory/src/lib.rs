//! The Memory Fabric (docs/design.md#memory-fabric): grounded long-term memory for agents.
//!
//! This crate owns
//! - the **ledger** contract ([`MemoryStore`]): immutable evidence rows with checksums, a
//!   per-space hash chain and idempotent ingestion by source id;
//! - the **derived indexes** rebuilt from the ledger ([`mod@derive`]): full text, a
//!   BM25 sparse index with an event window field, an event/context/concept graph and,
//!   with an embedding model, event and span dense vectors plus the model's learned
//!   sparse weights and token vectors when it has them (BGE-M3), built by a resumable job
//!   with checkpoints and published atomically ([`build`], one job over each store's
//!   [`build::IndexBackend`]), versioned by a retrieval fingerprint checked on every query;
//! - the **read path** ([`retrieve`]): one pipeline for every query, from the alignment
//!   check to the organized context, every item carrying its source event id;
//! - the **semantic compile** ([`semantic`]): nodes proposed by a model from new evidence,
//!   grounded locally in the ledger, with conflicts resolved by authority and time or left
//!   pending; accepted nodes join the retrieval graph;
//! - the **embedding provider** contract ([`embed`]; the models themselves are in
//!   `lumina-embed`) and the optional **reranker** of the read path ([`rerank`]);
//! - the backend-independent `conformance` suite (feature `testsuite`).
//!
//! The stores are their own crates over this one: `lumina-memory-sqlite` (local) and
//! `lumina-memory-postgres` (cluster). Only `lumina-backend` chooses a concrete store and
//! embedder; the LoCoMo benchmark lives there too (`lumina-backend bench memory`).
#![warn(missing_docs)]

pub mod build;
#[cfg(feature = "testsuite")]
pub mod conformance;
pub mod derive;
pub mod embed;
pub mod endpoint;
mod error;
pub mod rerank;
pub mod retrieve;
pub mod semantic;
pub mod text;
pub mod time;
mod types;

pub use error::{Error, Result};
pub use retrieve::RetrievalOptions;
pub use semantic::{
    BatchFailure, CompileLimits, CompileReport, Conflict, SemanticModel, SemanticNode,
    SemanticStatus,
};
pub use types::*;

use async_trait::async_trait;

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The store contract: an append-only evidence ledger plus the derived indexes and the
/// read path over it. Evidence is never updated or deleted; derived data can always be
/// rebuilt from it.
#[async_trait]
pub trait MemoryStore: Send + Sync + 'static {
    /// Appends evidence atomically, in order. A source id already recorded in the space
    /// with the same content is a duplicate (the stored row is returned, nothing is
    /// written); with different content the whole batch fails with
    /// [`Error::SourceConflict`].
    async fn append(&self, batch: Vec<NewEvidence>) -> Result<Vec<Appended>>;

    /// Evidence of a space with `event_id > after_event_id`, in order, at most `limit`.
    async fn read(&self, space: &str, after_event_id: u64, limit: usize) -> Result<Vec<Evidence>>;

    /// Evidence of a space by event id, in the given order; unknown ids (and ids of other
    /// spaces) are skipped.
    async fn get(&self, space: &str, event_ids: &[u64]) -> Result<Vec<Evidence>>;

    /// The ledger checksum of a space.
    async fn head(&self, space: &str) -> Result<LedgerHead>;

    /// Spaces that hold evidence, sorted.
    async fn spaces(&self) -> Result<Vec<String>>;

    /// How the derived indexes of a space relate to its ledger.
    async fn status(&self, space: &str) -> Result<IndexStatus>;

    /// Runs the index job (the background half of the alignment check): catches every
    /// space up, or builds and publishes a new generation when the fingerprint changed.
    /// Resumes an interrupted build from its checkpoints.
    async fn sync(&self, limits: BuildLimits) -> Result<SyncReport>;

    /// The read path: aligns the space's indexes, then retrieves, selects and organizes
    /// evidence for `query`.
    async fn recall(&self, query: &RecallQuery) -> Result<Recall>;

    /// The semantic compile of a space (write path steps 2–3, [`semantic`]): sends the
    /// evidence after the space's checkpoint to `model` in batches, stores the nodes that
    /// pass the grounding check (and the rejected ones, with their reason), records
    /// conflicts and resolutions, and commits each batch atomically with the checkpoint. A
    /// failed model call or malformed answer writes only a failure record; the next run
    /// retries it. Resumes from the checkpoint; rebuilds the space's nodes first when the
    /// semantic fingerprint changed. Never touches evidence.
    async fn compile(
        &self,
        space: &str,
        model: &dyn SemanticModel,
        limits: CompileLimits,
    ) -> Result<CompileReport>;

    /// Deletes a space's derived semantic data (nodes, citations, conflicts, resolutions,
    /// failures) and moves its checkpoint to the start: the next compile rebuilds it from
    /// the ledger. Evidence is not touched.
    async fn reset_semantic(&self, space: &str) -> Result<()>;

    /// The compile job's checkpoint and failed batches in a space.
    async fn semantic_status(&self, space: &str) -> Result<SemanticStatus>;

    /// Every node of a space (rejected ones included), by node id.
    async fn nodes(&self, space: &str) -> Result<Vec<SemanticNode>>;

    /// Every conflict of a space with its resolution, by conflict id.
    async fn conflicts(&self, space: &str) -> Result<Vec<Conflict>>;
}
