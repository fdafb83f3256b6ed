//! Fencing, blobs and consumer offsets.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::{assert_error, create, key, numbered, read_all, record, TENANT};
use crate::{AppendBatch, Error, JournalStore};

/// Every write (and a claim) records a newer fence and is refused under an older one;
/// equal is fine.
pub async fn fencing(store: Arc<dyn JournalStore>) {
    store.create_session(&record("s1", 1_000), 2).await.unwrap();
    let k = key("s1");
    assert_eq!(store.fence(&k).await.unwrap(), 2);

    let fenced = |presented, recorded| Error::Fenced {
        presented,
        recorded,
    };
    assert_error(
        store
            .append(&k, 1, AppendBatch::any("a", numbered("x", 1)))
            .await,
        fenced(1, 2),
    );
    store
        .append(&k, 2, AppendBatch::any("a", numbered("x", 1)))
        .await
        .unwrap();
    store
        .append(&k, 5, AppendBatch::any("a", numbered("x", 1)))
        .await
        .unwrap();
    assert_eq!(store.fence(&k).await.unwrap(), 5);

    assert_error(
        store
            .append(&k, 3, AppendBatch::any("a", numbered("x", 1)))
            .await,
        fenced(3, 5),
    );
    assert_error(store.put_blob(&k, 3, b"stale").await, fenced(3, 5));
    assert_error(
        store.put_summary(&k, 3, &json!({"stale": true})).await,
        fenced(3, 5),
    );
    assert_error(store.set_consumer_offset(&k, 3, "c", 9).await, fenced(3, 5));
    assert_error(store.archive(&k, 3).await, fenced(3, 5));

    // Nothing a refused write carried was kept.
    let events = read_all(&*store, &k).await;
    assert_eq!(
        events.iter().map(|e| e.fence).collect::<Vec<_>>(),
        vec![2, 5]
    );
    let stale_sha = crate::sha256_hex(b"stale");
    assert_eq!(store.get_blob(&k, &stale_sha).await.unwrap(), None);
    assert_eq!(store.consumer_offset(&k, "c").await.unwrap(), 0);
    let session = store.session(TENANT, "s1").await.unwrap().unwrap();
    assert_eq!((session.summary, session.archived), (Value::Null, false));
    assert_eq!(store.fence(&k).await.unwrap(), 5);

    // Writes other than appends record a newer fence too.
    store.put_blob(&k, 7, b"fresh").await.unwrap();
    assert_eq!(store.fence(&k).await.unwrap(), 7);
    assert_error(
        store
            .append(&k, 5, AppendBatch::any("a", numbered("x", 1)))
            .await,
        fenced(5, 7),
    );
    store.set_consumer_offset(&k, 8, "c", 1).await.unwrap();
    store.put_summary(&k, 9, &json!({})).await.unwrap();
    assert_eq!(store.fence(&k).await.unwrap(), 9);

    // A claim records a newer fence and writes nothing else; an older one is refused.
    assert_error(store.claim(&k, 8).await, fenced(8, 9));
    let before = read_all(&*store, &k).await;
    store.claim(&k, 10).await.unwrap();
    store.claim(&k, 10).await.unwrap();
    assert_eq!(store.fence(&k).await.unwrap(), 10);
    assert_eq!(read_all(&*store, &k).await, before);
    assert_error(
        store
            .append(&k, 9, AppendBatch::any("a", numbered("x", 1)))
            .await,
        fenced(9, 10),
    );
    store.archive(&k, 10).await.unwrap();
    assert_eq!(store.fence(&k).await.unwrap(), 10);
}

/// Content-addressed blobs: sha256 hex keys, idempotent puts, exact bytes back.
pub async fn blobs(store: Arc<dyn JournalStore>) {
    let k = create(&*store, "s1").await;
    let hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
    assert_eq!(store.get_blob(&k, hello).await.unwrap(), None);
    assert_eq!(store.put_blob(&k, 1, b"hello").await.unwrap(), hello);
    assert_eq!(store.put_blob(&k, 1, b"hello").await.unwrap(), hello);
    assert_eq!(
        store.get_blob(&k, hello).await.unwrap(),
        Some(b"hello".to_vec())
    );

    let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    assert_eq!(store.put_blob(&k, 1, b"").await.unwrap(), empty);
    assert_eq!(store.get_blob(&k, empty).await.unwrap(), Some(Vec::new()));

    let binary: Vec<u8> = (0..=255u8).cycle().take(200_000).collect();
    let sha = store.put_blob(&k, 1, &binary).await.unwrap();
    assert_eq!(sha, crate::sha256_hex(&binary));
    assert_eq!(store.get_blob(&k, &sha).await.unwrap(), Some(binary));
}

/// Offsets start at 0, are per consumer and never move backwards.
pub async fn consumer_offsets(store: Arc<dyn JournalStore>) {
    let k = create(&*store, "s1").await;
    assert_eq!(store.consumer_offset(&k, "projection").await.unwrap(), 0);
    let mut seen = Vec::new();
    for offset in [5, 3, 5, 9, 0] {
        store
            .set_consumer_offset(&k, 1, "projection", offset)
            .await
            .unwrap();
        seen.push(store.consumer_offset(&k, "projection").await.unwrap());
    }
    assert_eq!(seen, vec![5, 5, 5, 9, 9]);
    assert_eq!(store.consumer_offset(&k, "usage").await.unwrap(), 0);
}
