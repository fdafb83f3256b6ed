//! A scripted WebSocket server speaking just enough of protocol v3 to exercise the client.
//! It is not the backend: it answers fixed methods with fixed frames.

use futures::{SinkExt, StreamExt};
use lumina_client::protocol::{ClientFrame, Event, EventFrame};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::Message;

pub const TOKEN: &str = "s3cret-token";

/// Events the fake journal holds: seq 1..=JOURNAL_LEN.
pub const JOURNAL_LEN: u64 = 5;

pub fn event_frame(seq: u64) -> EventFrame {
    EventFrame {
        session_id: "s1".into(),
        seq,
        stream: "main".into(),
        stream_seq: seq,
        ts_ms: 0,
        event: Event::StepStarted {
            run_id: "r1".into(),
            step: seq as u32,
        },
    }
}

/// Starts the server on a free port; returns its `ws://` URL.
pub async fn start() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                // The callback signature is tungstenite's.
                #[allow(clippy::result_large_err)]
                let check = |request: &Request, response: Response| {
                    let authorized = request
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        == Some(&format!("Bearer {TOKEN}"));
                    if authorized {
                        Ok(response)
                    } else {
                        let mut error = ErrorResponse::new(Some("invalid token".to_string()));
                        *error.status_mut() = StatusCode::UNAUTHORIZED;
                        Err(error)
                    }
                };
                let Ok(socket) = tokio_tungstenite::accept_hdr_async(stream, check).await else {
                    return;
                };
                serve(socket).await;
            });
        }
    });
    format!("ws://{addr}/v1/ws")
}

async fn serve(socket: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>) {
    let (mut tx, mut rx) = socket.split();
    while let Some(Ok(message)) = rx.next().await {
        let Message::Text(text) = message else {
            continue;
        };
        let Ok(request) = serde_json::from_str::<ClientFrame>(text.as_str()) else {
            let frame = json!({"type": "error", "id": null,
                "error": {"code": "parse_error", "message": "not a request"}});
            let _ = tx.send(Message::text(frame.to_string())).await;
            continue;
        };
        let mut frames: Vec<Value> = Vec::new();
        let id = request.id.clone();
        match request.method.as_str() {
            "hello" => frames.push(json!({"type": "response", "id": id, "result": {
                "protocol": 3,
                "server": {"name": "fake", "version": "0", "profile": "local",
                           "instance_id": "i1", "max_frame_bytes": 1048576},
                "identity": {"sub": "local", "tenant": "local", "scopes": ["*"]}
            }})),
            "echo" => frames.push(json!({"type": "response", "id": id, "result": request.params})),
            "session.events" => {
                let after = request.params["after_seq"].as_u64().unwrap_or(0);
                // Pages of two, to exercise `more`.
                let events: Vec<EventFrame> =
                    (after + 1..=JOURNAL_LEN).take(2).map(event_frame).collect();
                let last = events.last().map(|e| e.seq).unwrap_or(after);
                frames.push(json!({"type": "response", "id": id, "result": {
                    "events": events, "head_seq": JOURNAL_LEN, "more": last < JOURNAL_LEN
                }}));
            }
            "push" => {
                frames.push(json!({"type": "event", "session_id": "s1", "seq": 1,
                    "stream": "main", "stream_seq": 1, "ts_ms": 5,
                    "event": {"kind": "session.archived"}}));
                frames.push(json!({"type": "delta", "session_id": "s1", "run_id": "r1",
                    "step": 1, "channel": "text", "text": "hi"}));
                frames.push(json!({"type": "error", "id": null,
                    "error": {"code": "frame_too_large", "message": "too big"}}));
                frames.push(json!({"type": "response", "id": id, "result": {"ok": true}}));
            }
            // An answer without the `type` tag, as docs/design.md#protocol writes them.
            "untagged" => frames.push(json!({"id": id, "result": 42})),
            "slow" => {}
            "hang_up" => {
                let _ = tx.close().await;
                return;
            }
            _ => frames.push(json!({"type": "error", "id": id,
                "error": {"code": "unknown_method", "message": "no such method"}})),
        }
        for frame in frames {
            if tx.send(Message::text(frame.to_string())).await.is_err() {
                return;
            }
        }
    }
}
