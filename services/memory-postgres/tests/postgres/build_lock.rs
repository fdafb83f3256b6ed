//! One index builder per tenant across instances: while another instance holds the build
//! lock, a query answers from the published index without waiting and the index job waits
//! for it (seen in `pg_locks`, not by timing); when that instance's connection goes away
//! (it crashed), the lock is free and the job finishes.

use std::sync::Arc;
use std::time::Duration;

use lumina_memory::conformance::{sample_conversation, SPACE};
use lumina_memory::{BuildLimits, MemoryStore, RecallQuery};
use lumina_memory_postgres::{PgMemory, PgMemoryOptions};

use super::{fresh_database, psql};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instances_build_lock_is_respected_and_freed_by_its_crash() {
    let (url, database) = fresh_database().await;
    let options = PgMemoryOptions {
        tenant: "t1".into(),
        pool_size: 4,
        ..PgMemoryOptions::default()
    };
    let store = Arc::new(PgMemory::connect(&url, options, None).unwrap());
    store.append(sample_conversation(SPACE)).await.unwrap();

    // "Another instance" mid-build: it holds the tenant's lock in an open transaction.
    let (other, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let other_conn = tokio::spawn(connection);
    other.batch_execute("BEGIN").await.unwrap();
    other
        .execute(
            "SELECT pg_advisory_xact_lock(hashtext('lumina-memory-build:' || $1))",
            &[&"t1"],
        )
        .await
        .unwrap();

    // A query does not wait for it: nothing is published yet, so it finds nothing.
    let recall = store
        .recall(&RecallQuery::new(SPACE, "Biscuit is afraid of water"))
        .await
        .unwrap();
    assert!(recall.items.is_empty(), "{:?}", recall.items);

    // The index job waits for the lock.
    let job = {
        let store = store.clone();
        tokio::spawn(async move { store.sync(BuildLimits::default()).await })
    };
    let waiting = || {
        psql(
            &database,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted \
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .unwrap()
    };
    for _ in 0..2_000 {
        if waiting() == "1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(waiting(), "1", "the job should be waiting for the lock");
    assert!(!job.is_finished());

    // The other instance dies: its connection closes, PostgreSQL frees the lock.
    drop(other);
    let _ = other_conn.await;
    let report = job.await.unwrap().unwrap();
    assert!(report.published, "{report:?}");
    let recall = store
        .recall(&RecallQuery::new(SPACE, "Biscuit is afraid of water"))
        .await
        .unwrap();
    assert!(!recall.items.is_empty());
    // Every lock this store took was given back (none held, none waiting). `pg_locks` is
    // server-wide: other tests' databases are filtered out.
    assert_eq!(
        psql(
            &database,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        .unwrap(),
        "0"
    );
}
