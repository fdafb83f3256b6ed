//! Memory Fabric errors.

/// Errors of every memory store backend and of the retrieval pipeline.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A source id that is already in the ledger arrived with different content. Evidence
    /// is never overwritten, so the whole batch is refused.
    #[error("source {source_id} in space {space} already holds different evidence")]
    SourceConflict {
        /// The project space.
        space: String,
        /// The source id that clashed.
        source_id: String,
    },
    /// A writer with a newer fence has written to the space: this writer must stop
    /// (docs/design.md#fencing, as the journal's fences).
    #[error("space {space} is fenced: writer fence {fence} < recorded fence {current}")]
    Fenced {
        /// The project space.
        space: String,
        /// This writer's fence.
        fence: u64,
        /// The fence recorded for the space.
        current: u64,
    },
    /// The request is malformed (an empty space or source id, a zero limit …).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The storage failed or could not be reached; the operation may be retried.
    #[error("memory storage unavailable: {0}")]
    Unavailable(String),
    /// Stored data is damaged or of an unknown schema.
    #[error("memory data is corrupt: {0}")]
    Corrupt(String),
    /// The embedding provider failed.
    #[error("embedding provider: {0}")]
    Embedding(String),
    /// The reranker failed, timed out or answered something unusable (the read path then
    /// keeps its own order).
    #[error("reranker: {0}")]
    Rerank(String),
    /// The semantic model (the compile job's [`SemanticModel`](crate::semantic::SemanticModel))
    /// failed or could not be reached.
    #[error("semantic model: {0}")]
    Model(String),
    /// A filesystem operation failed.
    #[error("memory i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// The memory crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
