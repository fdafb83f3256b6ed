//! Pub/sub hints of new session events.

use std::time::Duration;

use futures::StreamExt;
use lumina_cluster::{Hint, HintEvent, HintStream, Hints};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::time::timeout;

use super::support::{eventually, eventually_ok, start};

async fn next(stream: &mut HintStream) -> HintEvent {
    timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
}

fn hint(seq: u64, payload: serde_json::Value) -> HintEvent {
    HintEvent::Hint(Hint { seq, payload })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_reach_subscribers_of_their_session_only() {
    let (_server, redis) = start().await;
    let hints = Hints::start(redis.clone());
    let mut s1 = hints.subscribe("s1").await.unwrap();
    let mut s1_again = hints.subscribe("s1").await.unwrap();
    let mut s2 = hints.subscribe("s2").await.unwrap();

    // One pub/sub connection serves every subscription of the process.
    assert_eq!(
        hints
            .publish("s1", 1, &json!({"kind": "message"}))
            .await
            .unwrap(),
        1
    );
    hints.publish("s2", 7, &json!(null)).await.unwrap();
    hints.publish("s1", 2, &json!(null)).await.unwrap();

    assert_eq!(next(&mut s1).await, hint(1, json!({"kind": "message"})));
    assert_eq!(next(&mut s1).await, hint(2, json!(null)));
    assert_eq!(
        next(&mut s1_again).await,
        hint(1, json!({"kind": "message"}))
    );
    assert_eq!(next(&mut s2).await, hint(7, json!(null)));
    assert!(timeout(Duration::from_millis(100), s2.next())
        .await
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_stream_of_a_session_unsubscribes() {
    let (_server, redis) = start().await;
    let hints = Hints::start(redis.clone());
    let publisher = Hints::start(redis.clone());
    let stream = hints.subscribe("s").await.unwrap();
    assert_eq!(publisher.publish("s", 1, &json!(null)).await.unwrap(), 1);
    drop(stream);
    eventually(Duration::from_secs(2), "unsubscribed", || async {
        publisher.publish("s", 2, &json!(null)).await.unwrap() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_yields_resync_and_hints_flow_again() {
    let (mut server, redis) = start().await;
    let hints = Hints::start(redis.clone());
    let mut stream = hints.subscribe("s").await.unwrap();
    hints.publish("s", 1, &json!(null)).await.unwrap();
    assert_eq!(next(&mut stream).await, hint(1, json!(null)));

    server.restart().unwrap();
    // Hints published while the subscription was down are lost; the consumer is told to
    // catch up from the journal once the subscription is back.
    assert_eq!(next(&mut stream).await, HintEvent::Resync);
    eventually_ok(|| hints.publish("s", 2, &json!(null))).await;
    assert_eq!(next(&mut stream).await, hint(2, json!(null)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_falls_behind_gets_a_resync_instead_of_unbounded_buffering() {
    let (_server, redis) = start().await;
    let hints = Hints::start(redis.clone());
    let mut stream = hints.subscribe("s").await.unwrap();
    let mut marker = hints.subscribe("marker").await.unwrap();
    for seq in 1..=1100 {
        hints.publish("s", seq, &json!(null)).await.unwrap();
    }
    // The hub handles messages in order: once the marker is through, so are all hints.
    hints.publish("marker", 1, &json!(null)).await.unwrap();
    assert_eq!(next(&mut marker).await, hint(1, json!(null)));

    assert_eq!(next(&mut stream).await, HintEvent::Resync);
    let mut seqs = Vec::new();
    while let Ok(Some(HintEvent::Hint(h))) =
        timeout(Duration::from_millis(300), stream.next()).await
    {
        seqs.push(h.seq);
    }
    // The buffer kept the oldest hints; the rest were replaced by the resync.
    assert_eq!(seqs, (1..=1024).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribing_while_redis_is_down_fails() {
    let (mut server, redis) = start().await;
    let hints = Hints::start(redis.clone());
    server.stop();
    let result = hints.subscribe("s").await;
    assert!(
        matches!(result, Err(lumina_cluster::ClusterError::Unavailable(_))),
        "{result:?}"
    );
}
