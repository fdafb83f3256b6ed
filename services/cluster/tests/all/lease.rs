//! Session leases and fencing tokens: a lease lives as long as its holder's registry entry.

use std::time::Duration;

use lumina_cluster::{ClusterError, Holder, Leases, Registration, Registry};
use pretty_assertions::assert_eq;

use super::support::{eventually, raw_cmd, start};

async fn register(redis: &lumina_cluster::Redis, id: &str, ttl_ms: u64) -> Registration {
    Registry::new(redis.clone())
        .register(id, "addr", Duration::from_millis(ttl_ms))
        .await
        .unwrap()
}

fn holder(registration: &Registration) -> Holder {
    Holder {
        instance_id: registration.instance_id().to_owned(),
        incarnation: registration.incarnation(),
    }
}

#[tokio::test]
async fn only_one_live_instance_holds_a_lease() {
    let (_server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let (a, b) = (
        register(&redis, "a", 10_000).await,
        register(&redis, "b", 10_000).await,
    );

    let lease = leases.acquire("s1", &holder(&a)).await.unwrap().unwrap();
    assert_eq!(leases.acquire("s1", &holder(&b)).await.unwrap(), None);
    assert_eq!(
        leases.owner("s1").await.unwrap(),
        Some(("a".to_owned(), lease.fence))
    );
    // Other sessions are independent.
    assert!(leases.acquire("s2", &holder(&b)).await.unwrap().is_some());
    assert_eq!(leases.owner("s3").await.unwrap(), None);
}

#[tokio::test]
async fn a_dead_holders_leases_are_free_the_moment_its_entry_lapses() {
    let (_server, redis) = start().await;
    let registry = Registry::new(redis.clone());
    let leases = Leases::new(redis.clone());
    let a = register(&redis, "a", 400).await;
    let b = register(&redis, "b", 10_000).await;
    let first = leases.acquire("s", &holder(&a)).await.unwrap().unwrap();
    let other = leases.acquire("t", &holder(&a)).await.unwrap().unwrap();

    // Kept alive by a's heartbeat alone, well past its TTL…
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(
        leases.owner("s").await.unwrap(),
        Some(("a".to_owned(), first.fence))
    );
    assert_eq!(leases.acquire("s", &holder(&b)).await.unwrap(), None);

    // …and free once it stops (a crash: no deregistration, no release).
    drop(a);
    eventually(Duration::from_secs(2), "a's entry lapsed", || async {
        !registry.is_live("a").await.unwrap()
    })
    .await;
    assert_eq!(leases.owner("s").await.unwrap(), None);
    assert_eq!(leases.owner("t").await.unwrap(), None);
    let taken = leases.acquire("s", &holder(&b)).await.unwrap().unwrap();
    assert!(taken.fence > first.fence);
    assert_eq!(
        leases.owner("s").await.unwrap(),
        Some(("b".to_owned(), taken.fence))
    );
    assert!(other.fence > 0);
}

#[tokio::test]
async fn a_new_incarnation_of_the_same_instance_does_not_revive_the_old_ones_leases() {
    let (_server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let old = register(&redis, "a", 10_000).await;
    let old_holder = holder(&old);
    leases.acquire("s", &old_holder).await.unwrap().unwrap();
    // The process restarts with the same instance id (a StatefulSet pod, local-cluster).
    drop(old);
    let new = register(&redis, "a", 10_000).await;
    assert_ne!(new.incarnation(), old_holder.incarnation);
    assert_eq!(leases.owner("s").await.unwrap(), None);
    // The old incarnation can take nothing any more.
    assert_eq!(
        leases.acquire("x", &old_holder).await,
        Err(ClusterError::NotRegistered("a".to_owned()))
    );
    let lease = leases.acquire("s", &holder(&new)).await.unwrap().unwrap();
    assert_eq!(
        leases.owner("s").await.unwrap(),
        Some(("a".to_owned(), lease.fence))
    );
}

#[tokio::test]
async fn fence_strictly_increases_on_every_acquisition() {
    let (_server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let a = register(&redis, "a", 10_000).await;
    let b = register(&redis, "b", 300).await;
    let mut fences = Vec::new();

    let first = leases.acquire("s", &holder(&a)).await.unwrap().unwrap();
    fences.push(first.fence);
    // Re-acquiring a lease we hold is allowed and still takes a new fence.
    let again = leases.acquire("s", &holder(&a)).await.unwrap().unwrap();
    fences.push(again.fence);
    // Takeover after release.
    assert!(leases.release(&again).await.unwrap());
    let by_b = leases.acquire("s", &holder(&b)).await.unwrap().unwrap();
    fences.push(by_b.fence);
    // Takeover after the holder died.
    drop(b);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let a2 = leases.acquire("s", &holder(&a)).await.unwrap().unwrap();
    fences.push(a2.fence);

    assert_eq!(fences, vec![1, 2, 3, 4]);
    assert_eq!(leases.current_fence("s").await.unwrap(), 4);
    assert_eq!(leases.owner("s").await.unwrap(), Some(("a".to_owned(), 4)));
}

#[tokio::test]
async fn a_stale_handle_of_the_same_instance_cannot_release() {
    let (_server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let a = register(&redis, "a", 10_000).await;

    let old = leases.acquire("s", &holder(&a)).await.unwrap().unwrap();
    let new = leases.acquire("s", &holder(&a)).await.unwrap().unwrap();
    assert!(!leases.release(&old).await.unwrap());
    assert_eq!(
        leases.owner("s").await.unwrap(),
        Some(("a".to_owned(), new.fence))
    );
}

#[tokio::test]
async fn release_does_not_delete_someone_elses_lease() {
    let (_server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let a = register(&redis, "a", 200).await;
    let b = register(&redis, "b", 10_000).await;

    let lease_a = leases.acquire("s", &holder(&a)).await.unwrap().unwrap();
    drop(a);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let lease_b = leases.acquire("s", &holder(&b)).await.unwrap().unwrap();
    assert!(!leases.release(&lease_a).await.unwrap());
    assert_eq!(
        leases.owner("s").await.unwrap(),
        Some(("b".to_owned(), lease_b.fence))
    );
    assert!(leases.release(&lease_b).await.unwrap());
    assert_eq!(leases.owner("s").await.unwrap(), None);
}

#[tokio::test]
async fn leases_and_fences_have_no_ttl_of_their_own() {
    let (server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let a = register(&redis, "a", 1000).await;
    let lease = leases.acquire("s", &holder(&a)).await.unwrap().unwrap();
    // The lease lives by the registry entry, and the fence counter stays monotonic while
    // Redis lives.
    let pttl: i64 = raw_cmd(&server, redis::cmd("PTTL").arg("lumina:test:lease:{s}")).await;
    assert_eq!(pttl, -1);
    let fence_ttl: i64 = raw_cmd(&server, redis::cmd("PTTL").arg("lumina:test:fence:{s}")).await;
    assert_eq!(fence_ttl, -1);
    let entry_ttl: i64 = raw_cmd(&server, redis::cmd("PTTL").arg("lumina:test:instance:a")).await;
    assert!((1..=1000).contains(&entry_ttl), "pttl {entry_ttl}");
    assert_eq!(lease.fence, 1);
}

#[tokio::test]
async fn acquire_with_floor_stays_above_the_fence_postgres_recorded() {
    let (mut server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let a = register(&redis, "a", 10_000).await;

    let first = leases
        .acquire_with_floor("s", &holder(&a), 41)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.fence, 42);
    // A floor below the counter changes nothing but the usual increment.
    let second = leases
        .acquire_with_floor("s", &holder(&a), 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.fence, 43);

    // Redis loses everything: a plain acquire would start again at 1 — the hazard the
    // floor exists for — while passing the recorded fence continues above it.
    server.restart().unwrap();
    let registry = Registry::new(redis.clone());
    let b =
        super::support::eventually_ok(|| registry.register("b", "addr", Duration::from_secs(10)))
            .await;
    let b_holder = holder(&b);
    let after_restart =
        super::support::eventually_ok(|| leases.acquire_with_floor("s", &b_holder, 43)).await;
    assert_eq!(after_restart.unwrap().fence, 44);

    let (_server2, redis2) = start().await;
    let c = register(&redis2, "c", 10_000).await;
    let other = Leases::new(redis2);
    assert_eq!(
        other
            .acquire("s", &holder(&c))
            .await
            .unwrap()
            .unwrap()
            .fence,
        1
    );
}

#[tokio::test]
async fn after_redis_lost_the_entry_confirm_registers_a_new_incarnation_at_once() {
    let (mut server, redis) = start().await;
    let leases = Leases::new(redis.clone());
    let a = register(&redis, "a", 10_000).await;
    let old = holder(&a);
    leases.acquire("s", &old).await.unwrap().unwrap();
    server.restart().unwrap();
    // The entry is gone while the local liveness still holds (the next heartbeat is up to
    // 2.5 s away): a lease taken under it would be dead at once, so acquiring refuses…
    let refused = super::support::eventually_ok(|| async {
        match leases.acquire("t", &old).await {
            Err(ClusterError::Unavailable(e)) => Err(ClusterError::Unavailable(e)),
            other => Ok(other),
        }
    })
    .await;
    assert_eq!(refused, Err(ClusterError::NotRegistered("a".to_owned())));
    // …and a heartbeat on demand registers a new incarnation, under which it succeeds.
    a.confirm().await.unwrap();
    assert_ne!(a.incarnation(), old.incarnation);
    assert!(leases.acquire("t", &holder(&a)).await.unwrap().is_some());
}
