//! JWKS caching: refresh on unknown kid, its rate limit, rotation, shared refreshes,
//! failures, and start-up errors.

use std::time::Duration;

use lumina_auth::{AuthError, Authenticator, JwksSource, JwksStats};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;

const LONG: Duration = Duration::from_secs(3600);

fn stats(loads: u64, failures: u64, keys: usize) -> JwksStats {
    JwksStats {
        loads,
        failures,
        keys,
    }
}

#[tokio::test]
async fn unknown_kid_refreshes_the_file_once_then_rate_limits() {
    let (a, b, c) = (TestKey::ed("a"), TestKey::ed("b"), TestKey::ed("c"));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    write_jwks(&path, &jwks(&[&a]));
    let mut cfg = config(JwksSource::File(path.clone()));
    cfg.refresh_min_interval = LONG;
    let auth = Authenticator::new(cfg).await.expect("authenticator");
    assert_eq!(auth.key_stats(), stats(1, 0, 1));

    let token = b.token(&claims());
    assert_refused(
        auth.verify(&token).await,
        &token,
        AuthError::UnknownKey("\"b\"".into()),
    );
    assert_eq!(auth.key_stats(), stats(2, 0, 1), "exactly one re-read");

    // Key c appears in the file, but a second unknown kid inside the interval must not
    // cause another read — so c is still unknown.
    write_jwks(&path, &jwks(&[&a, &c]));
    let token = c.token(&claims());
    assert_refused(
        auth.verify(&token).await,
        &token,
        AuthError::UnknownKey("\"c\"".into()),
    );
    assert_eq!(auth.key_stats(), stats(2, 0, 1), "rate-limited: no re-read");

    // The cached key keeps working throughout.
    assert!(auth.verify(&a.token(&claims())).await.is_ok());
}

#[tokio::test]
async fn rotation_in_the_file_is_picked_up_on_unknown_kid() {
    let (old, new) = (TestKey::rsa("rsa-test-1"), TestKey::ec("ec-2"));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    write_jwks(&path, &jwks(&[&old]));
    let auth = Authenticator::new(config(JwksSource::File(path.clone())))
        .await
        .expect("authenticator");

    write_jwks(&path, &jwks(&[&old, &new]));
    assert!(auth.verify(&new.token(&claims())).await.is_ok());
    assert!(auth.verify(&old.token(&claims())).await.is_ok());
    assert_eq!(auth.key_stats(), stats(2, 0, 2));
}

#[tokio::test]
async fn unknown_kid_refetches_the_url_once_per_interval() {
    let (a, b, c) = (TestKey::ec("a"), TestKey::ed("b"), TestKey::ed("c"));
    let server = JwksServer::start(&jwks(&[&a]), Duration::ZERO).await;
    let mut cfg = config(JwksSource::Url(server.url.clone()));
    cfg.refresh_min_interval = LONG;
    let auth = Authenticator::new(cfg).await.expect("authenticator");
    assert_eq!(server.hits(), 1, "loaded at start");

    // Rotation: b is published after start and picked up by the one allowed refetch.
    server.set(&jwks(&[&a, &b]));
    assert!(auth.verify(&b.token(&claims())).await.is_ok());
    assert_eq!(server.hits(), 2);

    // Within the interval a further unknown kid is refused without fetching.
    server.set(&jwks(&[&a, &b, &c]));
    let token = c.token(&claims());
    assert_refused(
        auth.verify(&token).await,
        &token,
        AuthError::UnknownKey("\"c\"".into()),
    );
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn refetch_is_allowed_again_after_the_interval() {
    let (a, b, c) = (TestKey::ed("a"), TestKey::ed("b"), TestKey::ed("c"));
    let server = JwksServer::start(&jwks(&[&a]), Duration::ZERO).await;
    let mut cfg = config(JwksSource::Url(server.url.clone()));
    cfg.refresh_min_interval = Duration::from_secs(1);
    let auth = Authenticator::new(cfg).await.expect("authenticator");

    let token = b.token(&claims());
    assert!(auth.verify(&token).await.is_err());
    assert!(auth.verify(&c.token(&claims())).await.is_err());
    assert_eq!(
        server.hits(),
        2,
        "second miss within the interval is rate-limited"
    );

    server.set(&jwks(&[&a, &b]));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(auth.verify(&token).await.is_ok());
    assert_eq!(server.hits(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_verifications_share_one_refresh() {
    let (a, b) = (TestKey::ed("a"), TestKey::ec("b"));
    // The delay keeps the first refetch in flight while the others arrive.
    let server = JwksServer::start(&jwks(&[&a]), Duration::from_millis(200)).await;
    let mut cfg = config(JwksSource::Url(server.url.clone()));
    // No rate limit: sharing must come from waiting on the in-flight refresh itself.
    cfg.refresh_min_interval = Duration::ZERO;
    let auth = Authenticator::new(cfg).await.expect("authenticator");
    server.set(&jwks(&[&a, &b]));

    let token = b.token(&claims());
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (auth, token) = (auth.clone(), token.clone());
            tokio::spawn(async move { auth.verify(&token).await })
        })
        .collect();
    for task in tasks {
        assert!(
            task.await.expect("join").is_ok(),
            "every waiter sees the refreshed set"
        );
    }
    assert_eq!(server.hits(), 2, "one load at start, one shared refresh");
}

#[tokio::test]
async fn a_failed_refresh_keeps_the_cached_keys() {
    let (a, b) = (TestKey::ed("a"), TestKey::ed("b"));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    write_jwks(&path, &jwks(&[&a]));
    let auth = Authenticator::new(config(JwksSource::File(path.clone())))
        .await
        .expect("authenticator");

    std::fs::write(&path, "{ not json").expect("corrupt");
    let token = b.token(&claims());
    assert_refused(
        auth.verify(&token).await,
        &token,
        AuthError::UnknownKey("\"b\"".into()),
    );
    assert_eq!(auth.key_stats(), stats(1, 1, 1));
    assert!(auth.verify(&a.token(&claims())).await.is_ok());

    // An operator-forced refresh ignores the rate limit.
    write_jwks(&path, &jwks(&[&a, &b]));
    assert_eq!(auth.refresh_keys().await.expect("refresh"), 2);
    assert!(auth.verify(&token).await.is_ok());
}

#[tokio::test]
async fn start_up_fails_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("absent.json");
    assert!(Authenticator::new(config(JwksSource::File(missing)))
        .await
        .is_err());

    let only_hmac = dir.path().join("oct.json");
    write_jwks(
        &only_hmac,
        &json!({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}),
    );
    let err = Authenticator::new(config(JwksSource::File(only_hmac)))
        .await
        .expect_err("no usable key");
    assert!(err.to_string().contains("no usable signing key"), "{err}");

    let a = TestKey::ed("a");
    let ok = dir.path().join("ok.json");
    write_jwks(&ok, &jwks(&[&a]));
    let mut cfg = config(JwksSource::File(ok));
    cfg.issuer = String::new();
    assert!(Authenticator::new(cfg).await.is_err());

    let plain = config(JwksSource::Url("http://idp.example.com/jwks".into()));
    let err = Authenticator::new(plain)
        .await
        .expect_err("plain http to a remote host");
    assert!(err.to_string().contains("https"), "{err}");
}

#[tokio::test]
async fn url_credentials_never_reach_error_text() {
    // Port 9 on loopback: nothing listens, so the fetch fails fast.
    let url = "http://user:hunter2@127.0.0.1:9/jwks?access_token=s3cr3t#frag";
    let err = Authenticator::new(config(JwksSource::Url(url.into())))
        .await
        .expect_err("unreachable");
    let text = format!("{err} {err:?}");
    assert!(text.contains("127.0.0.1:9/jwks"), "{text}");
    for secret in ["hunter2", "s3cr3t", "user", "frag"] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
}
