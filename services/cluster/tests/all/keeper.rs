//! The lease keeper: leases valid exactly as long as the instance's liveness, every one
//! reported lost the moment that liveness can no longer be relied on.

use std::time::Duration;

use lumina_cluster::{ClusterError, Lease, LeaseKeeper, Leases, Registration, Registry};
use pretty_assertions::assert_eq;
use tokio::time::{timeout, Instant};

use super::support::{raw_cmd, start};

async fn instance(
    redis: &lumina_cluster::Redis,
    id: &str,
    ttl_ms: u64,
) -> (
    Registration,
    LeaseKeeper,
    tokio::sync::mpsc::UnboundedReceiver<Lease>,
) {
    let registration = Registry::new(redis.clone())
        .register(id, "addr", Duration::from_millis(ttl_ms))
        .await
        .unwrap();
    let (keeper, lost) = LeaseKeeper::start(Leases::new(redis.clone()), &registration);
    (registration, keeper, lost)
}

async fn take(leases: &Leases, keeper: &LeaseKeeper, session: &str) -> u64 {
    let lease = leases
        .acquire(session, &keeper.holder())
        .await
        .unwrap()
        .unwrap();
    let fence = lease.fence;
    keeper.hold(lease);
    fence
}

#[tokio::test]
async fn one_heartbeat_keeps_every_lease_alive_for_many_ttls() {
    let (server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let (_a, keeper, mut lost) = instance(&redis, "a", 600).await;
    let mut fences = Vec::new();
    for i in 0..50 {
        fences.push(take(&leases, &keeper, &format!("s{i}")).await);
    }
    let _: () = raw_cmd(&server, redis::cmd("CONFIG").arg("RESETSTAT")).await;

    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(lost.try_recv().is_err());
    assert_eq!(
        leases.owner("s7").await.unwrap(),
        Some(("a".to_owned(), fences[7]))
    );
    assert_eq!(keeper.fence("s7").unwrap(), fences[7]);
    assert_eq!(keeper.held().len(), 50);
    assert!(keeper.renewals() >= 2, "{}", keeper.renewals());
    // Nobody else can take one meanwhile.
    let (_b, other, _) = instance(&redis, "b", 10_000).await;
    assert_eq!(leases.acquire("s7", &other.holder()).await.unwrap(), None);
    // What kept 50 leases alive for three TTLs: a's heartbeats (about 12, five commands each
    // counting those inside the script) and our few calls — a renewal per lease would have
    // been well over a thousand.
    let info: String = raw_cmd(&server, redis::cmd("INFO").arg("stats")).await;
    let commands: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    assert!(
        commands < 150,
        "{commands} commands for 50 leases over 1.8 s"
    );
}

#[tokio::test]
async fn reports_every_lease_when_the_entry_lapsed_and_a_new_incarnation_registers() {
    let (server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let (a, keeper, mut lost) = instance(&redis, "a", 3000).await;
    take(&leases, &keeper, "s").await;
    take(&leases, &keeper, "other").await;
    let old = a.incarnation();

    // The entry vanishes (it expired while this process could not renew it).
    let _: i64 = raw_cmd(&server, redis::cmd("DEL").arg("lumina:test:instance:a")).await;
    let deleted_at = Instant::now();
    let mut reported = vec![
        timeout(Duration::from_secs(3), lost.recv())
            .await
            .unwrap()
            .unwrap()
            .session_key,
        timeout(Duration::from_secs(1), lost.recv())
            .await
            .unwrap()
            .unwrap()
            .session_key,
    ];
    reported.sort();
    assert_eq!(reported, vec!["other".to_owned(), "s".to_owned()]);
    // At the next heartbeat (every TTL/4 = 750 ms), not at the local expiry (2.7 s).
    assert!(
        deleted_at.elapsed() < Duration::from_millis(2000),
        "{:?}",
        deleted_at.elapsed()
    );
    assert_ne!(a.incarnation(), old);
    assert_eq!(
        keeper.fence("s"),
        Err(ClusterError::LeaseLost("s".to_owned()))
    );
    assert!(keeper.held().is_empty());
    // The new incarnation takes leases again.
    take(&leases, &keeper, "s").await;
    assert!(keeper.lease("s").is_some());
}

#[tokio::test]
async fn reports_lost_leases_when_redis_is_gone_past_the_ttl() {
    let (mut server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let (_a, keeper, mut lost) = instance(&redis, "a", 1000).await;
    let fence = take(&leases, &keeper, "s").await;
    tokio::time::sleep(Duration::from_millis(400)).await;

    server.stop();
    let stopped_at = Instant::now();
    let session = timeout(Duration::from_secs(3), lost.recv())
        .await
        .unwrap()
        .unwrap();
    // The report names the lease lost, fence included: a receiver can tell it from a
    // newer lease of the same session taken meanwhile.
    assert_eq!((session.session_key.as_str(), session.fence), ("s", fence));
    // Due at the last confirmed heartbeat + TTL - 10 % (≤ 900 ms after the stop); the slack
    // is for a loaded machine. The exact bound is the synchronous local check, see the
    // paused-process test.
    assert!(
        stopped_at.elapsed() <= Duration::from_millis(1500),
        "{:?}",
        stopped_at.elapsed()
    );
    assert_eq!(keeper.lease("s"), None);
}

#[test]
fn a_process_paused_past_its_ttl_never_believes_it_still_holds_the_lease() {
    // A current-thread runtime blocked by a sleep stands in for a paused process: neither
    // the heartbeat nor the keeper task can run while the thread sleeps.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (_server, redis) = start().await;
        let leases = Leases::new(redis.clone());
        let (_a, keeper, mut lost) = instance(&redis, "a", 300).await;
        take(&leases, &keeper, "s").await;
        assert!(keeper.lease("s").is_some());

        std::thread::sleep(Duration::from_millis(500));
        // Before the keeper even ran again, the local deadline already says "not ours".
        assert_eq!(keeper.lease("s"), None);
        assert!(keeper.fence("s").is_err());
        // And the first thing the woken keeper does is report it.
        let session = timeout(Duration::from_millis(100), lost.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(session.session_key, "s");
    });
}

#[tokio::test]
async fn release_through_the_keeper_lets_another_instance_in_at_once() {
    let (_server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let (_a, keeper, mut lost) = instance(&redis, "a", 10_000).await;
    let (_b, other, _) = instance(&redis, "b", 10_000).await;
    for s in ["s1", "s2", "s3"] {
        take(&leases, &keeper, s).await;
    }

    assert!(keeper.release("s1").await.unwrap());
    assert!(!keeper.release("s1").await.unwrap());
    assert!(leases
        .acquire("s1", &other.holder())
        .await
        .unwrap()
        .is_some());

    assert_eq!(keeper.release_all().await.unwrap(), 2);
    assert!(keeper.held().is_empty());
    assert!(leases
        .acquire("s2", &other.holder())
        .await
        .unwrap()
        .is_some());
    assert!(lost.try_recv().is_err());
}
