//! Non-retryable errors, key hygiene and cancellation.

use std::time::{Duration, Instant};

use lumina_model::{ApiType, ModelError, StreamDelta};
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use super::support::{client, endpoint, fast_options, run, user, KEY};

crate::both_apis!(
    unauthorized_is_auth_without_retry_or_fallback,
    bad_request_is_shown_not_retried,
    cancellation_mid_stream_is_prompt,
    cancellation_during_backoff_is_prompt,
);

async fn unauthorized_is_auth_without_retry_or_fallback(api: ApiType) {
    let primary = ScriptedModelServer::start(vec![Turn::http_error(401)]).unwrap();
    let fallback = ScriptedModelServer::start(vec![]).unwrap();
    let c = client(
        endpoint(&primary, api),
        Some(endpoint(&fallback, api)),
        fast_options(),
    );
    let err = run(&c, &user("hi")).await.result.unwrap_err();
    let expected_message = match api {
        ApiType::Anthropic => "invalid x-api-key (request-id: req_scripted_1)",
        _ => "Incorrect API key provided. (request-id: req_scripted_1)",
    };
    assert_eq!(
        err,
        ModelError::Auth {
            status: 401,
            message: expected_message.into()
        }
    );
    let shown = format!("{err} {err:?} {c:?}");
    assert!(!shown.contains(KEY), "the key leaked: {shown}");
    assert_eq!(primary.request_count(), 1);
    assert_eq!(fallback.request_count(), 0);
}

async fn bad_request_is_shown_not_retried(api: ApiType) {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 999999 > 64000, which is the maximum allowed"}}"#;
    let primary =
        ScriptedModelServer::start(vec![Turn::http_error(400).with_error_body(body)]).unwrap();
    let fallback = ScriptedModelServer::start(vec![]).unwrap();
    let c = client(
        endpoint(&primary, api),
        Some(endpoint(&fallback, api)),
        fast_options(),
    );
    let err = run(&c, &user("hi")).await.result.unwrap_err();
    assert!(
        matches!(&err, ModelError::BadRequest { status: 400, message } if message.starts_with("max_tokens: 999999")),
        "{err:?}"
    );
    assert_eq!((primary.request_count(), fallback.request_count()), (1, 0));
}

async fn cancellation_mid_stream_is_prompt(api: ApiType) {
    let long = "word ".repeat(200);
    let server =
        ScriptedModelServer::start(vec![Turn::text(long).with_chunk_delay_ms(50)]).unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let cancel = CancellationToken::new();
    let mut deltas = 0usize;
    let trigger = cancel.clone();
    let mut sink = |_d: StreamDelta| {
        deltas += 1;
        if deltas == 2 {
            trigger.cancel();
        }
    };
    let started = Instant::now();
    let result = c.stream(&user("hi"), &cancel, &mut sink).await;
    assert_eq!(result, Err(ModelError::Cancelled));
    assert_eq!(deltas, 2);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

async fn cancellation_during_backoff_is_prompt(api: ApiType) {
    let server =
        ScriptedModelServer::start(vec![Turn::http_error(429).with_retry_after_secs(30)]).unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let result = c.stream(&user("hi"), &cancel, &mut |_d| {}).await;
    assert_eq!(result, Err(ModelError::Cancelled));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn already_cancelled_token_sends_nothing() {
    let server = ScriptedModelServer::start(vec![]).unwrap();
    let c = client(endpoint(&server, ApiType::Anthropic), None, fast_options());
    let cancel = CancellationToken::new();
    cancel.cancel();
    let result = c.stream(&user("hi"), &cancel, &mut |_d| {}).await;
    assert_eq!(result, Err(ModelError::Cancelled));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.request_count(), 0);
}
