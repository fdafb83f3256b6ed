//! The lease keeper: renewal, and reporting lost leases at once.

use std::time::Duration;

use lumina_cluster::{ClusterError, LeaseKeeper, LeaseOptions, Leases};
use pretty_assertions::assert_eq;
use tokio::time::{timeout, Instant};

use super::support::{raw_cmd, start};

#[tokio::test]
async fn keeps_a_lease_alive_for_many_ttls() {
    let (_server, redis) = start().await;
    let leases = Leases::new(redis.clone(), LeaseOptions { ttl_ms: 600 });
    let (keeper, mut lost) = LeaseKeeper::start(leases.clone());
    let lease = leases.acquire("s", "a").await.unwrap().unwrap();
    keeper.hold(lease.clone());

    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(lost.try_recv().is_err());
    assert_eq!(
        leases.owner("s").await.unwrap(),
        Some(("a".to_owned(), lease.fence))
    );
    assert_eq!(keeper.fence("s").unwrap(), lease.fence);
    assert_eq!(keeper.held(), vec!["s".to_owned()]);
    // Nobody else can take it meanwhile.
    assert_eq!(leases.acquire("s", "b").await.unwrap(), None);
}

#[tokio::test]
async fn reports_a_deleted_lease_at_the_next_renewal() {
    let (server, redis) = start().await;
    let leases = Leases::new(redis.clone(), LeaseOptions { ttl_ms: 3000 });
    let (keeper, mut lost) = LeaseKeeper::start(leases.clone());
    keeper.hold(leases.acquire("s", "a").await.unwrap().unwrap());
    keeper.hold(leases.acquire("other", "a").await.unwrap().unwrap());

    let _: i64 = raw_cmd(&server, redis::cmd("DEL").arg("lumina:test:lease:{s}")).await;
    let deleted_at = Instant::now();
    let session = timeout(Duration::from_secs(4), lost.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(session, "s");
    // At the next renewal (every TTL/3 = 1 s), not at the local expiry (2.7 s).
    assert!(
        deleted_at.elapsed() < Duration::from_millis(2000),
        "{:?}",
        deleted_at.elapsed()
    );
    assert_eq!(
        keeper.fence("s"),
        Err(ClusterError::LeaseLost("s".to_owned()))
    );
    assert_eq!(keeper.held(), vec!["other".to_owned()]);
}

#[tokio::test]
async fn reports_a_stolen_lease() {
    let (server, redis) = start().await;
    let leases = Leases::new(redis.clone(), LeaseOptions { ttl_ms: 600 });
    let (keeper, mut lost) = LeaseKeeper::start(leases.clone());
    keeper.hold(leases.acquire("s", "a").await.unwrap().unwrap());

    // Another instance overwrites the lease (as after a takeover the keeper did not see).
    let _: () = raw_cmd(
        &server,
        redis::cmd("SET")
            .arg("lumina:test:lease:{s}")
            .arg("99|b")
            .arg("PX")
            .arg(10_000),
    )
    .await;
    let session = timeout(Duration::from_secs(2), lost.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(session, "s");
    assert_eq!(leases.owner("s").await.unwrap(), Some(("b".to_owned(), 99)));
}

#[tokio::test]
async fn reports_lost_leases_when_redis_is_gone_past_the_ttl() {
    let (mut server, redis) = start().await;
    let leases = Leases::new(redis.clone(), LeaseOptions { ttl_ms: 1000 });
    let (keeper, mut lost) = LeaseKeeper::start(leases.clone());
    let lease = leases.acquire("s", "a").await.unwrap().unwrap();
    keeper.hold(lease);
    tokio::time::sleep(Duration::from_millis(400)).await;

    server.stop();
    let stopped_at = Instant::now();
    let session = timeout(Duration::from_secs(3), lost.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(session, "s");
    // Due at the last confirmed renewal + TTL - 10 % (≤ 900 ms after the stop); the slack is
    // for a loaded machine. The exact bound is the synchronous local check, see the paused-
    // process test.
    assert!(
        stopped_at.elapsed() <= Duration::from_millis(1500),
        "{:?}",
        stopped_at.elapsed()
    );
    assert_eq!(keeper.lease("s"), None);
}

#[test]
fn a_process_paused_past_its_ttl_never_believes_it_still_holds_the_lease() {
    // A current-thread runtime blocked by a sleep stands in for a paused process: the keeper
    // task cannot run while the thread sleeps.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (_server, redis) = start().await;
        let leases = Leases::new(redis.clone(), LeaseOptions { ttl_ms: 300 });
        let (keeper, mut lost) = LeaseKeeper::start(leases.clone());
        keeper.hold(leases.acquire("s", "a").await.unwrap().unwrap());
        assert!(keeper.lease("s").is_some());

        std::thread::sleep(Duration::from_millis(500));
        // Before the keeper even ran again, the local deadline already says "not ours".
        assert_eq!(keeper.lease("s"), None);
        assert!(keeper.fence("s").is_err());
        let session = timeout(Duration::from_secs(1), lost.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(session, "s");
    });
}

#[tokio::test]
async fn release_through_the_keeper_lets_another_instance_in_at_once() {
    let (_server, redis) = start().await;
    let leases = Leases::new(redis.clone(), LeaseOptions { ttl_ms: 10_000 });
    let (keeper, mut lost) = LeaseKeeper::start(leases.clone());
    keeper.hold(leases.acquire("s1", "a").await.unwrap().unwrap());
    keeper.hold(leases.acquire("s2", "a").await.unwrap().unwrap());
    keeper.hold(leases.acquire("s3", "a").await.unwrap().unwrap());

    assert!(keeper.release("s1").await.unwrap());
    assert!(!keeper.release("s1").await.unwrap());
    assert!(leases.acquire("s1", "b").await.unwrap().is_some());

    assert_eq!(keeper.release_all().await.unwrap(), 2);
    assert!(keeper.held().is_empty());
    assert!(leases.acquire("s2", "b").await.unwrap().is_some());
    assert!(lost.try_recv().is_err());
}
