//! PostgreSQL-specific behaviour: migrations, tenants as columns, fencing under contention,
//! outages of the server, secrets in errors, and the throughput benchmark.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lumina_journal::postgres::{self, PgJournal, PgOptions, SCHEMA_VERSION};
use lumina_journal::{
    bench, AppendBatch, CommandRecord, Error, JournalStore, NewEvent, SessionKey, SessionRecord,
    BLOB_THRESHOLD_BYTES,
};
use lumina_testkit::postgres::PgServer;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::pg_store;

fn record(tenant: &str, id: &str) -> SessionRecord {
    SessionRecord {
        tenant: tenant.into(),
        session_id: id.into(),
        title: format!("session {id}"),
        project_root: "/work/project".into(),
        created_at_ms: 1_000,
        updated_at_ms: 1_000,
        archived: false,
        summary: serde_json::Value::Null,
    }
}

fn events(n: usize) -> Vec<NewEvent> {
    (0..n)
        .map(|i| NewEvent {
            kind: "message".into(),
            payload: json!({ "n": i }),
        })
        .collect()
}

/// Options that make an outage show within a couple of seconds.
fn impatient(pool_size: usize) -> PgOptions {
    PgOptions {
        pool_size,
        connect_timeout_ms: 1_000,
        wait_timeout_ms: 2_000,
        statement_timeout_ms: 5_000,
    }
}

fn assert_unavailable<T: std::fmt::Debug>(result: lumina_journal::Result<T>) -> String {
    match result {
        Err(Error::Unavailable(message)) => message,
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_is_idempotent_and_safe_to_run_concurrently() {
    let server = PgServer::shared().unwrap();
    let url = server.create_unique_database("migrate").unwrap();
    let a = PgJournal::connect(&url, 2).unwrap();
    let b = PgJournal::connect(&url, 2).unwrap();
    assert_eq!(a.schema_version().await.unwrap(), None);

    let (ra, rb) = tokio::join!(a.migrate(), b.migrate());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    // Each migration runs in its own transaction under the lock, so two concurrent callers
    // may share the work: every version is applied exactly once, by one of them.
    let mut applied: Vec<i32> = ra
        .applied
        .iter()
        .chain(rb.applied.iter())
        .copied()
        .collect();
    applied.sort();
    let all: Vec<i32> = postgres::migrate::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(applied, all);
    assert_eq!((ra.version, rb.version), (SCHEMA_VERSION, SCHEMA_VERSION));

    let again = a.migrate().await.unwrap();
    assert_eq!(again.applied, Vec::<i32>::new());
    assert_eq!(a.schema_version().await.unwrap(), Some(SCHEMA_VERSION));
    let database = url.rsplit('/').next().unwrap();
    assert_eq!(
        server
            .psql(database, "SELECT count(*) FROM schema_version")
            .unwrap(),
        postgres::migrate::MIGRATIONS.len().to_string()
    );
    // Through a plain client too, as `/readyz` would.
    let mut client = a.pool().get().await.unwrap();
    assert_eq!(
        postgres::schema_version(&client).await.unwrap(),
        Some(SCHEMA_VERSION)
    );
    assert_eq!(
        postgres::migrate(&mut client).await.unwrap().applied,
        Vec::<i32>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_database_serves_many_tenants_apart() {
    let fixture = pg_store().await;
    let store = &fixture.store;
    for tenant in ["t1", "t2"] {
        store
            .create_session(&record(tenant, "same"), 1)
            .await
            .unwrap();
    }
    let t1 = SessionKey::new("t1", "same");
    let t2 = SessionKey::new("t2", "same");
    store
        .append(&t1, 1, AppendBatch::any("a", events(3)))
        .await
        .unwrap();
    store
        .append(&t2, 4, AppendBatch::any("a", events(1)))
        .await
        .unwrap();
    assert_eq!(
        (
            store.head(&t1).await.unwrap(),
            store.head(&t2).await.unwrap()
        ),
        (3, 1)
    );
    assert_eq!(
        (
            store.fence(&t1).await.unwrap(),
            store.fence(&t2).await.unwrap()
        ),
        (1, 4)
    );
    assert_eq!(
        store.list_sessions("t2", true).await.unwrap(),
        vec![record("t2", "same")]
    );
    store.archive(&t1, 1).await.unwrap();
    assert!(!store.session("t2", "same").await.unwrap().unwrap().archived);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_jsonb_cannot_hold_round_trip_through_blobs() {
    let fixture = pg_store().await;
    let store = &fixture.store;
    store.create_session(&record("t1", "s1"), 1).await.unwrap();
    let k = SessionKey::new("t1", "s1");
    let big = json!({ "text": "x".repeat(BLOB_THRESHOLD_BYTES + 1) });
    let odd = vec![
        NewEvent {
            kind: "tool".into(),
            payload: json!({ "output": "a\u{0}b", "nested": ["\u{0}"] }),
        },
        NewEvent {
            kind: "tool".into(),
            payload: big.clone(),
        },
        NewEvent {
            kind: "tool".into(),
            payload: big,
        },
    ];
    let mut with_command = AppendBatch::any("a", odd.clone());
    with_command.command = Some(CommandRecord {
        key: "c1".into(),
        result: json!({"ok": true}),
    });
    let appended = store.append(&k, 1, with_command).await.unwrap();
    let read = store.read(&k, 0, 10).await.unwrap();
    assert_eq!(read, appended);
    let payloads: Vec<_> = read.into_iter().map(|e| e.payload).collect();
    assert_eq!(
        payloads,
        odd.into_iter().map(|e| e.payload).collect::<Vec<_>>()
    );

    // The duplicate large payload is stored once.
    let database = fixture.url.rsplit('/').next().unwrap();
    let blobs = PgServer::shared()
        .unwrap()
        .psql(database, "SELECT count(*) FROM blobs WHERE tenant = 't1'")
        .unwrap();
    assert_eq!(blobs, "2");
}

/// Writers with growing fences race on one session: once a fence is recorded no older
/// writer commits, so along seq the fence never decreases, and a refused writer stays
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_never_decreases_along_seq_under_interleaved_writers() {
    const WRITERS: u64 = 6;
    const BATCHES: usize = 25;
    let fixture = pg_store().await;
    let store: Arc<dyn JournalStore> = fixture.store.clone();
    store.create_session(&record("t1", "s1"), 1).await.unwrap();
    let k = SessionKey::new("t1", "s1");

    let mut tasks = Vec::new();
    for fence in 1..=WRITERS {
        let (store, k) = (Arc::clone(&store), k.clone());
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for b in 0..BATCHES {
                // Later writers start later, like successive owners after takeovers.
                if b == 0 {
                    tokio::time::sleep(Duration::from_millis(fence * 15)).await;
                }
                let result = store
                    .append(&k, fence, AppendBatch::any(format!("w{fence}"), events(2)))
                    .await;
                outcomes.push(match result {
                    Ok(_) => Ok(()),
                    Err(Error::Fenced {
                        presented,
                        recorded,
                    }) => {
                        assert_eq!(presented, fence);
                        assert!(recorded > fence, "fenced by {recorded} <= {fence}");
                        Err(())
                    }
                    Err(e) => panic!("writer {fence}: {e}"),
                });
            }
            (fence, outcomes)
        }));
    }
    for task in tasks {
        let (fence, outcomes) = task.await.unwrap();
        if let Some(first_refusal) = outcomes.iter().position(|o| o.is_err()) {
            assert!(
                outcomes[first_refusal..].iter().all(|o| o.is_err()),
                "writer {fence} committed after being fenced: {outcomes:?}"
            );
        }
    }

    let all = store.read(&k, 0, usize::MAX).await.unwrap();
    assert!(!all.is_empty());
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=all.len() as u64).collect::<Vec<_>>()
    );
    for pair in all.windows(2) {
        assert!(
            pair[0].fence <= pair[1].fence,
            "fence decreased at seq {}: {} -> {}",
            pair[1].seq,
            pair[0].fence,
            pair[1].fence
        );
    }
    assert_eq!(store.fence(&k).await.unwrap(), WRITERS);
    // The same, asked of the table itself.
    let database = fixture.url.rsplit('/').next().unwrap();
    let decreases = PgServer::shared()
        .unwrap()
        .psql(
            database,
            "SELECT count(*) FROM events a JOIN events b
               ON b.tenant = a.tenant AND b.session_id = a.session_id AND b.seq = a.seq + 1
             WHERE b.fence < a.fence",
        )
        .unwrap();
    assert_eq!(decreases, "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_is_unavailable_quickly_and_recovery_follows_restart() {
    let mut server = PgServer::start().unwrap();
    let url = server.create_database("outage").unwrap();
    let store = PgJournal::connect_with(&url, &impatient(4)).unwrap();
    store.migrate().await.unwrap();
    store.create_session(&record("t1", "s1"), 1).await.unwrap();
    let k = SessionKey::new("t1", "s1");
    store
        .append(&k, 1, AppendBatch::any("a", events(3)))
        .await
        .unwrap();

    server.stop().unwrap();
    for _ in 0..3 {
        let started = Instant::now();
        let message =
            assert_unavailable(store.append(&k, 1, AppendBatch::any("a", events(1))).await);
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "took {:?}",
            started.elapsed()
        );
        assert!(message.contains("postgres"), "{message}");
        eprintln!("while stopped: {message}");
    }
    assert_unavailable(store.health().await);
    assert_unavailable(store.read(&k, 0, 10).await);

    server.start_again().unwrap();
    store.health().await.unwrap();
    store
        .append(&k, 1, AppendBatch::any("a", events(2)))
        .await
        .unwrap();
    let all = store.read(&k, 0, 100).await.unwrap();
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );

    // A crash (immediate shutdown) loses nothing that was committed.
    server.kill().unwrap();
    assert_unavailable(store.head(&k).await);
    server.start_again().unwrap();
    assert_eq!(store.head(&k).await.unwrap(), 5);
    assert_eq!(store.read(&k, 0, 100).await.unwrap(), all);
}

#[tokio::test]
async fn errors_never_show_the_password() {
    let secret = "pa55-w0rd-never-shown";
    let unreachable = format!("postgres://lumina:{secret}@127.0.0.1:1/lumina");
    let store = PgJournal::connect_with(&unreachable, &impatient(1)).unwrap();
    let message = assert_unavailable(store.health().await);
    assert!(!message.contains(secret), "{message}");
    let message = assert_unavailable(store.head(&SessionKey::new("t", "s")).await);
    assert!(!message.contains(secret), "{message}");

    let invalid = format!("postgres://lumina:{secret}@127.0.0.1:notaport/lumina");
    let message = assert_unavailable(PgJournal::connect(&invalid, 1));
    assert!(!message.contains(secret), "{message}");
    assert!(message.contains("lumina:***@127.0.0.1"), "{message}");
}

/// `cargo test -p lumina-journal --test all -- --ignored --nocapture pg_bench`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: prints PostgreSQL journal throughput"]
async fn pg_bench() {
    let server = PgServer::start().unwrap();
    let url = server.create_database("bench").unwrap();
    let store = PgJournal::connect(&url, 4).unwrap();
    store.migrate().await.unwrap();
    let report = bench::run(Arc::new(store), 5_000, 100, 200).await.unwrap();
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
}
