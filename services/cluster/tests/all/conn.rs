//! Connecting, timeouts, and keeping credentials out of errors.

use std::time::Duration;

use lumina_cluster::{ClusterError, ConnOptions, Redis};
use tokio::time::Instant;

use super::support::{options, raw_cmd, start};

#[tokio::test]
async fn an_unreachable_redis_is_a_start_up_error_without_the_password() {
    let (mut server, _redis) = start().await;
    let port = server.port();
    server.stop();
    let started = Instant::now();
    let err = Redis::connect(&format!("redis://:s3cret-pw@127.0.0.1:{port}/"), options())
        .await
        .unwrap_err();
    assert!(matches!(err, ClusterError::Unavailable(_)), "{err:?}");
    assert!(!err.to_string().contains("s3cret"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn wrong_credentials_are_reported_without_the_password() {
    let (server, redis) = start().await;
    let _: () = raw_cmd(
        &server,
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg("right-pw"),
    )
    .await;
    drop(redis);

    let err = Redis::connect(
        &format!("redis://:wr%40ng-pw@127.0.0.1:{}/", server.port()),
        options(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ClusterError::Unavailable(_)), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(
        !text.contains("wr%40ng-pw") && !text.contains("wr@ng-pw"),
        "{text}"
    );

    let redis = Redis::connect(
        &format!("redis://:right-pw@127.0.0.1:{}/", server.port()),
        options(),
    )
    .await
    .unwrap();
    redis.ping().await.unwrap();
    assert!(!format!("{redis:?}").contains("right-pw"));
}

#[tokio::test]
async fn invalid_urls_are_rejected_without_echoing_them() {
    let err = Redis::connect("nonsense://:s3cret@host/", ConnOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ClusterError::Unavailable(_)), "{err:?}");
    assert!(!err.to_string().contains("s3cret"), "{err}");
}

#[tokio::test]
async fn commands_fail_within_the_command_timeout_while_redis_is_down_and_recover() {
    let (mut server, redis) = start().await;
    redis.ping().await.unwrap();
    server.stop();
    let started = Instant::now();
    let err = redis.ping().await.unwrap_err();
    assert!(matches!(err, ClusterError::Unavailable(_)), "{err:?}");
    // Bounded by the 1 s command timeout (connection refused is usually much faster).
    assert!(
        started.elapsed() <= Duration::from_millis(2000),
        "{:?}",
        started.elapsed()
    );

    server.restart().unwrap();
    super::support::eventually_ok(|| redis.ping()).await;
}
