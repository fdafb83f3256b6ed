//! The library's error type.

/// What serving can fail with (protocol problems are JSON-RPC errors, not these).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The transport's input or output failed.
    #[error("transport i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The HTTP server stopped with an error.
    #[error("http server: {0}")]
    Http(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
