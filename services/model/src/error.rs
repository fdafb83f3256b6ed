//! Model client errors.

/// What went wrong talking to a model API. Messages never contain the API key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// 401/403: the key is invalid or lacks permission. Never retried, never falls back.
    #[error("authentication failed ({status}): {message}")]
    Auth { status: u16, message: String },
    /// 400/404/413/422 …: the request is wrong. Never retried, never falls back.
    #[error("request rejected ({status}): {message}")]
    BadRequest { status: u16, message: String },
    /// 429 after retries.
    #[error("rate limited ({status}): {message}")]
    RateLimited { status: u16, message: String },
    /// 408/409/5xx/529 or a streamed `overloaded_error`/`api_error` after retries.
    #[error("server error ({status}): {message}")]
    Server { status: u16, message: String },
    /// Connect timeout or no SSE event within the idle timeout.
    #[error("model API timed out: {0}")]
    Timeout(String),
    /// Connection refused/reset, or the stream ended before the message was complete.
    #[error("network error: {0}")]
    Network(String),
    /// The response could not be understood.
    #[error("malformed model response: {0}")]
    Protocol(String),
    /// The caller's cancellation token fired.
    #[error("cancelled")]
    Cancelled,
}

impl ModelError {
    /// Whether the retry policy retries this error (before any output was forwarded).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. }
                | ModelError::Server { .. }
                | ModelError::Timeout(_)
                | ModelError::Network(_)
        )
    }

    /// Whether the fallback model may be tried after retries are exhausted
    /// (docs/design.md#fallback: only 429, 5xx, timeout, EOF or network errors).
    pub fn allows_fallback(&self) -> bool {
        self.is_retryable()
    }

    /// A short stable code for journal events: the wire name of `run.failed`'s
    /// `lumina_protocol::RunFailureCode` (`cancelled` ends a run as interrupted instead).
    pub fn code(&self) -> &'static str {
        match self {
            ModelError::Auth { .. } => "model_auth",
            ModelError::BadRequest { .. } => "model_bad_request",
            ModelError::RateLimited { .. } => "model_rate_limited",
            ModelError::Server { .. } => "model_server_error",
            ModelError::Timeout(_) => "model_timeout",
            ModelError::Network(_) => "model_network",
            ModelError::Protocol(_) => "model_protocol",
            ModelError::Cancelled => "cancelled",
        }
    }
}
