//! Bad input gets a clear error frame (or HTTP 401) and never takes the server down.

use futures::{SinkExt, StreamExt};
use lumina_protocol::methods::SessionCreateParams;
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::support::*;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn raw(h: &Harness, token: Option<&str>) -> Result<Socket, WsError> {
    let mut request = h.url.as_str().into_client_request().unwrap();
    if let Some(token) = token {
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(s, _)| s)
}

async fn next_json(socket: &mut Socket) -> Value {
    loop {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(10), socket.next())
            .await
            .expect("no frame")
            .expect("closed")
            .expect("read error");
        if let Message::Text(text) = msg {
            return serde_json::from_str(text.as_str()).unwrap();
        }
    }
}

fn code(frame: &Value) -> &str {
    frame["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn wrong_or_missing_tokens_get_401() {
    let h = Harness::start("anthropic", vec![]).await;
    for token in [None, Some("wrong"), Some("")] {
        match raw(&h, token).await {
            Err(WsError::Http(response)) => {
                assert_eq!(response.status(), 401);
                let body = String::from_utf8(response.body().clone().unwrap_or_default()).unwrap();
                assert!(body.contains("unauthorized"), "{body}");
                assert!(!body.contains(&h.token));
            }
            other => panic!("expected 401, got {other:?}"),
        }
    }
    h.stop().await;
}

#[tokio::test]
async fn malformed_frames_get_error_frames_and_the_connection_survives() {
    let h = Harness::start_with(
        "anthropic",
        vec![Turn::text("still fine")],
        &[("LUMINA_MAX_FRAME_BYTES", "4096")],
    )
    .await;
    let mut ws = raw(&h, Some(&h.token)).await.unwrap();

    ws.send(Message::text("{not json")).await.unwrap();
    let frame = next_json(&mut ws).await;
    assert_eq!(
        (frame["type"].as_str(), frame["id"].clone(), code(&frame)),
        (Some("error"), Value::Null, "parse_error")
    );

    ws.send(Message::text(r#"{"id":"1","params":{}}"#))
        .await
        .unwrap();
    let frame = next_json(&mut ws).await;
    assert_eq!(
        (frame["id"].as_str(), code(&frame)),
        (Some("1"), "parse_error")
    );

    ws.send(Message::text(r#"{"id":"2","method":"session.teleport"}"#))
        .await
        .unwrap();
    let frame = next_json(&mut ws).await;
    assert_eq!(
        (frame["id"].as_str(), code(&frame)),
        (Some("2"), "unknown_method")
    );

    ws.send(Message::text(
        r#"{"id":"3","method":"session.resume","params":{"after_seq":"x"}}"#,
    ))
    .await
    .unwrap();
    let frame = next_json(&mut ws).await;
    assert_eq!(
        (frame["id"].as_str(), code(&frame)),
        (Some("3"), "invalid_params")
    );

    ws.send(Message::text(
        r#"{"id":"4","method":"session.events","params":{"session_id":"../../etc"}}"#,
    ))
    .await
    .unwrap();
    let frame = next_json(&mut ws).await;
    assert_eq!(
        (frame["id"].as_str(), code(&frame)),
        (Some("4"), "not_found")
    );

    let big =
        json!({"id": "5", "method": "hello", "params": {"client": "x".repeat(10_000)}}).to_string();
    ws.send(Message::text(big)).await.unwrap();
    let frame = next_json(&mut ws).await;
    assert_eq!(code(&frame), "frame_too_large");

    ws.send(Message::binary(vec![0xff, 0xfe, 0x7b]))
        .await
        .unwrap();
    let frame = next_json(&mut ws).await;
    assert_eq!(code(&frame), "invalid_utf8");

    ws.send(Message::text(r#"{"id":"6","method":"session.submit","params":{"session_id":"nope","idempotency_key":"k","prompt":"p"}}"#)).await.unwrap();
    let frame = next_json(&mut ws).await;
    assert_eq!(
        (frame["id"].as_str(), code(&frame)),
        (Some("6"), "not_found")
    );

    // The same connection still works.
    ws.send(Message::text(
        r#"{"id":"7","method":"hello","params":{"protocols":[3]}}"#,
    ))
    .await
    .unwrap();
    let frame = next_json(&mut ws).await;
    assert_eq!(frame["type"], "response");
    assert_eq!(frame["result"]["protocol"], 3);
    assert_eq!(frame["result"]["server"]["max_frame_bytes"], 4096);

    ws.send(Message::text(
        r#"{"id":"8","method":"hello","params":{"protocols":[1,2]}}"#,
    ))
    .await
    .unwrap();
    let frame = next_json(&mut ws).await;
    assert_eq!(code(&frame), "unsupported_version");
    h.stop().await;
}

#[tokio::test]
async fn invalid_utf8_text_frame_closes_only_that_connection() {
    let h = Harness::start("anthropic", vec![Turn::text("other sessions unaffected")]).await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;

    let mut bad = raw(&h, Some(&h.token)).await.unwrap();
    let frame = Frame::message(vec![b'"', 0xc3, 0x28, b'"'], OpCode::Data(Data::Text), true);
    bad.send(Message::Frame(frame)).await.unwrap();
    let reply = next_json(&mut bad).await;
    assert_eq!(code(&reply), "invalid_utf8");

    // Other connections and sessions carry on.
    let run = client
        .session_submit(&submit(&session.id, "hello", bypass()))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    assert!(
        matches!(&frames.last().unwrap().event, lumina_protocol::Event::RunCompleted { result, .. } if result == "other sessions unaffected")
    );
    let (fresh, _n) = h.client().await;
    fresh
        .session_create(&SessionCreateParams::default())
        .await
        .unwrap();
    h.stop().await;
}
