//! Hot windows: trimmed appends, compare-and-set on `through`, loss.

use std::time::Duration;

use lumina_cluster::{HotWindows, StoredWindow};
use pretty_assertions::assert_eq;

use super::support::{raw_cmd, start};

fn entries(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("m{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_append_trim_compare_and_vanish() {
    let (server, redis) = start().await;
    let hot = HotWindows::new(redis, Duration::from_secs(60));
    assert_eq!(hot.load("t:s1").await.unwrap(), None);

    // A rebuild replaces, keeping the last `capacity` entries.
    assert!(hot.save("t:s1", None, 10, 3, &entries(0..5)).await.unwrap());
    assert_eq!(
        hot.load("t:s1").await.unwrap(),
        Some(StoredWindow {
            through_seq: 10,
            entries: entries(2..5)
        })
    );
    // An append from the current `through` lands and trims.
    assert!(hot
        .save("t:s1", Some(10), 12, 3, &entries(5..7))
        .await
        .unwrap());
    // A writer that read an older `through` does not append twice.
    assert!(!hot
        .save("t:s1", Some(10), 12, 3, &entries(5..7))
        .await
        .unwrap());
    assert_eq!(
        hot.load("t:s1").await.unwrap(),
        Some(StoredWindow {
            through_seq: 12,
            entries: entries(4..7)
        })
    );
    // An append that found nothing new still moves `through`.
    assert!(hot.save("t:s1", Some(12), 15, 3, &[]).await.unwrap());
    assert_eq!(hot.load("t:s1").await.unwrap().unwrap().through_seq, 15);
    // Windows are separate, and expire.
    assert!(hot.save("t:s2", None, 1, 3, &entries(0..1)).await.unwrap());
    let ttl: i64 = raw_cmd(
        &server,
        redis::cmd("PTTL").arg("lumina:test:hot:{t:s2}:list"),
    )
    .await;
    assert!(ttl > 0 && ttl <= 60_000, "ttl {ttl}");

    // Redis loses everything: a miss, never an error; an append then refuses (no `through`).
    let _: () = raw_cmd(&server, &redis::cmd("FLUSHALL")).await;
    assert_eq!(hot.load("t:s1").await.unwrap(), None);
    assert!(!hot
        .save("t:s1", Some(15), 16, 3, &entries(7..8))
        .await
        .unwrap());
    assert_eq!(hot.load("t:s1").await.unwrap(), None);
}
