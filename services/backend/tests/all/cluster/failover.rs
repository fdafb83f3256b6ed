//! Failover: `kill -9` and `SIGSTOP` of an owner, drain and shutdown, readiness when a
//! dependency goes away.

use std::time::{Duration, Instant};

use lumina_protocol::methods::SessionCreateParams;
use lumina_protocol::{Event, EventFrame};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;
use crate::support::{assert_contiguous, next_event, submit, until_run_end};

async fn create(cluster: &Cluster, client: &lumina_client::Client) -> String {
    client
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: None,
        })
        .await
        .unwrap()
        .id
}

async fn all_events(client: &lumina_client::Client, session_id: &str) -> Vec<EventFrame> {
    client
        .session_events(session_id, 0, Some(1000))
        .await
        .unwrap()
        .events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_owner_mid_run_moves_the_session() {
    let mut cluster = Cluster::start(
        3,
        vec![
            Turn::text("a slow answer that the owner never finishes").with_chunk_delay_ms(400),
            Turn::text("continued elsewhere"),
        ],
    )
    .await;
    let token = cluster.user_token();
    let (owner_client, _o) = cluster.client(1, &token).await;
    let session = create(&cluster, &owner_client).await;
    let (a, mut a_notes) = cluster.client(0, &token).await;
    a.session_resume(&session, 0).await.unwrap();
    let run = a
        .session_submit(&submit(&session, "start", json!(null)))
        .await
        .unwrap();
    next_event(&mut a_notes, "model.requested").await;
    let killed = Instant::now();
    cluster.kill9(1);
    // Another instance takes over on its own (sweep), journaling the interruption.
    let interrupted = until_run_end(&mut a_notes, &run.run_id).await;
    let takeover = killed.elapsed();
    assert!(matches!(
        crate::support::events(&interrupted).last().unwrap().event,
        Event::RunInterrupted { .. }
    ));
    eprintln!("takeover after kill -9: {takeover:?}");
    assert!(
        takeover < Duration::from_millis(LEASE_TTL_MS) + Duration::from_secs(5),
        "{takeover:?}"
    );
    let info = a.session_info(&session).await.unwrap();
    assert_ne!(info.owner, "i1");
    // The session continues on the new owner.
    let run2 = a
        .session_submit(&submit(&session, "go on", json!(null)))
        .await
        .unwrap();
    let seen = crate::support::events(&until_run_end(&mut a_notes, &run2.run_id).await);
    assert!(
        matches!(&seen.last().unwrap().event, Event::RunCompleted { result, .. } if result == "continued elsewhere")
    );
    // The client saw every event exactly once, and so does the journal.
    let journal = all_events(&a, &session).await;
    assert_contiguous(&journal);
    let kinds: Vec<&str> = journal.iter().map(|f| f.event.kind()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "run.interrupted").count(), 1);
    assert_eq!(kinds.iter().filter(|k| **k == "run.started").count(), 2);
    // Fences never decrease along seq.
    let fences = cluster.fences(&session);
    assert!(fences.windows(2).all(|w| w[0] <= w[1]), "{fences:?}");
    assert!(fences.last() > fences.first());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_owner_is_fenced_after_takeover() {
    let cluster = Cluster::start(
        2,
        vec![
            Turn::text("streaming while the owner is paused, slowly").with_chunk_delay_ms(500),
            Turn::text("after takeover"),
        ],
    )
    .await;
    let token = cluster.user_token();
    let (owner_client, _o) = cluster.client(1, &token).await;
    let session = create(&cluster, &owner_client).await;
    let (a, mut a_notes) = cluster.client(0, &token).await;
    a.session_resume(&session, 0).await.unwrap();
    let run = a
        .session_submit(&submit(&session, "start", json!(null)))
        .await
        .unwrap();
    next_event(&mut a_notes, "model.requested").await;
    cluster.signal(1, "-STOP");
    let ended = crate::support::events(&until_run_end(&mut a_notes, &run.run_id).await);
    assert!(matches!(
        ended.last().unwrap().event,
        Event::RunInterrupted { .. }
    ));
    assert_eq!(a.session_info(&session).await.unwrap().owner, "i0");
    cluster.signal(1, "-CONT");
    // The old owner wakes up mid-stream: whatever it tries to write is refused.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, metrics) = http_get(cluster.instances[1].port, "/metrics")
            .await
            .unwrap_or_default();
        let refused = metrics
            .lines()
            .find(|l| l.starts_with("lumina_fenced_writes_refused_total "))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        let lost = metrics.contains("lumina_leases_lost_total 1");
        if refused >= 1.0 || lost {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "old owner neither fenced nor lost its lease:\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let journal = all_events(&a, &session).await;
    assert_contiguous(&journal);
    let fences = cluster.fences(&session);
    assert!(fences.windows(2).all(|w| w[0] <= w[1]), "{fences:?}");
    // Nothing from the old owner after the takeover: no message.assistant of run 1.
    assert!(!journal.iter().any(
        |f| matches!(&f.event, Event::MessageAssistant { run_id, .. } if *run_id == run.run_id)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_moves_sessions_and_shutdown_exits_zero() {
    let mut cluster = Cluster::start(2, vec![]).await;
    cluster.model.set_default_turn(Turn::text("ok"));
    let token = cluster.user_token();
    let admin = cluster.token(
        "ops",
        TENANT,
        &[
            "lumina:session:read",
            "lumina:session:write",
            "lumina:admin",
        ],
    );
    let (owner_client, _o) = cluster.client(1, &token).await;
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(create(&cluster, &owner_client).await);
    }
    for s in &sessions {
        assert_eq!(owner_client.session_info(s).await.unwrap().owner, "i1");
    }
    let (ops, _n) = cluster.client(1, &admin).await;
    let drained: serde_json::Value = ops.call("admin.drain", json!({})).await.unwrap();
    assert_eq!(drained["released"], 3);
    assert_eq!(
        http_status(cluster.instances[1].port, "/readyz").await,
        Some(503)
    );
    assert_eq!(
        http_status(cluster.instances[1].port, "/healthz").await,
        Some(200)
    );
    // Work goes on through the draining instance's gateway: i0 takes the sessions.
    let (a, mut a_notes) = cluster.client(1, &token).await;
    for s in &sessions {
        a.session_resume(s, 0).await.unwrap();
        let run = a
            .session_submit(&submit(s, "after drain", json!(null)))
            .await
            .unwrap();
        until_run_end(&mut a_notes, &run.run_id).await;
        assert_eq!(a.session_info(s).await.unwrap().owner, "i0");
        assert_contiguous(&all_events(&a, s).await);
    }
    let _: serde_json::Value = ops.call("admin.shutdown", json!({})).await.unwrap();
    let status = cluster.wait_exit(1, Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_redis_and_postgres() {
    let mut cluster = Cluster::start(1, vec![]).await;
    let port = cluster.instances[0].port;
    cluster.redis.stop();
    let start = Instant::now();
    while http_status(port, "/readyz").await != Some(503) {
        assert!(start.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("readyz 503 after redis stop: {:?}", start.elapsed());
    assert_eq!(http_status(port, "/healthz").await, Some(200));
    cluster.redis.restart().unwrap();
    cluster.wait_ready(0).await;

    cluster.pg.stop().unwrap();
    let start = Instant::now();
    while http_status(port, "/readyz").await != Some(503) {
        assert!(start.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Writes fail closed while PostgreSQL is down: an error, never a false success.
    let token = cluster.user_token();
    let (c, _n) = cluster.client(0, &token).await;
    let err = c
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: None,
        })
        .await
        .unwrap_err();
    assert!(err.server_error().is_some(), "{err:?}");
    cluster.pg.start_again().unwrap();
    cluster.wait_ready(0).await;
    let session = create(&cluster, &c).await;
    assert!(!session.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_loses_nothing() {
    let mut cluster = Cluster::start(2, vec![]).await;
    cluster.model.set_default_turn(Turn::text("ok"));
    let token = cluster.user_token();
    let (a, mut a_notes) = cluster.client(0, &token).await;
    let session = create(&cluster, &a).await;
    a.session_resume(&session, 0).await.unwrap();
    let run = a
        .session_submit(&submit(&session, "before", json!(null)))
        .await
        .unwrap();
    until_run_end(&mut a_notes, &run.run_id).await;
    let before = all_events(&a, &session).await;

    cluster.redis.restart().unwrap();
    // The session is leased again on the next request and continues.
    let deadline = Instant::now() + Duration::from_secs(20);
    let run = loop {
        match a
            .session_submit(&submit(&session, "after", json!(null)))
            .await
        {
            Ok(run) => break run,
            Err(err) => {
                assert!(
                    Instant::now() < deadline,
                    "no recovery after the Redis restart: {err:?}"
                );
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
    };
    let seen = crate::support::events(&until_run_end(&mut a_notes, &run.run_id).await);
    assert!(
        matches!(seen.last().unwrap().event, Event::RunCompleted { .. }),
        "the run after the Redis restart ended with {:?}\ninstance 0:\n{}\ninstance 1:\n{}",
        seen.last().map(|f| &f.event),
        cluster.log(0),
        cluster.log(1)
    );
    let after = all_events(&a, &session).await;
    assert_contiguous(&after);
    assert_eq!(&after[..before.len()], &before[..]);
}
