//! Shared helpers: a Redis per test and raw access for inspecting and sabotaging state.

use std::future::Future;
use std::time::Duration;

use lumina_cluster::{ConnOptions, Redis};
use lumina_testkit::redis::RedisServer;

/// A fresh Redis and a handle on it in cluster namespace `test`.
pub async fn start() -> (RedisServer, Redis) {
    let server = RedisServer::start().unwrap();
    let redis = connect(&server).await;
    (server, redis)
}

pub async fn connect(server: &RedisServer) -> Redis {
    Redis::connect(&server.url(), options()).await.unwrap()
}

pub fn options() -> ConnOptions {
    ConnOptions {
        cluster_id: "test".to_owned(),
        // Short, so tests that kill Redis do not wait long for errors.
        command_timeout_ms: 1000,
        connect_timeout_ms: 500,
        block_ms: 1000,
    }
}

/// A plain connection for inspecting or sabotaging state behind the crate's back.
pub async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

pub async fn raw_cmd<T: redis::FromRedisValue>(server: &RedisServer, cmd: &redis::Cmd) -> T {
    cmd.query_async(&mut raw(server).await).await.unwrap()
}

/// Polls `check` every 20 ms until it returns true, failing after `within`.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Retries `op` until it succeeds (Redis coming back after a restart), up to 10 s.
pub async fn eventually_ok<T, F, Fut>(mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = lumina_cluster::Result<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match op().await {
            Ok(value) => return value,
            Err(err) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "still failing: {err}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
