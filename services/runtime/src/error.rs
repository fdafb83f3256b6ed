//! Runtime errors and their one mapping to protocol error codes.

use lumina_protocol::{ErrorCode, ErrorObject};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("session {0} not found")]
    SessionNotFound(String),
    #[error("run {0} not found")]
    RunNotFound(String),
    #[error("permission request {0} is not pending")]
    PermissionNotPending(String),
    #[error("no a2a_delegate call {0} is waiting for its agent")]
    DelegateNotParked(String),
    #[error("invalid params: {0}")]
    InvalidParams(String),
    #[error("session {0} is archived")]
    Archived(String),
    #[error("session {0} has a running or queued turn; interrupt it first")]
    Busy(String),
    #[error("the project root {0} does not exist or is not a directory")]
    BadProjectRoot(String),
    #[error("this instance no longer owns the session (fenced)")]
    Fenced,
    #[error("session {session} is owned by instance {owner}")]
    OwnedElsewhere { session: String, owner: String },
    #[error("{0}")]
    Unavailable(String),
    #[error("this instance is draining and takes no new sessions")]
    Draining,
    #[error("settings: {0}")]
    Settings(#[from] crate::settings::SettingsError),
    #[error("{0}")]
    GoalNotFound(String),
    #[error("{0}")]
    GoalConflict(String),
    /// No agent team of that name.
    #[error("{0}")]
    TeamNotFound(String),
    /// The session's team state does not allow it (another team entered, a name taken).
    #[error("{0}")]
    TeamConflict(String),
    #[error("the message was blocked by a hook: {0}")]
    BlockedByHook(String),
    #[error("journal: {0}")]
    Journal(lumina_journal::Error),
}

impl From<lumina_journal::Error> for Error {
    fn from(err: lumina_journal::Error) -> Self {
        match err {
            lumina_journal::Error::Fenced { .. } => Error::Fenced,
            lumina_journal::Error::NotFound(id) => Error::SessionNotFound(id),
            lumina_journal::Error::Archived(id) => Error::Archived(id),
            other => Error::Journal(other),
        }
    }
}

impl Error {
    /// The protocol error for this runtime error (the only such mapping).
    pub fn to_error_object(&self) -> ErrorObject {
        let code = match self {
            Error::SessionNotFound(_)
            | Error::RunNotFound(_)
            | Error::PermissionNotPending(_)
            | Error::DelegateNotParked(_)
            | Error::GoalNotFound(_)
            | Error::TeamNotFound(_) => ErrorCode::NotFound,
            Error::InvalidParams(_) | Error::BadProjectRoot(_) | Error::Settings(_) => {
                ErrorCode::InvalidParams
            }
            Error::Archived(_)
            | Error::Busy(_)
            | Error::GoalConflict(_)
            | Error::TeamConflict(_) => ErrorCode::Conflict,
            Error::Fenced | Error::OwnedElsewhere { .. } => ErrorCode::Fenced,
            Error::BlockedByHook(_) => ErrorCode::Forbidden,
            Error::Unavailable(_) => ErrorCode::Unavailable,
            Error::Draining => ErrorCode::Draining,
            Error::Journal(lumina_journal::Error::Conflict { .. })
            | Error::Journal(lumina_journal::Error::DuplicateCommand(_)) => ErrorCode::Conflict,
            Error::Journal(lumina_journal::Error::Unavailable(_)) => ErrorCode::Unavailable,
            Error::Journal(_) => ErrorCode::Internal,
        };
        ErrorObject::new(code, self.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Bad arguments of a tool the runtime runs itself (`agent`, `goal_complete`, the memory
/// tools); the message is the error tool result the model sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ArgError {
    #[error("`{0}` (a non-empty string) is required")]
    Required(&'static str),
    #[error("`{0}` must be a non-empty string")]
    NotANonEmptyString(&'static str),
    #[error("`{0}` must be a string")]
    NotAString(&'static str),
    #[error("`{0}` must be an array of strings")]
    NotStrings(&'static str),
    #[error("`{0}` must be an array of tool names")]
    NotToolNames(&'static str),
}
