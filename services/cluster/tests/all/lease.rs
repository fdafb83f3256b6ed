//! Session leases and fencing tokens.

use std::time::Duration;

use lumina_cluster::{LeaseOptions, Leases};
use pretty_assertions::assert_eq;

use super::support::{raw_cmd, start};

fn leases(redis: &lumina_cluster::Redis, ttl_ms: u64) -> Leases {
    Leases::new(redis.clone(), LeaseOptions { ttl_ms })
}

#[tokio::test]
async fn only_one_instance_holds_a_lease() {
    let (_server, redis) = start().await;
    let leases = leases(&redis, 10_000);

    let a = leases.acquire("s1", "a").await.unwrap().unwrap();
    assert_eq!(leases.acquire("s1", "b").await.unwrap(), None);
    assert_eq!(
        leases.owner("s1").await.unwrap(),
        Some(("a".to_owned(), a.fence))
    );
    // Other sessions are independent.
    assert!(leases.acquire("s2", "b").await.unwrap().is_some());
    assert_eq!(leases.owner("s3").await.unwrap(), None);
}

#[tokio::test]
async fn fence_strictly_increases_on_every_acquisition() {
    let (_server, redis) = start().await;
    let leases = leases(&redis, 300);
    let mut fences = Vec::new();

    let first = leases.acquire("s", "a").await.unwrap().unwrap();
    fences.push(first.fence);
    // Re-acquiring a lease we hold is allowed and still takes a new fence.
    let again = leases.acquire("s", "a").await.unwrap().unwrap();
    fences.push(again.fence);
    // Takeover after expiry.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let b = leases.acquire("s", "b").await.unwrap().unwrap();
    fences.push(b.fence);
    // Takeover after release.
    assert!(leases.release(&b).await.unwrap());
    let a2 = leases.acquire("s", "a").await.unwrap().unwrap();
    fences.push(a2.fence);

    assert_eq!(fences, vec![1, 2, 3, 4]);
    assert_eq!(leases.current_fence("s").await.unwrap(), 4);
    assert_eq!(leases.owner("s").await.unwrap(), Some(("a".to_owned(), 4)));
}

#[tokio::test]
async fn renew_fails_once_another_instance_took_over() {
    let (_server, redis) = start().await;
    let leases = leases(&redis, 200);

    let a = leases.acquire("s", "a").await.unwrap().unwrap();
    assert!(leases.renew(&a).await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Expired: renewing must not resurrect it.
    assert!(!leases.renew(&a).await.unwrap());
    let b = leases.acquire("s", "b").await.unwrap().unwrap();
    assert!(!leases.renew(&a).await.unwrap());
    assert!(leases.renew(&b).await.unwrap());
    assert_eq!(
        leases.owner("s").await.unwrap(),
        Some(("b".to_owned(), b.fence))
    );
}

#[tokio::test]
async fn a_stale_handle_of_the_same_instance_cannot_renew_or_release() {
    let (_server, redis) = start().await;
    let leases = leases(&redis, 10_000);

    let old = leases.acquire("s", "a").await.unwrap().unwrap();
    let new = leases.acquire("s", "a").await.unwrap().unwrap();
    assert!(!leases.renew(&old).await.unwrap());
    assert!(!leases.release(&old).await.unwrap());
    assert_eq!(
        leases.owner("s").await.unwrap(),
        Some(("a".to_owned(), new.fence))
    );
}

#[tokio::test]
async fn release_does_not_delete_someone_elses_lease() {
    let (_server, redis) = start().await;
    let leases = leases(&redis, 200);

    let a = leases.acquire("s", "a").await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b = leases.acquire("s", "b").await.unwrap().unwrap();
    assert!(!leases.release(&a).await.unwrap());
    assert_eq!(
        leases.owner("s").await.unwrap(),
        Some(("b".to_owned(), b.fence))
    );
    assert!(leases.release(&b).await.unwrap());
    assert_eq!(leases.owner("s").await.unwrap(), None);
}

#[tokio::test]
async fn lease_expires_by_its_ttl_in_redis() {
    let (server, redis) = start().await;
    let leases = leases(&redis, 1000);
    let lease = leases.acquire("s", "a").await.unwrap().unwrap();
    let pttl: i64 = raw_cmd(&server, redis::cmd("PTTL").arg("lumina:test:lease:{s}")).await;
    assert!((1..=1000).contains(&pttl), "pttl {pttl}");
    // The fence counter has no TTL, so fences stay monotonic while Redis lives.
    let fence_ttl: i64 = raw_cmd(&server, redis::cmd("PTTL").arg("lumina:test:fence:{s}")).await;
    assert_eq!(fence_ttl, -1);
    assert_eq!(lease.fence, 1);
}

#[tokio::test]
async fn acquire_with_floor_stays_above_the_fence_postgres_recorded() {
    let (mut server, redis) = start().await;
    let leases = leases(&redis, 10_000);

    let first = leases
        .acquire_with_floor("s", "a", 41)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.fence, 42);
    // A floor below the counter changes nothing but the usual increment.
    let second = leases
        .acquire_with_floor("s", "a", 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.fence, 43);

    // Redis loses everything: a plain acquire would start again at 1 — the hazard the
    // floor exists for — while passing the recorded fence continues above it.
    server.restart().unwrap();
    let after_restart =
        super::support::eventually_ok(|| leases.acquire_with_floor("s", "b", 43)).await;
    assert_eq!(after_restart.unwrap().fence, 44);

    let (_server2, redis2) = start().await;
    let other = Leases::new(redis2, LeaseOptions::default());
    assert_eq!(other.acquire("s", "a").await.unwrap().unwrap().fence, 1);
}
