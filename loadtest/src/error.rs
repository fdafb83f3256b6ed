//! The library's error type and the classification of client errors into report kinds.

use std::path::Path;

use lumina_client::ClientError;

/// Everything that stops a scenario from running (as opposed to errors *counted* during a
/// run, which end up in the report's `errors`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: options, missing or malformed files, refused URLs. Exit status 2.
    #[error("{0}")]
    Input(String),
    /// The target could not be used at all (nothing answers, credentials refused at set-up,
    /// an instance did not come back). Exit status 1.
    #[error("{0}")]
    Target(String),
    /// The report could not be written. Exit status 1.
    #[error("cannot write the report: {0}")]
    Report(String),
}

impl Error {
    /// The process exit status this error maps to: 2 for bad input, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Input(_) => 2,
            Error::Target(_) | Error::Report(_) => 1,
        }
    }

    /// A bad-input error about a file that could not be read.
    pub(crate) fn unreadable(what: &str, path: &Path, error: &std::io::Error) -> Error {
        Error::Input(format!("cannot read {what} {}: {error}", path.display()))
    }
}

/// What one harness operation failed with — starting, signalling or restarting an instance,
/// injecting or healing a fault, reading the journal, one raw connection. The scenario that
/// called it records the message in its report or turns it into an [`Error`].
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A program could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// A program ran and failed.
    #[error("`{command}` failed: {detail}")]
    Failed { command: String, detail: String },
    /// A file, socket or process could not be used (`what` names it).
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// PostgreSQL answered with an error (`what` says what was being done).
    #[error("{what}: {}", postgres_detail(.source))]
    Postgres {
        what: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    /// Nothing answered in time.
    #[error("{0} timed out")]
    Timeout(String),
    /// A call of the client failed (`what` says which).
    #[error("{what}: {source}")]
    Client {
        what: String,
        #[source]
        source: ClientError,
    },
    /// What the operation needs is missing (a setting, a command, a file, a privilege) or
    /// the target is not in the state it needs; the message says which.
    #[error("{0}")]
    Unavailable(String),
}

impl HarnessError {
    /// An [`HarnessError::Io`] naming what was being used.
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> HarnessError {
        HarnessError::Io {
            what: what.into(),
            source,
        }
    }
}

/// tokio-postgres' error with its cause (its own message is only the category).
fn postgres_detail(error: &tokio_postgres::Error) -> String {
    match std::error::Error::source(error) {
        Some(cause) => format!("{error}: {cause}"),
        None => error.to_string(),
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The report's name for a client error: `connect`, `unauthorized`, `closed`, `timeout`,
/// `decode`, `invalid_request` or `server:<code>`.
pub fn error_kind(error: &ClientError) -> String {
    match error {
        ClientError::Connect(_) => "connect".into(),
        ClientError::Unauthorized(_) => "unauthorized".into(),
        ClientError::Server(object) => format!("server:{}", object.code),
        ClientError::Closed => "closed".into(),
        ClientError::Timeout => "timeout".into(),
        ClientError::Decode(_) => "decode".into(),
        ClientError::InvalidRequest(_) => "invalid_request".into(),
    }
}

/// Whether a failed submit may succeed when retried with the same idempotency key (used
/// while an owner's lease lapses after a kill).
pub fn is_transient(error: &ClientError) -> bool {
    use lumina_client::protocol::ErrorCode;
    match error {
        ClientError::Timeout | ClientError::Closed => true,
        ClientError::Server(object) => matches!(
            object.code,
            ErrorCode::Unavailable | ErrorCode::Fenced | ErrorCode::Draining | ErrorCode::Internal
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumina_client::protocol::{ErrorCode, ErrorObject};

    #[test]
    fn kinds_and_transience() {
        let unavailable = ClientError::Server(ErrorObject::new(ErrorCode::Unavailable, "x"));
        assert_eq!(error_kind(&unavailable), "server:unavailable");
        assert!(is_transient(&unavailable));
        let bad = ClientError::Server(ErrorObject::new(ErrorCode::InvalidParams, "x"));
        assert!(!is_transient(&bad));
        assert_eq!(error_kind(&ClientError::Timeout), "timeout");
        assert_eq!(Error::Input("x".into()).exit_code(), 2);
        assert_eq!(Error::Target("x".into()).exit_code(), 1);
    }
}
