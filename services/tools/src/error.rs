//! The crate's error type. Tools never return it to the model directly: they turn it into an
//! error [`crate::ToolOutput`]; settings and the runtime see it when rules or modes are invalid.

use std::io;

/// Errors from path resolution, permission rules and modes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A path argument resolves (lexically or through a symlink) outside the project root.
    #[error("path is outside the project root: {0}")]
    OutsideRoot(String),

    /// A symlink inside the root whose target does not exist: writing through it would create
    /// a file somewhere the root check never saw, so it is refused.
    #[error("path is a dangling symbolic link: {0}")]
    DanglingSymlink(String),

    /// A permission rule that cannot be parsed; settings report it as a warning.
    #[error("invalid permission rule `{rule}`: {reason}")]
    InvalidRule { rule: String, reason: String },

    /// A permission mode string that is none of the accepted spellings.
    #[error("invalid permission mode `{0}` (expected ask, accept-edits or bypass)")]
    InvalidMode(String),

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
