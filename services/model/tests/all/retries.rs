//! Retry policy and fallback (docs/specs/model-streaming.md#retry-policy,
//! docs/design.md#fallback).

use std::time::{Duration, Instant};

use lumina_model::{ApiType, ModelError, ModelOptions, Provider};
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;

use super::support::{client, endpoint, fast_options, run, user};

crate::both_apis!(
    rate_limit_with_retry_after_then_success,
    server_error_then_success,
    overloaded_after_200_then_success,
    stalled_stream_times_out_and_is_retried,
    disconnect_before_output_is_retried,
    disconnect_after_text_is_neither_retried_nor_fallen_back,
    fallback_answers_after_primary_retries_are_exhausted,
    x_should_retry_overrides_the_status,
    connection_refused_is_a_network_error_and_falls_back,
);

/// Events sent before the first text delta: Anthropic message_start, content_block_start,
/// ping; OpenAI the role chunk.
fn events_before_text(api: ApiType) -> usize {
    match api {
        ApiType::Anthropic => 3,
        _ => 1,
    }
}

async fn rate_limit_with_retry_after_then_success(api: ApiType) {
    let server = ScriptedModelServer::start(vec![
        Turn::http_error(429).with_retry_after_secs(1),
        Turn::text("after the wait"),
    ])
    .unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let started = Instant::now();
    let resp = run(&c, &user("hi")).await.result.unwrap();
    // max_backoff is 5 ms, so only the honoured retry-after explains a ~1 s pause.
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(resp.text, "after the wait");
    assert_eq!(server.request_count(), 2);
}

async fn server_error_then_success(api: ApiType) {
    let server =
        ScriptedModelServer::start(vec![Turn::http_error(500), Turn::text("recovered")]).unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let resp = run(&c, &user("hi")).await.result.unwrap();
    assert_eq!(
        (resp.text.as_str(), resp.provider),
        ("recovered", Provider::Primary)
    );
    assert_eq!(server.request_count(), 2);
}

async fn overloaded_after_200_then_success(api: ApiType) {
    let server = ScriptedModelServer::start(vec![
        Turn::text("lost").overloaded_after_200(),
        Turn::text("second try"),
    ])
    .unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let run = run(&c, &user("hi")).await;
    assert_eq!(run.result.as_ref().unwrap().text, "second try");
    assert_eq!(
        run.text_deltas().concat(),
        "second try",
        "nothing from the failed attempt"
    );
    assert_eq!(server.request_count(), 2);
}

async fn stalled_stream_times_out_and_is_retried(api: ApiType) {
    let server = ScriptedModelServer::start(vec![
        Turn::text("never").stall_after(1),
        Turn::text("never either").stall_after(1),
    ])
    .unwrap();
    let options = ModelOptions {
        idle_timeout: Duration::from_millis(300),
        max_retries: 1,
        ..fast_options()
    };
    let c = client(endpoint(&server, api), None, options);
    let started = Instant::now();
    let run = run(&c, &user("hi")).await;
    assert!(
        matches!(run.result, Err(ModelError::Timeout(_))),
        "{:?}",
        run.result
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(
        server.request_count(),
        2,
        "a stall before any output is retryable"
    );
    assert!(run.deltas.is_empty());
}

async fn disconnect_before_output_is_retried(api: ApiType) {
    let server = ScriptedModelServer::start(vec![
        Turn::text("cut").disconnect_after(events_before_text(api)),
        Turn::text("whole answer"),
    ])
    .unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let run = run(&c, &user("hi")).await;
    assert_eq!(run.result.as_ref().unwrap().text, "whole answer");
    assert_eq!(run.text_deltas().concat(), "whole answer");
    assert_eq!(server.request_count(), 2);
}

async fn disconnect_after_text_is_neither_retried_nor_fallen_back(api: ApiType) {
    let primary = ScriptedModelServer::start(vec![
        Turn::text("Partial answer that gets cut").disconnect_after(events_before_text(api) + 2),
        Turn::text("must not be used"),
    ])
    .unwrap();
    let fallback = ScriptedModelServer::start(vec![]).unwrap();
    let c = client(
        endpoint(&primary, api),
        Some(endpoint(&fallback, api)),
        fast_options(),
    );
    let run = run(&c, &user("hi")).await;
    assert!(
        matches!(run.result, Err(ModelError::Network(_))),
        "{:?}",
        run.result
    );
    assert_eq!(run.text_deltas(), vec!["Part", "ial "]);
    assert_eq!(primary.request_count(), 1);
    assert_eq!(fallback.request_count(), 0);
}

async fn fallback_answers_after_primary_retries_are_exhausted(api: ApiType) {
    let primary = ScriptedModelServer::start(vec![
        Turn::http_error(500),
        Turn::http_error(502),
        Turn::http_error(503),
    ])
    .unwrap();
    let fallback = ScriptedModelServer::start(vec![Turn::text("from the fallback")]).unwrap();
    let mut fb = endpoint(&fallback, api);
    fb.model = "fallback-model".into();
    let c = client(endpoint(&primary, api), Some(fb), fast_options());
    let resp = run(&c, &user("hi")).await.result.unwrap();
    assert_eq!(resp.text, "from the fallback");
    assert_eq!(resp.provider, Provider::Fallback);
    assert_eq!(resp.model, "fallback-model");
    assert_eq!(
        primary.request_count(),
        3,
        "first attempt + max_retries (2)"
    );
    assert_eq!(fallback.request_count(), 1);
    assert_eq!(fallback.requests()[0].body["model"], "fallback-model");
}

async fn x_should_retry_overrides_the_status(api: ApiType) {
    let server = ScriptedModelServer::start(vec![
        Turn::http_error(503).with_error_header("x-should-retry", "false"),
        Turn::text("not reached"),
    ])
    .unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let result = run(&c, &user("hi")).await.result;
    assert!(
        matches!(result, Err(ModelError::Server { status: 503, .. })),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 1);

    let server = ScriptedModelServer::start(vec![
        Turn::http_error(400).with_error_header("x-should-retry", "true"),
        Turn::text("retried a 400"),
    ])
    .unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    assert_eq!(
        run(&c, &user("hi")).await.result.unwrap().text,
        "retried a 400"
    );
    assert_eq!(server.request_count(), 2);
}

async fn connection_refused_is_a_network_error_and_falls_back(api: ApiType) {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let fallback = ScriptedModelServer::start(vec![]).unwrap();
    let mut dead = endpoint(&fallback, api);
    dead.base_url = format!("http://127.0.0.1:{port}");
    let c = client(dead.clone(), None, fast_options());
    let result = run(&c, &user("hi")).await.result;
    assert!(matches!(result, Err(ModelError::Network(_))), "{result:?}");

    let c = client(dead, Some(endpoint(&fallback, api)), fast_options());
    let resp = run(&c, &user("hi")).await.result.unwrap();
    assert_eq!(resp.provider, Provider::Fallback);
}
