//! The crate's error type. Messages never carry expanded configuration values (secrets from
//! `${VAR}`), so HTTP errors are stripped of their URL.

use crate::client::auth::AuthError;
use crate::config::ConfigError;
use crate::jsonrpc::ErrorObject;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("could not start `{command}`: {reason}")]
    Spawn { command: String, reason: String },
    /// The transport is gone (process exited, stream closed, session closed).
    #[error("{0}")]
    Closed(String),
    /// A non-success HTTP status. `rpc` is the JSON-RPC error in the body, if any.
    #[error("HTTP {status}{}", rpc.as_ref().map(|e| format!(": {e}")).unwrap_or_default())]
    HttpStatus {
        status: u16,
        rpc: Option<ErrorObject>,
    },
    #[error("HTTP request failed: {0}")]
    Http(String),
    /// The server forgot our session (404 with `Mcp-Session-Id`): re-initialize.
    #[error("the MCP session expired (HTTP 404); reconnect to start a new one")]
    SessionExpired,
    #[error("{method} failed: {error}")]
    Rpc { method: String, error: ErrorObject },
    #[error("{method} timed out after {ms} ms")]
    Timeout { method: String, ms: u64 },
    #[error("cancelled")]
    Cancelled,
    #[error(
        "the server answered with protocol version `{0}`, which lumina does not speak \
         (supported: 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)"
    )]
    UnsupportedVersion(String),
    #[error("no MCP server named `{0}` is configured")]
    UnknownServer(String),
    #[error("cannot record MCP trust: {0}")]
    Trust(String),
    /// Authorization (OAuth) is needed, under way or failed.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The peer broke the protocol (malformed message, missing field, ...).
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl Error {
    /// A reqwest error without its URL (URLs may hold expanded secrets).
    pub(crate) fn http(e: reqwest::Error) -> Self {
        let e = e.without_url();
        let mut msg = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            source = s.source();
        }
        Error::Http(msg)
    }

    /// Whether the connection this error came from is unusable and must be re-established.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, Error::Closed(_) | Error::SessionExpired)
    }
}
