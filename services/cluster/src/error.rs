//! The one error type of this crate and its mapping from Redis client errors.

use std::time::Duration;

/// What can go wrong when talking to Redis or to another instance through it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// Redis could not be reached or did not answer in time. Messages never carry credentials.
    #[error("redis unavailable: {0}")]
    Unavailable(String),
    /// An RPC call's deadline passed before a reply arrived.
    #[error("rpc call timed out")]
    Timeout,
    /// The session lease is no longer held by this instance.
    #[error("lease lost for session {0}")]
    LeaseLost(String),
    /// This instance's registry entry lapsed (its incarnation is gone): it may take no lease
    /// until it registered again.
    #[error("instance {0} is not registered")]
    NotRegistered(String),
    /// The remote handler answered with an error.
    #[error("remote error: {0}")]
    Remote(String),
    /// Redis or a peer sent something this crate does not understand.
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// `Result` with [`ClusterError`] as the default error.
pub type Result<T, E = ClusterError> = std::result::Result<T, E>;

impl ClusterError {
    pub(crate) fn protocol(message: impl Into<String>) -> Self {
        ClusterError::Protocol(message.into())
    }

    pub(crate) fn command_timeout(timeout: Duration) -> Self {
        ClusterError::Unavailable(format!("no answer within {} ms", timeout.as_millis()))
    }
}

/// Maps a client error. Server replies that are not about connectivity (wrong type, script
/// errors) are protocol errors; everything else means Redis is unavailable to us.
///
/// The redis crate's messages name the failing operation and the OS error, never the URL;
/// [`crate::conn::Redis`] additionally scrubs the configured password before this is built.
pub(crate) fn from_redis(
    err: &redis::RedisError,
    scrub: impl Fn(String) -> String,
) -> ClusterError {
    use redis::ErrorKind;
    // Server errors read `CODE: detail` (the crate's Display quotes extension codes).
    let message = scrub(match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => format!("{code}: {detail}"),
        _ => err.to_string(),
    });
    match err.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType | ErrorKind::Extension => {
            ClusterError::Protocol(message)
        }
        ErrorKind::Server(kind) if !is_availability(kind) => ClusterError::Protocol(message),
        _ => ClusterError::Unavailable(message),
    }
}

/// Whether Redis answered NOGROUP (the stream or its consumer group is gone, e.g. after a
/// Redis restart) — the one server error the RPC layer repairs by itself.
pub(crate) fn is_missing_group(err: &ClusterError) -> bool {
    matches!(err, ClusterError::Protocol(message) if message.starts_with("NOGROUP"))
}

fn is_availability(kind: redis::ServerErrorKind) -> bool {
    use redis::ServerErrorKind as K;
    matches!(
        kind,
        K::BusyLoading | K::TryAgain | K::ClusterDown | K::MasterDown | K::ReadOnly | K::NoPerm
    )
}
