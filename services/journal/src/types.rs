//! Value types of the store contract.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A writer's fencing token. Local profile: one constant fence (1).
pub type Fence = u64;

/// The fence used by the local profile's in-process lease, which is always held.
pub const LOCAL_FENCE: Fence = 1;

/// Addresses one session journal.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionKey {
    /// The owning tenant (the local profile has exactly one).
    pub tenant: String,
    /// The session id; `[A-Za-z0-9_-]{1,128}` is accepted by every backend.
    pub session_id: String,
}

impl SessionKey {
    /// A key from its parts.
    pub fn new(tenant: impl Into<String>, session_id: impl Into<String>) -> Self {
        Self {
            tenant: tenant.into(),
            session_id: session_id.into(),
        }
    }
}

/// A session's stored record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The owning tenant.
    pub tenant: String,
    /// The session id.
    pub session_id: String,
    /// A human-readable title.
    pub title: String,
    /// The project directory the session works in.
    pub project_root: String,
    /// Creation time (unix ms).
    pub created_at_ms: i64,
    /// Last `put_summary` (or creation) time (unix ms); session lists sort by it.
    pub updated_at_ms: i64,
    /// Whether the session was archived.
    pub archived: bool,
    /// The last projection summary written with `put_summary` (`null` before the first).
    pub summary: Value,
}

impl SessionRecord {
    /// The key addressing this session.
    pub fn key(&self) -> SessionKey {
        SessionKey::new(&self.tenant, &self.session_id)
    }
}

/// An event to append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    /// The event kind (`message`, `tool_call`, …); opaque to the journal.
    pub kind: String,
    /// The event body.
    pub payload: Value,
}

/// An event as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    /// Global sequence within the session journal, contiguous from 1.
    pub seq: u64,
    /// The stream it was appended to.
    pub stream: String,
    /// Sequence within `stream`, contiguous from 1.
    pub stream_seq: u64,
    /// The event kind.
    pub kind: String,
    /// The event body, as appended (even when stored as a blob).
    pub payload: Value,
    /// Append time (unix ms).
    pub ts_ms: i64,
    /// The fence of the writer that appended it.
    pub fence: Fence,
}

/// Optimistic-concurrency expectation for an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExpectedVersion {
    /// Append whatever the stream's version is.
    Any,
    /// The stream's last `stream_seq` must be exactly this (0 = empty stream).
    Exact(u64),
}

/// An idempotent command's result, recorded atomically with an append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandRecord {
    /// The idempotency key, unique per session.
    pub key: String,
    /// The result to return when the command is retried.
    pub result: Value,
}

/// One atomic append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppendBatch {
    /// The stream to append to.
    pub stream: String,
    /// The stream version the writer expects.
    pub expected: ExpectedVersion,
    /// The events, stored in order with contiguous sequences.
    pub events: Vec<NewEvent>,
    /// An idempotent command result to record with the events.
    pub command: Option<CommandRecord>,
    /// Permission decisions the events journal, recorded in the approvals audit in the
    /// same transaction (docs/audit.md).
    #[serde(default)]
    pub audit: Vec<crate::NewAudit>,
}

impl AppendBatch {
    /// A batch on `stream` with no version expectation and no command.
    pub fn any(stream: impl Into<String>, events: Vec<NewEvent>) -> Self {
        Self {
            stream: stream.into(),
            expected: ExpectedVersion::Any,
            events,
            command: None,
            audit: Vec::new(),
        }
    }
}

/// Payloads whose JSON is larger than this go to the blob table.
pub const BLOB_THRESHOLD_BYTES: usize = 64 * 1024;

/// The key of `bytes` in the blob table: lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Unix time in milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
