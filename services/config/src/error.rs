//! Errors of AppRoot resolution and settings loading. Messages name the file, variable or
//! key at fault and never include a setting's value: values may be secrets.

use std::path::PathBuf;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong while resolving the AppRoot or loading settings.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither `--app-root`, `LUMINA_HOME` nor a home directory is available.
    #[error("cannot find the home directory: set LUMINA_HOME or pass --app-root")]
    NoHomeDir,

    /// A file or directory could not be read, created or secured.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A settings file is not valid JSON. `reason` is serde_json's syntax message, which
    /// carries the line and column and never the document's text.
    #[error("{}: malformed JSON: {reason}", path.display())]
    Malformed { path: PathBuf, reason: String },

    /// A settings file is valid JSON but not an object.
    #[error("{}: expected a JSON object of settings at the top level", path.display())]
    NotAnObject { path: PathBuf },

    /// A setting has the wrong type or an unknown value. `origin` names the layer
    /// (a file path, "environment", "command line").
    #[error("{origin}: setting `{key}` must be {expected}")]
    InvalidSetting {
        origin: String,
        key: String,
        expected: String,
    },

    /// An environment variable could not be parsed as its setting's type.
    #[error("environment variable {var} must be {expected}")]
    InvalidEnv { var: String, expected: String },
}
