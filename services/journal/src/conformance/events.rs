//! Appends and reads: sequences, paging, optimistic concurrency, commands, large payloads.

use std::collections::BTreeMap;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::{assert_error, batch, create, event, numbered, read_all, stored, untimed};
use crate::{
    AppendBatch, CommandRecord, Error, ExpectedVersion, JournalStore, StoredEvent,
    BLOB_THRESHOLD_BYTES,
};

/// One contiguous global seq across streams; contiguous per-stream seqs.
pub async fn append_assigns_sequences(store: Arc<dyn JournalStore>) {
    let k = create(&*store, "s1").await;
    let a1 = vec![
        event("message", json!({"text": "hi"})),
        event("model", json!([1, 2])),
    ];
    let b1 = vec![event("tool", json!("call"))];
    let a2 = vec![event("usage", json!({"tokens": 7}))];

    let r1 = store
        .append(&k, 1, AppendBatch::any("a", a1.clone()))
        .await
        .unwrap();
    let r2 = store
        .append(&k, 1, AppendBatch::any("b", b1.clone()))
        .await
        .unwrap();
    let r3 = store
        .append(&k, 1, AppendBatch::any("a", a2.clone()))
        .await
        .unwrap();

    let expected = vec![
        stored(1, "a", 1, &a1[0], 1),
        stored(2, "a", 2, &a1[1], 1),
        stored(3, "b", 1, &b1[0], 1),
        stored(4, "a", 3, &a2[0], 1),
    ];
    let returned: Vec<StoredEvent> = [r1, r2, r3].concat();
    assert_eq!(untimed(returned.clone()), expected);
    assert_eq!(read_all(&*store, &k).await, returned);
    assert_eq!(store.head(&k).await.unwrap(), 4);
    assert_eq!(
        untimed(store.read_stream(&k, "a", 0, 100).await.unwrap()),
        vec![
            expected[0].clone(),
            expected[1].clone(),
            expected[3].clone()
        ]
    );
    assert_eq!(
        untimed(store.read_stream(&k, "b", 0, 100).await.unwrap()),
        vec![expected[2].clone()]
    );
    // An empty batch appends nothing and moves nothing.
    assert_eq!(
        store
            .append(&k, 1, AppendBatch::any("a", vec![]))
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(store.head(&k).await.unwrap(), 4);
}

/// `after` + `limit` paging over the whole journal and over one stream.
pub async fn read_paging(store: Arc<dyn JournalStore>) {
    let k = create(&*store, "s1").await;
    for i in 0..5 {
        store
            .append(&k, 1, AppendBatch::any("a", numbered("x", 2)))
            .await
            .unwrap();
        store
            .append(&k, 1, AppendBatch::any("b", vec![event("y", json!(i))]))
            .await
            .unwrap();
    }
    let all = read_all(&*store, &k).await;
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=15).collect::<Vec<_>>()
    );

    let mut paged = Vec::new();
    let mut after = 0;
    loop {
        let page = store.read(&k, after, 4).await.unwrap();
        assert!(
            page.len() <= 4,
            "page larger than the limit: {}",
            page.len()
        );
        let Some(last) = page.last() else { break };
        after = last.seq;
        paged.extend(page);
    }
    assert_eq!(paged, all);
    assert_eq!(store.read(&k, 12, 100).await.unwrap(), all[12..].to_vec());
    assert_eq!(store.read(&k, 15, 100).await.unwrap(), vec![]);
    assert_eq!(store.read(&k, 0, 0).await.unwrap(), vec![]);

    let b: Vec<StoredEvent> = all.iter().filter(|e| e.stream == "b").cloned().collect();
    assert_eq!(
        b.iter().map(|e| e.stream_seq).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
    assert_eq!(
        store.read_stream(&k, "b", 2, 2).await.unwrap(),
        b[2..4].to_vec()
    );
    assert_eq!(store.read_stream(&k, "b", 5, 2).await.unwrap(), vec![]);
    assert_eq!(store.read_stream(&k, "none", 0, 10).await.unwrap(), vec![]);
}

/// `Exact` is checked against the stream's last `stream_seq`; a conflict appends nothing.
pub async fn expected_version_conflict(store: Arc<dyn JournalStore>) {
    let k = create(&*store, "s1").await;
    let first = store
        .append(
            &k,
            1,
            batch("a", ExpectedVersion::Exact(0), numbered("x", 1)),
        )
        .await
        .unwrap();
    assert_eq!(first.len(), 1);

    for stale in [0, 5] {
        assert_error(
            store
                .append(
                    &k,
                    1,
                    batch("a", ExpectedVersion::Exact(stale), numbered("x", 3)),
                )
                .await,
            Error::Conflict {
                stream: "a".into(),
                expected: stale,
                actual: 1,
            },
        );
    }
    assert_eq!(read_all(&*store, &k).await, first);

    let next = store
        .append(
            &k,
            1,
            batch("a", ExpectedVersion::Exact(1), numbered("x", 2)),
        )
        .await
        .unwrap();
    assert_eq!(
        next.iter()
            .map(|e| (e.seq, e.stream_seq))
            .collect::<Vec<_>>(),
        vec![(2, 2), (3, 3)]
    );
    // Versions are per stream: a fresh stream is at 0 whatever the global head is.
    let other = store
        .append(
            &k,
            1,
            batch("b", ExpectedVersion::Exact(0), numbered("x", 1)),
        )
        .await
        .unwrap();
    assert_eq!((other[0].seq, other[0].stream_seq), (4, 1));
}

/// Command results are recorded with their append, and a known key refuses the append.
pub async fn command_results(store: Arc<dyn JournalStore>) {
    let k = create(&*store, "s1").await;
    assert_eq!(store.command_result(&k, "k1").await.unwrap(), None);

    let mut first = AppendBatch::any("a", numbered("x", 2));
    first.command = Some(CommandRecord {
        key: "k1".into(),
        result: json!({"turn": 1, "ok": true}),
    });
    let appended = store.append(&k, 1, first).await.unwrap();
    assert_eq!(
        store.command_result(&k, "k1").await.unwrap(),
        Some(json!({"turn": 1, "ok": true}))
    );

    let mut again = AppendBatch::any("a", numbered("y", 1));
    again.command = Some(CommandRecord {
        key: "k1".into(),
        result: json!("second"),
    });
    assert_error(
        store.append(&k, 1, again).await,
        Error::DuplicateCommand("k1".into()),
    );
    assert_eq!(
        store.command_result(&k, "k1").await.unwrap(),
        Some(json!({"turn": 1, "ok": true}))
    );
    assert_eq!(read_all(&*store, &k).await, appended);

    // A refused append records no command result either.
    let mut conflicting = batch("a", ExpectedVersion::Exact(0), numbered("z", 1));
    conflicting.command = Some(CommandRecord {
        key: "k2".into(),
        result: json!(2),
    });
    assert_error(
        store.append(&k, 1, conflicting).await,
        Error::Conflict {
            stream: "a".into(),
            expected: 0,
            actual: 2,
        },
    );
    assert_eq!(store.command_result(&k, "k2").await.unwrap(), None);
    assert_eq!(store.head(&k).await.unwrap(), 2);
}

/// Payloads above [`BLOB_THRESHOLD_BYTES`] come back unchanged through both reads.
pub async fn large_payloads(store: Arc<dyn JournalStore>) {
    let k = create(&*store, "s1").await;
    let big = json!({ "text": "x".repeat(BLOB_THRESHOLD_BYTES + 10), "n": 1 });
    let bigger = json!({ "items": vec!["y".repeat(1_000); 2 * BLOB_THRESHOLD_BYTES / 1_000] });
    let events = vec![
        event("tool", big.clone()),
        event("small", json!({"ok": true})),
        event("tool", big.clone()), // the same bytes: stored once, read twice
        event("tool", bigger.clone()),
    ];
    let appended = store
        .append(&k, 1, AppendBatch::any("a", events.clone()))
        .await
        .unwrap();
    let expected: Vec<StoredEvent> = (1..)
        .zip(&events)
        .map(|(n, e)| stored(n, "a", n, e, 1))
        .collect();
    assert_eq!(untimed(appended.clone()), expected);
    assert_eq!(read_all(&*store, &k).await, appended);
    assert_eq!(
        store.read_stream(&k, "a", 2, 10).await.unwrap(),
        appended[2..].to_vec()
    );
}

/// Concurrent appenders get contiguous, unique sequences; racing `Exact` appends on one
/// stream let exactly one through.
pub async fn concurrent_appends(store: Arc<dyn JournalStore>) {
    const TASKS: usize = 8;
    const BATCHES: usize = 20;
    const PER_BATCH: usize = 3;
    let k = create(&*store, "s1").await;

    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (store, k) = (Arc::clone(&store), k.clone());
        tasks.push(tokio::spawn(async move {
            let mut appended = Vec::new();
            for b in 0..BATCHES {
                // Half the batches share one stream, half go to the task's own stream.
                let stream = if b % 2 == 0 {
                    "shared".to_owned()
                } else {
                    format!("own-{t}")
                };
                appended.extend(
                    store
                        .append(&k, 1, AppendBatch::any(stream, numbered("x", PER_BATCH)))
                        .await
                        .unwrap(),
                );
            }
            appended
        }));
    }
    let mut returned = Vec::new();
    for task in tasks {
        returned.extend(task.await.unwrap());
    }
    returned.sort_by_key(|e| e.seq);

    let all = read_all(&*store, &k).await;
    let total = (TASKS * BATCHES * PER_BATCH) as u64;
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=total).collect::<Vec<_>>()
    );
    assert_eq!(returned, all);
    let mut per_stream: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for e in &all {
        per_stream.entry(&e.stream).or_default().push(e.stream_seq);
    }
    for (stream, seqs) in &per_stream {
        let contiguous: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!((stream, seqs), (stream, &contiguous));
    }
    // A batch is never interleaved with another one.
    for chunk in all.chunks(PER_BATCH) {
        assert!(
            chunk.iter().all(|e| e.stream == chunk[0].stream),
            "interleaved batch: {chunk:?}"
        );
    }

    let mut racers = Vec::new();
    for _ in 0..TASKS {
        let (store, k) = (Arc::clone(&store), k.clone());
        racers.push(tokio::spawn(async move {
            store
                .append(
                    &k,
                    1,
                    batch("race", ExpectedVersion::Exact(0), numbered("r", 2)),
                )
                .await
        }));
    }
    let mut won = 0;
    for racer in racers {
        match racer.await.unwrap() {
            Ok(events) => {
                won += 1;
                assert_eq!(
                    events.iter().map(|e| e.stream_seq).collect::<Vec<_>>(),
                    vec![1, 2]
                );
            }
            Err(e) => assert_eq!(
                format!("{e:?}"),
                format!(
                    "{:?}",
                    Error::Conflict {
                        stream: "race".into(),
                        expected: 0,
                        actual: 2
                    }
                )
            ),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(store.head(&k).await.unwrap(), total + 2);
}
