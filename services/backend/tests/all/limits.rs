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
async fn a_run_over_the_concurrent_run_limit_is_refused() {
    let h = Harness::start_with(
        "anthropic",
        vec![Turn::text("slow").with_chunk_delay_ms(300)],
        &[("LUMINA_TENANT_MAX_CONCURRENT_RUNS", "1")],
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
    // A follow-up to the running session is not a new concurrent run: it queues.
    client
        .session_submit(&submit(&first.id, "later", json!(null)))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    // Nothing of the refused submit reached the journal.
    let events = client
        .session_events(&second.id, 0, None)
        .await
        .unwrap()
        .events;
    assert!(events.iter().all(|f| f.event.kind() != "run.started"));
    let metrics = h.state.metrics.render();
    assert!(
        metrics.contains(r#"lumina_rate_limited_total{limit="concurrent_runs"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_retried_submit_gets_its_run_even_at_the_concurrent_run_limit() {
    let h = Harness::start_with(
        "anthropic",
        vec![
            Turn::text("done"),
            Turn::text("slow").with_chunk_delay_ms(300),
        ],
        &[("LUMINA_TENANT_MAX_CONCURRENT_RUNS", "1")],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let first = h.session(&client).await;
    let second = h.session(&client).await;
    let original = submit(&first.id, "one", json!(null));
    let run = client.session_submit(&original).await.unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    let busy = client
        .session_submit(&submit(&second.id, "two", json!(null)))
        .await
        .unwrap();
    // The first session is idle and the tenant is at its limit, but the retry (its reply
    // lost, say) starts nothing: it gets the original run back.
    let retried = client.session_submit(&original).await.unwrap();
    assert_eq!(retried.run_id, run.run_id);
    until_run_end(&mut notes, &busy.run_id).await;
}

#[tokio::test]
async fn submits_over_the_per_minute_limit_are_refused() {
    let h = Harness::start_with(
        "anthropic",
        vec![],
        &[("LUMINA_TENANT_SUBMITS_PER_MINUTE", "3")],
    )
    .await;
    h.model.set_default_turn(Turn::text("ok"));
    let (client, _notes) = h.client().await;
    let session = h.session(&client).await;
    // Three a minute: the fourth submit is refused — or, when a minute boundary passes in
    // between (the window is the clock's minute), a later one, never after the seventh.
    let mut refused_at = None;
    for i in 1..=7 {
        match client
            .session_submit(&submit(&session.id, "go", json!(null)))
            .await
        {
            Ok(_) => {}
            Err(err) => {
                let error = err.server_error().unwrap().clone();
                assert_eq!(error.code, ErrorCode::RateLimited);
                let data = error.data.unwrap();
                assert_eq!(data["limit"], "submits_per_minute");
                assert!(data["retry_after_ms"].as_u64().unwrap() <= 60_000);
                refused_at = Some(i);
                break;
            }
        }
    }
    let refused_at = refused_at.expect("no submit was refused");
    assert!(refused_at >= 4, "refused at submit {refused_at}");
    let metrics = h.state.metrics.render();
    assert!(
        metrics.contains(r#"lumina_rate_limited_total{limit="submits_per_minute"} 1"#),
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
