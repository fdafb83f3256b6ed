//! Stable error codes carried in error frames.

use serde::{Deserialize, Serialize};

/// Every error code a server may return. The string forms are stable: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The frame was not valid JSON or not a request object.
    ParseError,
    /// The frame was not valid UTF-8 (or was a binary frame).
    InvalidUtf8,
    /// The frame exceeded the configured size limit.
    FrameTooLarge,
    /// The method name is not known to this server.
    UnknownMethod,
    /// The params did not match the method's schema.
    InvalidParams,
    /// The requested protocol version is not supported.
    UnsupportedVersion,
    /// Missing or invalid credentials.
    Unauthorized,
    /// Authenticated, but the token lacks the needed scope or tenant.
    Forbidden,
    /// The session, run or permission request does not exist (or is not visible).
    NotFound,
    /// An optimistic-concurrency or state conflict (e.g. the session is archived).
    Conflict,
    /// The session is owned by a writer with a newer fence; this writer was refused.
    Fenced,
    /// A dependency (store, model API, peer instance) is unavailable; retry later.
    Unavailable,
    /// The server is draining and does not take this request.
    Draining,
    /// A per-tenant limit (connections, submits per minute, concurrent runs) is reached;
    /// `data.retry_after_ms` says when to try again.
    RateLimited,
    /// The feature exists in the protocol but not in this server build.
    NotImplemented,
    /// Anything else. The message says what happened; nothing secret is in it.
    Internal,
}

impl ErrorCode {
    /// The stable string form, as sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "parse_error",
            ErrorCode::InvalidUtf8 => "invalid_utf8",
            ErrorCode::FrameTooLarge => "frame_too_large",
            ErrorCode::UnknownMethod => "unknown_method",
            ErrorCode::InvalidParams => "invalid_params",
            ErrorCode::UnsupportedVersion => "unsupported_version",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Fenced => "fenced",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Draining => "draining",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::NotImplemented => "not_implemented",
            ErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `error` member of an error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl ErrorObject {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
}

impl std::fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorObject {}
