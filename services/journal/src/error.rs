//! Journal errors.

/// Errors of every journal backend. Backends map their driver errors into these.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The session does not exist in this tenant (or its id is not acceptable).
    #[error("session {0} not found")]
    NotFound(String),
    /// `create_session` with an id that is taken.
    #[error("session {0} already exists")]
    AlreadyExists(String),
    /// An `ExpectedVersion::Exact` append found the stream at another version.
    #[error("stream {stream} is at version {actual}, expected {expected}")]
    Conflict {
        /// The stream appended to.
        stream: String,
        /// The version the writer expected.
        expected: u64,
        /// The stream's version.
        actual: u64,
    },
    /// A newer writer's fence is recorded: this writer lost ownership.
    #[error("write refused: fence {presented} is older than the recorded fence {recorded}")]
    Fenced {
        /// The fence the refused write carried.
        presented: u64,
        /// The session's recorded fence.
        recorded: u64,
    },
    /// The append's command key already has a recorded result; nothing was appended.
    #[error("command {0} was already recorded")]
    DuplicateCommand(String),
    /// The append is malformed (an audit record pointing at no event of its batch);
    /// nothing was written.
    #[error("invalid append: {0}")]
    InvalidBatch(String),
    /// Appends to archived sessions are refused.
    #[error("session {0} is archived")]
    Archived(String),
    /// The storage failed or could not be reached; the operation may be retried.
    #[error("journal storage unavailable: {0}")]
    Unavailable(String),
    /// Stored data is damaged or of an unknown schema.
    #[error("journal data is corrupt: {0}")]
    Corrupt(String),
    /// A filesystem operation (local backend) failed.
    #[error("journal i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// The journal's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
