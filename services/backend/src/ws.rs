//! One WebSocket connection: frame validation (size, UTF-8, JSON) and concurrent request
//! handling (`dispatch.rs`); the connection's state is `conn.rs`. Bad frames get an error frame; the
//! connection and every other session carry on.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use futures::{SinkExt, StreamExt};
use lumina_protocol::methods::Identity;
use lumina_protocol::{ClientFrame, ErrorCode, ErrorObject, ServerFrame};
use tokio::sync::mpsc;

use crate::conn::Conn;
use crate::dispatch;
use crate::profile::AppState;

/// Serves one connection. `expires_at` (unix seconds) is the bearer token's expiry: the
/// connection is closed with an `unauthorized` error frame when it passes.
pub async fn connection(
    socket: WebSocket,
    state: Arc<AppState>,
    identity: Identity,
    expires_at: Option<i64>,
) {
    state.metrics.ws_connections.inc();
    serve_connection(socket, state.clone(), identity, expires_at).await;
    state.metrics.ws_connections.dec();
}

async fn serve_connection(
    socket: WebSocket,
    state: Arc<AppState>,
    identity: Identity,
    expires_at: Option<i64>,
) {
    let (mut sink, mut stream) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<ServerFrame>(1024);
    let writer = tokio::spawn(async move {
        while let Some(frame) = out_rx.recv().await {
            let text = match serde_json::to_string(&frame) {
                Ok(t) => t,
                Err(err) => {
                    tracing::error!(error = %err, "unserializable frame dropped");
                    continue;
                }
            };
            if sink.send(Message::Text(text.into())).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let conn = Arc::new(Conn::new(state.clone(), identity, out_tx));
    tracing::debug!("websocket connected");
    let shutdown = state.shutdown.clone();
    let expiry = until(expires_at);
    tokio::pin!(expiry);
    loop {
        let message = tokio::select! {
            m = stream.next() => m,
            _ = shutdown.cancelled() => break,
            _ = &mut expiry => {
                reject(&conn, ErrorCode::Unauthorized, "the bearer token expired; reconnect with a new one").await;
                break;
            }
        };
        let text = match message {
            None | Some(Ok(Message::Close(_))) => break,
            Some(Ok(Message::Text(text))) => text.as_str().to_owned(),
            Some(Ok(Message::Binary(bytes))) => match String::from_utf8(bytes.to_vec()) {
                Ok(text) => text,
                Err(_) => {
                    reject(&conn, ErrorCode::InvalidUtf8, "frame is not valid UTF-8").await;
                    continue;
                }
            },
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Err(err)) => {
                // Invalid UTF-8 in a text frame fails the read and ends the WebSocket; say why
                // first. (Binary frames are checked by us and keep the connection.)
                let utf8 = err.to_string().to_ascii_lowercase().contains("utf-8");
                let (code, message) = if utf8 {
                    (ErrorCode::InvalidUtf8, "text frame is not valid UTF-8")
                } else {
                    (ErrorCode::ParseError, "unreadable frame")
                };
                reject(&conn, code, message).await;
                tracing::debug!(error = %err, "websocket read error; closing");
                break;
            }
        };
        if text.len() > state.max_frame_bytes {
            let message = format!(
                "frame of {} bytes exceeds the limit of {} bytes",
                text.len(),
                state.max_frame_bytes
            );
            reject(&conn, ErrorCode::FrameTooLarge, &message).await;
            continue;
        }
        let frame = match parse_frame(&text) {
            Ok(frame) => frame,
            Err((id, error)) => {
                conn.send(ServerFrame::Error { id, error }).await;
                continue;
            }
        };
        let conn = conn.clone();
        tokio::spawn(async move { dispatch::handle(conn, frame).await });
    }
    drop(conn);
    let _ = writer.await;
    tracing::debug!("websocket closed");
}

/// Sleeps until the unix time `at` (forever when `None`).
async fn until(at: Option<i64>) {
    match at {
        Some(at) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            let left = u64::try_from(at - now).unwrap_or(0);
            tokio::time::sleep(std::time::Duration::from_secs(left)).await;
        }
        None => std::future::pending().await,
    }
}

async fn reject(conn: &Conn, code: ErrorCode, message: &str) {
    conn.send(ServerFrame::Error {
        id: None,
        error: ErrorObject::new(code, message),
    })
    .await;
}

/// Parses a request frame; on failure returns the id when one could be read.
fn parse_frame(text: &str) -> Result<ClientFrame, (Option<String>, ErrorObject)> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        (
            None,
            ErrorObject::new(ErrorCode::ParseError, format!("malformed JSON: {e}")),
        )
    })?;
    let id = value.get("id").and_then(|v| v.as_str()).map(str::to_owned);
    serde_json::from_value::<ClientFrame>(value).map_err(|e| {
        (
            id,
            ErrorObject::new(
                ErrorCode::ParseError,
                format!("not a request object (needs string `id` and `method`): {e}"),
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_keep_the_id_when_possible() {
        assert_eq!(parse_frame("{").unwrap_err().0, None);
        let (id, err) = parse_frame(r#"{"id":"x","params":{}}"#).unwrap_err();
        assert_eq!(id.as_deref(), Some("x"));
        assert_eq!(err.code, ErrorCode::ParseError);
        assert!(parse_frame(r#"{"id":"x","method":"hello"}"#).is_ok());
        // The same request spelled as an array of its fields is not a frame.
        let (id, err) = parse_frame(r#"["x","hello",{}]"#).unwrap_err();
        assert_eq!(id, None);
        assert_eq!(err.code, ErrorCode::ParseError);
    }
}
