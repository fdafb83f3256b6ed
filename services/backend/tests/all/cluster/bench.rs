//! Cluster measurements for docs/benchmarks.md (ignored: benchmarks never gate CI).
//! `cargo test -p lumina-backend --test all cluster::bench -- --ignored --nocapture`

use std::time::{Duration, Instant};

use lumina_protocol::methods::SessionCreateParams;
use lumina_testkit::Turn;
use serde_json::json;

use super::support::*;
use crate::support::{next_event, submit, until_run_end};

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx].as_secs_f64() * 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn cluster_bench() {
    let mut cluster = Cluster::start(3, vec![]).await;
    cluster
        .model
        .set_default_turn(Turn::text("a slow answer for takeover trials").with_chunk_delay_ms(500));
    let token = cluster.user_token();

    // Cross-instance round trip: the same mutation sent to the owner and to a gateway.
    let (owner, _o) = cluster.client(1, &token).await;
    let (gateway, _g) = cluster.client(0, &token).await;
    let session = owner
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: None,
        })
        .await
        .unwrap()
        .id;
    let mut direct = Vec::new();
    let mut forwarded = Vec::new();
    for i in 0..1200 {
        let t = Instant::now();
        owner.session_interrupt(&session, None).await.unwrap();
        let d = t.elapsed();
        let t = Instant::now();
        gateway.session_interrupt(&session, None).await.unwrap();
        let f = t.elapsed();
        if i >= 200 {
            direct.push(d);
            forwarded.push(f);
        }
    }
    direct.sort();
    forwarded.sort();
    let mut overhead: Vec<Duration> = Vec::new();
    for (f, d) in forwarded.iter().zip(direct.iter()) {
        overhead.push(f.saturating_sub(*d));
    }
    println!(
        "{}",
        json!({
            "round_trip_ms": {
                "owner_direct": {"p50": percentile(&direct, 0.5), "p99": percentile(&direct, 0.99)},
                "through_gateway": {"p50": percentile(&forwarded, 0.5), "p99": percentile(&forwarded, 0.99)},
                "overhead_p50": percentile(&forwarded, 0.5) - percentile(&direct, 0.5),
                "overhead_p99": percentile(&forwarded, 0.99) - percentile(&direct, 0.99),
            }
        })
    );

    // Takeover after kill -9, measured at a client on another instance: from the kill to the
    // journaled run.interrupted written by the new owner.
    let mut takeovers = Vec::new();
    for trial in 0..20 {
        let victim = 1 + trial % 2;
        let (creator, _c) = cluster.client(victim, &token).await;
        let s = creator
            .session_create(&SessionCreateParams {
                project_root: Some(cluster.project.display().to_string()),
                title: None,
            })
            .await
            .unwrap()
            .id;
        let (watcher, mut notes) = cluster.client(0, &token).await;
        watcher.session_resume(&s, 0).await.unwrap();
        let run = watcher
            .session_submit(&submit(&s, "go", json!(null)))
            .await
            .unwrap();
        next_event(&mut notes, "model.requested").await;
        let killed = Instant::now();
        cluster.kill9(victim);
        until_run_end(&mut notes, &run.run_id).await;
        takeovers.push(killed.elapsed());
        let id = cluster.instances[victim].id.clone();
        let port = cluster.instances[victim].port;
        cluster.spawn(&id, port);
        cluster.wait_ready(victim).await;
    }
    takeovers.sort();
    println!(
        "{}",
        json!({
            "lease_ttl_ms": LEASE_TTL_MS,
            "takeover_trials": takeovers.len(),
            "takeover_ms": {"p50": percentile(&takeovers, 0.5), "p99": percentile(&takeovers, 0.99), "max": percentile(&takeovers, 1.0)},
        })
    );
}
