//! The crate's error type: every A2A error of the spec (and the JSON-RPC 2.0 ones) with its
//! code and `google.rpc.ErrorInfo` reason. The one mapping to wire error objects is
//! [`Error::to_object`]; pages for each code are in `docs/errors.md`.

use serde_json::{json, Value};

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The domain of every `ErrorInfo` this server sends.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("parse error: {0}")]
    Parse(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("method not found: {0}")]
    MethodNotFound(String),
    #[error("invalid params: {0}")]
    InvalidParams(String),
    #[error("internal error: {0}")]
    Internal(String),
    /// Unknown task, or a task of another principal (they look the same).
    #[error("task not found: {0}")]
    TaskNotFound(String),
    #[error("task cannot be canceled: {0}")]
    TaskNotCancelable(String),
    #[error("push notifications are not supported")]
    PushNotificationNotSupported,
    #[error("unsupported operation: {0}")]
    UnsupportedOperation(String),
    #[error("content type not supported: {0}")]
    ContentTypeNotSupported(String),
    #[error("invalid agent response: {0}")]
    InvalidAgentResponse(String),
    #[error("extended agent card not configured")]
    ExtendedAgentCardNotConfigured,
    #[error("extension support required: {0}")]
    ExtensionSupportRequired(String),
    #[error("A2A version not supported: {0}")]
    VersionNotSupported(String),
    /// A store failed (disk, database); the message never carries secrets.
    #[error("task store: {0}")]
    Store(String),
}

impl Error {
    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            Self::Parse(_) => -32700,
            Self::InvalidRequest(_) => -32600,
            Self::MethodNotFound(_) => -32601,
            Self::InvalidParams(_) => -32602,
            Self::Internal(_) | Self::Store(_) => -32603,
            Self::TaskNotFound(_) => -32001,
            Self::TaskNotCancelable(_) => -32002,
            Self::PushNotificationNotSupported => -32003,
            Self::UnsupportedOperation(_) => -32004,
            Self::ContentTypeNotSupported(_) => -32005,
            Self::InvalidAgentResponse(_) => -32006,
            Self::ExtendedAgentCardNotConfigured => -32007,
            Self::ExtensionSupportRequired(_) => -32008,
            Self::VersionNotSupported(_) => -32009,
        }
    }

    /// The `ErrorInfo` reason of an A2A error (none for the JSON-RPC ones).
    pub fn reason(&self) -> Option<&'static str> {
        Some(match self {
            Self::TaskNotFound(_) => "TASK_NOT_FOUND",
            Self::TaskNotCancelable(_) => "TASK_NOT_CANCELABLE",
            Self::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            Self::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
            Self::ContentTypeNotSupported(_) => "CONTENT_TYPE_NOT_SUPPORTED",
            Self::InvalidAgentResponse(_) => "INVALID_AGENT_RESPONSE",
            Self::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            Self::ExtensionSupportRequired(_) => "EXTENSION_SUPPORT_REQUIRED",
            Self::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
            _ => return None,
        })
    }

    /// The JSON-RPC error object. v1.0: `data` is an array of typed details with an
    /// `ErrorInfo`; v0.3 has no details.
    pub fn to_object(&self, v1: bool) -> Value {
        let message = match self {
            // Internal details stay in the log.
            Self::Internal(_) | Self::Store(_) => "internal error".to_owned(),
            other => other.to_string(),
        };
        let mut object = json!({ "code": self.code(), "message": message });
        if v1 {
            if let Some(reason) = self.reason() {
                object["data"] = json!([{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": reason,
                    "domain": ERROR_DOMAIN,
                }]);
            }
        }
        object
    }
}
