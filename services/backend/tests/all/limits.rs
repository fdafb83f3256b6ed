//! Per-tenant limits: a refused connection is an HTTP 429 with `Retry-After` and a
//! `rate_limited` body; refused submits and runs are `rate_limited` errors with
//! `retry_after_ms`, and nothing of them is journaled.

use lumina_client::Client;
use lumina_protocol::ErrorCode;
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::{submit, until_run_end, Harness};

#[tokio::test]
async fn a_connection_over_the_tenant_limit_gets_429_with_retry_after() {
    let h = Harness::start_with(
        "anthropic",
        vec![],
        &[("LUMINA_TENANT_MAX_CONNECTIONS", "2")],
    )
    .await;
    let (a, _a) = h.client().await;
    let (_b, _bn) = h.client().await;
    let refused = Client::connect(&h.url, Some(&h.token)).await.err().unwrap();
    let text = format!("{refused:?}");
    assert!(text.contains("429"), "{text}");
    // The raw upgrade: status, header and body.
    let port = h
        .url
        .trim_start_matches("ws://127.0.0.1:")
        .split('/')
        .next()
        .unwrap();
    let request = format!(
        "GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Authorization: Bearer {}\r\n\r\n",
        h.token
    );
    let response = raw_http(port, &request).await;
    assert!(response.starts_with("HTTP/1.1 429"), "{response}");
    assert!(
        response.to_ascii_lowercase().contains("retry-after: 5"),
        "{response}"
    );
    assert!(response.contains(r#""code":"rate_limited""#), "{response}");
    assert!(!response.contains(&h.token));
    // A closed connection frees its place.
    a.close();
    drop(a);
    let mut admitted = false;
    for _ in 0..50 {
        if let Ok((c, _n)) = Client::connect(&h.url, Some(&h.token)).await {
            c.hello("test").await.unwrap();
            admitted = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(admitted);
}

#[tokio::test]
async fn submits_per_minute_and_concurrent_runs_are_limited() {
    let h = Harness::start_with(
        "anthropic",
        vec![
            Turn::text("slow").with_chunk_delay_ms(300),
            Turn::text("two"),
        ],
        &[
            ("LUMINA_TENANT_SUBMITS_PER_MINUTE", "3"),
            ("LUMINA_TENANT_MAX_CONCURRENT_RUNS", "1"),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let first = h.session(&client).await;
    let second = h.session(&client).await;
    let run = client
        .session_submit(&submit(&first.id, "one", json!(null)))
        .await
        .unwrap();
    // Another session would start a second run while the first runs: refused.
    let err = client
        .session_submit(&submit(&second.id, "two", json!(null)))
        .await
        .unwrap_err();
    let error = err.server_error().unwrap();
    assert_eq!(error.code, ErrorCode::RateLimited);
    assert_eq!(error.data.as_ref().unwrap()["limit"], "concurrent_runs");
    assert!(error.data.as_ref().unwrap()["retry_after_ms"]
        .as_u64()
        .is_some());
    until_run_end(&mut notes, &run.run_id).await;
    // Nothing of the refused submit reached the journal.
    let events = client
        .session_events(&second.id, 0, None)
        .await
        .unwrap()
        .events;
    assert!(events.iter().all(|f| f.event.kind() != "run.started"));

    // The run's end is journaled just before the session is idle again.
    for _ in 0..100 {
        if client.session_info(&first.id).await.unwrap().session.status == "idle" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Three submits this minute were counted already (one refused by the run limit still
    // counts): the fourth is refused, whatever the session.
    let run = client
        .session_submit(&submit(&second.id, "two", json!(null)))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    let err = client
        .session_submit(&submit(&second.id, "three", json!(null)))
        .await
        .unwrap_err();
    let error = err.server_error().unwrap();
    assert_eq!(error.code, ErrorCode::RateLimited);
    assert_eq!(error.data.as_ref().unwrap()["limit"], "submits_per_minute");
    let metrics = h.state.metrics.render();
    assert!(
        metrics.contains(r#"lumina_rate_limited_total{limit="submits_per_minute"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"lumina_rate_limited_total{limit="concurrent_runs"} 1"#),
        "{metrics}"
    );
}

async fn raw_http(port: &str, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}"))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_end(&mut buf),
    )
    .await;
    String::from_utf8_lossy(&buf).into_owned()
}
