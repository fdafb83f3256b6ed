//! The runtime journal: one durable, append-only event log per session, behind one store
//! contract ([`JournalStore`]) with a SQLite backend here and a PostgreSQL backend in the
//! cluster profile. Both run the same conformance suite (`conformance`, feature `testsuite`).
//!
//! The journal knows nothing of event semantics: an event is a `kind` string and a JSON
//! payload. Large payloads are moved to a content-addressed blob table transparently.
//!
//! This crate owns the contract ([`JournalStore`] and its value and error types), the
//! local backend ([`sqlite::SqliteJournal`], one `runtime.sqlite` per session under
//! `<AppRoot>/data/sessions`), the backend-independent conformance suite (feature `testsuite`), and the
//! throughput [`bench`] behind `lumina-backend bench journal`.
#![warn(missing_docs)]

mod audit;
pub mod bench;
#[cfg(feature = "testsuite")]
pub mod conformance;
mod error;
pub mod postgres;
pub mod sqlite;
mod types;

pub use audit::{newest_first, AuditCursor, AuditQuery, AuditRecord, NewAudit};
pub use error::{Error, Result};
pub use types::*;

use async_trait::async_trait;

/// The store contract. Every write carries the writer's fencing token and is refused (in the
/// same transaction) with [`Error::Fenced`] when a larger token has been recorded for the
/// session; a larger token is recorded by the write that carries it.
#[async_trait]
pub trait JournalStore: Send + Sync + 'static {
    /// Creates a session. Fails with [`Error::AlreadyExists`] if the id is taken (archived
    /// sessions keep their id). The record's `archived` flag is ignored: sessions start
    /// active.
    async fn create_session(&self, record: &SessionRecord, fence: Fence) -> Result<()>;

    /// The session's record, or `None` when it does not exist in this tenant (archived
    /// sessions are returned with `archived = true`).
    async fn session(&self, tenant: &str, session_id: &str) -> Result<Option<SessionRecord>>;

    /// Sessions of a tenant, newest first by `updated_at_ms`.
    async fn list_sessions(
        &self,
        tenant: &str,
        include_archived: bool,
    ) -> Result<Vec<SessionRecord>>;

    /// Appends events to one stream of a session, atomically. `expected` is checked against
    /// the stream's current version (its last `stream_seq`, 0 when empty); a mismatch is
    /// [`Error::Conflict`]. When `command` is set, the command result is recorded in the same
    /// transaction (insert-if-absent; an existing key is [`Error::DuplicateCommand`] and
    /// nothing is appended). Returns the stored events with their sequences.
    async fn append(
        &self,
        session: &SessionKey,
        fence: Fence,
        batch: AppendBatch,
    ) -> Result<Vec<StoredEvent>>;

    /// Events with `seq > after_seq`, in seq order, at most `limit`.
    async fn read(
        &self,
        session: &SessionKey,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>>;

    /// Events of one stream with `stream_seq > after`, in order, at most `limit`.
    async fn read_stream(
        &self,
        session: &SessionKey,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>>;

    /// The last global seq (0 for an empty journal).
    async fn head(&self, session: &SessionKey) -> Result<u64>;

    /// The last global seq of each listed session of `tenant`, in the order given; a session
    /// that does not exist in this tenant is left out. PostgreSQL answers in one statement,
    /// so a gateway checks thousands of subscriptions with one query instead of one each;
    /// this default asks [`JournalStore::head`] once per session.
    async fn heads(&self, tenant: &str, session_ids: &[String]) -> Result<Vec<(String, u64)>> {
        let mut heads = Vec::with_capacity(session_ids.len());
        for id in session_ids {
            match self.head(&SessionKey::new(tenant, id)).await {
                Ok(seq) => heads.push((id.clone(), seq)),
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(heads)
    }

    /// The recorded result of an idempotent command, if any.
    async fn command_result(
        &self,
        session: &SessionKey,
        key: &str,
    ) -> Result<Option<serde_json::Value>>;

    /// Stores bytes under their sha256 (hex) and returns the hash; idempotent.
    async fn put_blob(&self, session: &SessionKey, fence: Fence, bytes: &[u8]) -> Result<String>;

    /// The bytes stored under a sha256 hex hash.
    async fn get_blob(&self, session: &SessionKey, sha256: &str) -> Result<Option<Vec<u8>>>;

    /// A consumer's replay offset (0 when never set).
    async fn consumer_offset(&self, session: &SessionKey, consumer: &str) -> Result<u64>;

    /// Records a consumer's replay offset. Offsets never move backwards.
    async fn set_consumer_offset(
        &self,
        session: &SessionKey,
        fence: Fence,
        consumer: &str,
        offset: u64,
    ) -> Result<()>;

    /// Replaces the session's projection summary (title, status, usage … as JSON) and bumps
    /// `updated_at_ms`. The summary is derived data: it can always be rebuilt from events.
    async fn put_summary(
        &self,
        session: &SessionKey,
        fence: Fence,
        summary: &serde_json::Value,
    ) -> Result<()>;

    /// Marks the session archived (SQLite moves its directory to the archive folder).
    /// Archived sessions stay readable; appends to them fail with [`Error::Archived`].
    /// Archiving an archived session changes nothing (the fence is still checked).
    async fn archive(&self, session: &SessionKey, fence: Fence) -> Result<()>;

    /// Approvals audit records of a tenant (across its sessions, archived ones included)
    /// that match `query`, newest first (`ts_ms`, then `session_id`, then `seq`, all
    /// descending), at most `query.limit`. Another tenant's records are never listed.
    async fn list_audit(&self, tenant: &str, query: &AuditQuery) -> Result<Vec<AuditRecord>>;

    /// The largest fence recorded for the session (0 when none).
    async fn fence(&self, session: &SessionKey) -> Result<Fence>;

    /// Records `fence` as the session's fence and writes nothing else, so that from now on
    /// every write carrying a smaller one is refused. A new owner claims a session it took
    /// over before anything else: a former owner that still believes it owns the session
    /// (paused, partitioned) can no longer commit from that moment, not only from the new
    /// owner's first append. Refused with [`Error::Fenced`] when a larger fence is recorded.
    async fn claim(&self, session: &SessionKey, fence: Fence) -> Result<()>;
}
