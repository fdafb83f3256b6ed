//! The local profile's A2A task store (`SqliteTaskStore`, one file on disk): the `TaskStore`
//! conformance suite the in-memory and PostgreSQL stores pass — the operations, the
//! compare-and-set of the applied seq, and two instances applying the same journal event at
//! once (exactly one writes it: one history message, one status).

use std::sync::Arc;

use lumina_a2a::store::conformance;
use lumina_backend::a2a::store::SqliteTaskStore;

fn store(dir: &tempfile::TempDir) -> SqliteTaskStore {
    SqliteTaskStore::open(&dir.path().join("a2a.sqlite")).unwrap()
}

#[tokio::test]
async fn the_task_store_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run(&store(&dir)).await;
}

#[tokio::test]
async fn two_appliers_of_the_same_event_write_it_once() {
    let dir = tempfile::tempdir().unwrap();
    conformance::race(Arc::new(store(&dir))).await;
}
