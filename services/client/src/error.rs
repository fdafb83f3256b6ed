//! The client's error type.

use lumina_protocol::ErrorObject;

/// Everything a client operation can fail with. Messages never contain credentials.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The connection could not be established (DNS, TCP, HTTP upgrade, unsupported URL).
    #[error("{0}")]
    Connect(String),
    /// The server refused the credentials during the upgrade (HTTP 401).
    #[error("{0}")]
    Unauthorized(String),
    /// The server answered the call with an error frame.
    #[error("server error {0}")]
    Server(ErrorObject),
    /// The connection is closed; calls in flight when it closed fail with this too.
    #[error("the connection to the server is closed")]
    Closed,
    /// The server did not answer within the call timeout.
    #[error("the server did not answer in time")]
    Timeout,
    /// A frame or result could not be decoded into the expected type.
    #[error("cannot decode the server's answer: {0}")]
    Decode(String),
    /// The request itself was unusable (params that do not serialize, an id already in flight).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
}

impl ClientError {
    /// The server's error object, when the server answered with an error frame.
    pub fn server_error(&self) -> Option<&ErrorObject> {
        match self {
            ClientError::Server(error) => Some(error),
            _ => None,
        }
    }
}

/// `Result` with [`ClientError`] as the default error.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;
