//! The one mapping from driver and pool errors into the contract's [`Error`], and URL
//! redaction: no message this backend produces may carry the database password.

use std::error::Error as _;

use deadpool_postgres::{PoolError, TimeoutType};
use tokio_postgres::error::SqlState;

use crate::Error;

/// Maps `tokio_postgres` results into contract errors, naming the operation.
pub(super) trait PgResultExt<T> {
    fn pg(self, context: &str) -> crate::Result<T>;
}

impl<T> PgResultExt<T> for Result<T, tokio_postgres::Error> {
    fn pg(self, context: &str) -> crate::Result<T> {
        self.map_err(|e| driver_error(context, &e))
    }
}

/// Maps pool checkout results into contract errors.
pub(super) trait PoolResultExt<T> {
    fn pool(self) -> crate::Result<T>;
}

impl<T> PoolResultExt<T> for Result<T, PoolError> {
    fn pool(self) -> crate::Result<T> {
        self.map_err(|e| pool_error(&e))
    }
}

/// Damaged or unreadable stored data is [`Error::Corrupt`]; everything else (refused or
/// dropped connections, shutdowns, timeouts, lock conflicts, a missing schema) is
/// [`Error::Unavailable`]: the operation may succeed when retried or after `migrate`.
pub(super) fn driver_error(context: &str, e: &tokio_postgres::Error) -> Error {
    let message = format!("postgres: {context}: {}", describe(e));
    let corrupt = match e.code() {
        Some(code) => *code == SqlState::DATA_CORRUPTED || *code == SqlState::INDEX_CORRUPTED,
        // A value of an unexpected type or shape came back: the stored data is wrong.
        None => e.to_string().starts_with("error deserializing"),
    };
    if corrupt {
        Error::Corrupt(message)
    } else {
        Error::Unavailable(message)
    }
}

/// The driver's own `Display` is only the error kind; the cause holds the useful part
/// (the server's message, the OS error). Neither ever contains the connection string.
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        if let Some(detail) = db.detail() {
            text.push_str(&format!("; {detail}"));
        }
        if db.code() == &SqlState::UNDEFINED_TABLE {
            text.push_str("; is the schema migrated (`lumina-backend migrate`)?");
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

pub(super) fn pool_error(e: &PoolError) -> Error {
    match e {
        PoolError::Backend(e) => driver_error("connect", e),
        PoolError::Timeout(kind) => {
            let what = match kind {
                TimeoutType::Wait => "waiting for a free pooled connection",
                TimeoutType::Create => "connecting to the server",
                TimeoutType::Recycle => "checking a pooled connection",
            };
            Error::Unavailable(format!("postgres: timed out {what}"))
        }
        PoolError::Closed => Error::Unavailable("postgres: the connection pool is closed".into()),
        PoolError::NoRuntimeSpecified => {
            Error::Unavailable("postgres: the connection pool has no runtime".into())
        }
        PoolError::PostCreateHook(e) => {
            Error::Unavailable(format!("postgres: connection setup failed: {e}"))
        }
    }
}

/// `url` with any password replaced by `***`, for messages and logs. Handles URLs
/// (`postgres://user:secret@host/db`, `?password=secret`) and key-value strings
/// (`host=h password=secret`).
pub fn redact_url(url: &str) -> String {
    let url = url.trim();
    if let Some((scheme, rest)) = url.split_once("://") {
        // The authority ends at the first '/', '?' or '#'; user-info ends at its last '@'.
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let authority = match authority.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _password)) => format!("{user}:***@{host}"),
                None => format!("{userinfo}@{host}"),
            },
            None => authority.to_owned(),
        };
        return format!("{scheme}://{authority}{}", redact_params(tail, '&'));
    }
    redact_params(url, ' ')
}

/// Replaces the value of every `password=` parameter in a `sep`-separated list.
fn redact_params(text: &str, sep: char) -> String {
    let mut out = String::with_capacity(text.len());
    let mut redacting = false;
    for (i, piece) in text.split(sep).enumerate() {
        if i > 0 {
            out.push(sep);
        }
        let name_start = piece.rfind(['?', '&']).map_or(0, |p| p + 1);
        let lowered = piece[name_start..].to_ascii_lowercase();
        if lowered.starts_with("password=") {
            out.push_str(&piece[..name_start + "password=".len()]);
            out.push_str("***");
            redacting = sep == ' ' && piece.contains('\'') && !piece.ends_with('\'');
        } else if redacting {
            // A quoted key-value password containing spaces: swallow until its quote ends.
            redacting = !piece.contains('\'');
            out.pop();
        } else {
            out.push_str(piece);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_never_survive_redaction() {
        let cases = [
            (
                "postgres://lumina:s3cr%40t@db.internal:5432/lumina",
                "postgres://lumina:***@db.internal:5432/lumina",
            ),
            (
                "postgresql://lumina:p@ss@host/db?sslmode=disable",
                "postgresql://lumina:***@host/db?sslmode=disable",
            ),
            (
                "postgres://lumina@host/db?sslmode=disable&password=hunter2",
                "postgres://lumina@host/db?sslmode=disable&password=***",
            ),
            ("postgres://host/db", "postgres://host/db"),
            (
                "host=db user=lumina password=hunter2 dbname=x",
                "host=db user=lumina password=*** dbname=x",
            ),
            (
                "host=db password='two words' dbname=x",
                "host=db password=*** dbname=x",
            ),
        ];
        for (url, expected) in cases {
            let redacted = redact_url(url);
            assert_eq!(redacted, expected);
            for secret in ["s3cr", "p@ss", "hunter2", "two words"] {
                assert!(!redacted.contains(secret), "{redacted}");
            }
        }
    }
}
