//! The crate's errors: one enum, mapped to tool results by [`crate::tools`].

use std::path::PathBuf;

/// What can go wrong in ingestion, search or a store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed (an empty query, `k` out of range, no paths …).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A path argument that is not inside the project root (or cannot be resolved).
    #[error("{0}")]
    Path(#[from] lumina_tools::Error),
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A document could not be turned into text (a damaged PDF, a .docx that is not a
    /// zip, text that is not UTF-8 …). Ingestion skips the file and reports it.
    #[error("cannot extract text from {path}: {reason}")]
    Extract {
        /// The file, relative to the project root.
        path: String,
        /// Why.
        reason: String,
    },
    /// The store failed or could not be reached; the operation may be retried.
    #[error("rag storage unavailable: {0}")]
    Unavailable(String),
    /// Stored data is damaged or of an unknown schema.
    #[error("rag data is corrupt: {0}")]
    Corrupt(String),
    /// The embedding provider failed (search falls back to full text).
    #[error("embedding failed: {0}")]
    Embedding(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
