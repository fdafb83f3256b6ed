//! The instance registry.

use std::time::Duration;

use lumina_cluster::{InstanceInfo, Registry};
use pretty_assertions::assert_eq;

use super::support::{eventually, start};

fn info(id: &str, addr: &str, draining: bool) -> InstanceInfo {
    InstanceInfo {
        instance_id: id.to_owned(),
        advertise_addr: addr.to_owned(),
        draining,
    }
}

#[tokio::test]
async fn registered_instances_are_listed_with_their_draining_flag() {
    let (_server, redis) = start().await;
    let registry = Registry::new(redis.clone());
    let a = registry
        .register("a", "10.0.0.1:7000", Duration::from_secs(10))
        .await
        .unwrap();
    let _b = registry
        .register("b", "10.0.0.2:7000", Duration::from_secs(10))
        .await
        .unwrap();
    assert!(a.is_registered());

    assert_eq!(
        registry.live_instances().await.unwrap(),
        vec![
            info("a", "10.0.0.1:7000", false),
            info("b", "10.0.0.2:7000", false)
        ]
    );
    assert!(registry.is_live("a").await.unwrap());
    assert!(!registry.is_live("c").await.unwrap());

    a.set_draining(true).await.unwrap();
    // Another instance (another handle) sees it.
    let other = Registry::new(super::support::connect(&_server).await);
    assert!(other.is_draining("a").await.unwrap());
    assert!(!other.is_draining("b").await.unwrap());
    assert_eq!(
        other.instance("a").await.unwrap(),
        Some(info("a", "10.0.0.1:7000", true))
    );

    a.deregister().await.unwrap();
    assert!(!registry.is_live("a").await.unwrap());
    assert_eq!(
        registry.live_instances().await.unwrap(),
        vec![info("b", "10.0.0.2:7000", false)]
    );
}

#[tokio::test]
async fn an_instance_whose_heartbeat_stops_expires_after_its_ttl() {
    let (_server, redis) = start().await;
    let registry = Registry::new(redis.clone());
    let a = registry
        .register("a", "addr", Duration::from_millis(500))
        .await
        .unwrap();

    // The heartbeat keeps it alive well past one TTL…
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(registry.is_live("a").await.unwrap());
    assert!(a.is_registered());

    // …and a crash (no deregistration) lets it lapse.
    drop(a);
    eventually(Duration::from_secs(2), "entry expired", || async {
        !registry.is_live("a").await.unwrap()
    })
    .await;
    assert_eq!(registry.live_instances().await.unwrap(), vec![]);
}

#[tokio::test]
async fn the_heartbeat_re_registers_after_a_redis_restart() {
    let (mut server, redis) = start().await;
    let registry = Registry::new(redis.clone());
    let _a = registry
        .register("a", "addr", Duration::from_millis(600))
        .await
        .unwrap();
    server.restart().unwrap();
    eventually(Duration::from_secs(5), "registered again", || async {
        registry.is_live("a").await.unwrap_or(false)
    })
    .await;
    assert_eq!(
        registry.live_instances().await.unwrap(),
        vec![info("a", "addr", false)]
    );
}
