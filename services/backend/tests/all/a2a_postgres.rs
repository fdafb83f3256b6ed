//! The cluster profile's A2A task store against a real PostgreSQL (the test kit's, the
//! schema applied by the migrations): the `TaskStore` conformance suite the in-memory and
//! SQLite stores pass (with its race: two instances applying the same journal event at once
//! write it once), and the rule only a shared store needs (a terminal task is final
//! whoever saves over it). The module name has `postgres::` in it, so scripts/test's quick
//! loop skips it.

use lumina_a2a::store::conformance;
use lumina_a2a::types::{Task, TaskState, TaskStatus};
use lumina_a2a::TaskStore;
use lumina_backend::a2a::pg_store::PgTaskStore;
use lumina_journal::postgres::PgJournal;
use lumina_testkit::postgres::PgServer;
use pretty_assertions::assert_eq;

async fn store() -> PgTaskStore {
    let pg = PgServer::shared().unwrap();
    let url = pg.create_unique_database("a2a").unwrap();
    let journal = PgJournal::connect(&url, 4).unwrap();
    journal.migrate().await.unwrap();
    PgTaskStore::new(journal.pool().clone())
}

#[tokio::test]
async fn the_task_store_passes_the_conformance_suite() {
    conformance::run(&store().await).await;
}

/// Two instances applying the same journal event at once (an execution and a read on
/// another instance): one `UPDATE … WHERE` wins, the event's message and status are written
/// once.
#[tokio::test]
async fn two_appliers_of_the_same_event_write_it_once() {
    conformance::race(std::sync::Arc::new(store().await)).await;
}

#[tokio::test]
async fn a_terminal_task_is_final_and_updates_order_per_owner() {
    let store = store().await;
    let mut task = Task {
        id: "t1".into(),
        context_id: "c1".into(),
        status: TaskStatus::now(TaskState::Working, None),
        artifacts: Vec::new(),
        history: Vec::new(),
        metadata: None,
    };
    // Two instances load the working task; one completes it, the other saves late.
    let stale = task.clone();
    task.status = TaskStatus::now(TaskState::Completed, None);
    store.save("t/alice", &task).await.unwrap();
    store.save("t/alice", &stale).await.unwrap();
    let loaded = store.load("t/alice", "t1").await.unwrap().unwrap();
    assert_eq!(loaded.task.status.state, TaskState::Completed);
    // Another owner's task of the same id is another task.
    store.save("t/bob", &stale).await.unwrap();
    let bobs = store.load("t/bob", "t1").await.unwrap().unwrap();
    assert_eq!(bobs.task.status.state, TaskState::Working);
    let mut times = Vec::new();
    for i in 0..5 {
        let mut next = stale.clone();
        next.id = format!("n{i}");
        store.save("t/alice", &next).await.unwrap();
        times.push(
            store
                .load("t/alice", &next.id)
                .await
                .unwrap()
                .unwrap()
                .updated_micros,
        );
    }
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
}
