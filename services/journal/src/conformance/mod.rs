//! The conformance suite every [`JournalStore`] backend must pass, unchanged.
//!
//! A backend's integration tests expand [`journal_conformance_suite!`](crate::journal_conformance_suite)
//! with an async factory that yields a fresh, empty store per test (anything implementing
//! [`StoreFixture`], e.g. `Arc<dyn JournalStore>`, or a struct that also owns the temp dir or
//! database the store lives in). The store must serve tenant [`TENANT`]; [`OTHER_TENANT`] is
//! only ever used for lookups that must see nothing. The calling crate needs `tokio` (with
//! the `macros` and `rt-multi-thread` features) as a dependency.
//!
//! The checks are plain `pub async fn`s (in submodules, re-exported here), so the macro
//! stays a list of names.

// A test suite: panicking is how it reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Debug;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::{
    now_ms, AppendBatch, Error, ExpectedVersion, JournalStore, NewEvent, SessionKey, SessionRecord,
    StoredEvent,
};

/// The tenant every check writes to.
pub const TENANT: &str = "t1";
/// A tenant that must see none of [`TENANT`]'s data.
pub const OTHER_TENANT: &str = "t2";

/// What a conformance factory yields: a fresh store, plus whatever must outlive the test
/// (a temp dir, a database). Dropped when the test ends.
pub trait StoreFixture: Send + 'static {
    /// The store under test.
    fn store(&self) -> Arc<dyn JournalStore>;
}

impl StoreFixture for Arc<dyn JournalStore> {
    fn store(&self) -> Arc<dyn JournalStore> {
        Arc::clone(self)
    }
}

/// Expands to one `#[tokio::test]` per conformance check, each calling `$factory.await`
/// for a fresh [`StoreFixture`](crate::conformance::StoreFixture).
#[macro_export]
macro_rules! journal_conformance_suite {
    ($factory:expr) => {
        $crate::journal_conformance_suite!(@checks $factory;
            create_get_list,
            append_assigns_sequences,
            read_paging,
            expected_version_conflict,
            command_results,
            fencing,
            blobs,
            large_payloads,
            consumer_offsets,
            summary_in_list,
            heads_of_many_sessions,
            archive,
            tenant_isolation,
            concurrent_appends,
            unknown_session,
            audit_recorded_with_append,
            audit_filters_and_paging,
            audit_is_atomic_with_append,
        );
    };
    (@checks $factory:expr; $($check:ident),+ $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let fixture = $factory.await;
                let store = $crate::conformance::StoreFixture::store(&fixture);
                $crate::conformance::$check(store).await;
            }
        )+
    };
}

// ---- helpers -------------------------------------------------------------------------

fn record(id: &str, updated_at_ms: i64) -> SessionRecord {
    SessionRecord {
        tenant: TENANT.into(),
        session_id: id.into(),
        title: format!("session {id}"),
        project_root: "/work/project".into(),
        created_at_ms: 1_000,
        updated_at_ms,
        archived: false,
        summary: Value::Null,
    }
}

fn key(id: &str) -> SessionKey {
    SessionKey::new(TENANT, id)
}

fn event(kind: &str, payload: Value) -> NewEvent {
    NewEvent {
        kind: kind.into(),
        payload,
    }
}

fn numbered(kind: &str, n: usize) -> Vec<NewEvent> {
    (0..n).map(|i| event(kind, json!({ "n": i }))).collect()
}

fn batch(stream: &str, expected: ExpectedVersion, events: Vec<NewEvent>) -> AppendBatch {
    AppendBatch {
        stream: stream.into(),
        expected,
        events,
        command: None,
        audit: Vec::new(),
    }
}

/// The event a store should have produced (timestamps are checked separately).
fn stored(seq: u64, stream: &str, stream_seq: u64, new: &NewEvent, fence: u64) -> StoredEvent {
    StoredEvent {
        seq,
        stream: stream.into(),
        stream_seq,
        kind: new.kind.clone(),
        payload: new.payload.clone(),
        ts_ms: 0,
        fence,
    }
}

/// Checks the timestamps are plausible (a backend may use its database clock) and in seq
/// order, then zeroes them so whole events can be compared.
fn untimed(mut events: Vec<StoredEvent>) -> Vec<StoredEvent> {
    let now = now_ms();
    let mut previous = i64::MIN;
    for e in &mut events {
        assert!(
            (now - 300_000..=now + 300_000).contains(&e.ts_ms),
            "implausible ts_ms in {e:?}"
        );
        assert!(e.ts_ms >= previous, "ts_ms goes back in {e:?}");
        previous = e.ts_ms;
        e.ts_ms = 0;
    }
    events
}

/// Asserts `result` failed with exactly `expected` (variant and fields).
fn assert_error<T: Debug>(result: crate::Result<T>, expected: Error) {
    match result {
        Ok(value) => panic!("expected {expected:?}, got Ok({value:?})"),
        Err(actual) => assert_eq!(format!("{actual:?}"), format!("{expected:?}")),
    }
}

async fn create(store: &dyn JournalStore, id: &str) -> SessionKey {
    store.create_session(&record(id, 1_000), 1).await.unwrap();
    key(id)
}

async fn read_all(store: &dyn JournalStore, key: &SessionKey) -> Vec<StoredEvent> {
    store.read(key, 0, usize::MAX).await.unwrap()
}

mod audit;
mod events;
mod sessions;
mod state;

pub use audit::*;
pub use events::*;
pub use sessions::*;
pub use state::*;
