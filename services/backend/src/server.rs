//! The HTTP server: `/v1/ws` (protocol v3), the Conversation API (`/api/v1/…`,
//! `conversation/`), A2A (`/a2a`), `/healthz`, `/readyz`, `/metrics`, the web console (`/`,
//! `/console/…`, [`crate::console`]), over any
//! [`Profile`](crate::profile::Profile). Takes its listener and a shutdown token (in the
//! state) so tests run it in-process on port 0.

use std::sync::Arc;

use axum::extract::{State, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt as _;
use axum::{Json, Router};
use lumina_protocol::{ErrorCode, ErrorObject, WS_PATH};
use tokio::net::TcpListener;

pub use crate::profile::AppState;
use crate::ws;

/// Initial read buffer of a WebSocket connection. tungstenite's default (128 KiB) is most
/// of an idle connection's memory; client frames are small (a prompt, an answer), and a
/// bigger one grows the buffer while it is read.
const WS_READ_BUFFER: usize = 4 * 1024;

pub fn router(state: Arc<AppState>) -> Router {
    // A2A (docs/a2a.md): the card and the JSON-RPC endpoint, when the profile has them.
    let a2a = state
        .a2a
        .clone()
        .map(|mount| crate::a2a::router(mount, state.profile.clone()));
    let router = Router::new()
        .route(WS_PATH, get(upgrade))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .merge(crate::conversation::router())
        .merge(crate::console::routes())
        .with_state(state);
    match a2a {
        Some(a2a) => router.merge(a2a),
        None => router,
    }
}

/// Serves until `shutdown` is cancelled, then lets open connections close. Accepted
/// sockets send at once (`TCP_NODELAY`): an SSE event or a WebSocket frame is a small
/// write, and Nagle's algorithm would hold it back until the peer's (delayed, up to 40 ms)
/// ACK of the previous one.
pub async fn serve(listener: TcpListener, state: Arc<AppState>) -> std::io::Result<()> {
    let shutdown = state.shutdown.clone();
    let listener = listener.tap_io(|tcp| {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!(error = %err, "TCP_NODELAY not set on an accepted connection");
        }
    });
    axum::serve(listener, router(state))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let (ready, detail) = state.profile.readiness().await;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(serde_json::json!({ "ready": ready, "checks": detail })),
    )
        .into_response()
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    state.profile.sync_metrics();
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

async fn upgrade(
    State(state): State<Arc<AppState>>,
    mut headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    // A browser cannot set `Authorization` on a WebSocket: the console offers its JWT as
    // the subprotocol `bearer.<token>` instead.
    if !headers.contains_key(axum::http::header::AUTHORIZATION) {
        if let Some(token) = crate::console::bearer_from_subprotocol(&headers) {
            if let Ok(value) = axum::http::HeaderValue::from_str(&format!("Bearer {token}")) {
                headers.insert(axum::http::header::AUTHORIZATION, value);
            }
        }
    }
    let Some((identity, expires_at)) = state.profile.authenticate(&headers).await else {
        state.metrics.ws_auth_failures.inc();
        return unauthorized();
    };
    let permit = match state.limits.connect(&identity.tenant) {
        Ok(permit) => permit,
        Err(error) => return rate_limited(error),
    };
    // The hard cap is above the configured limit so that an oversize frame still arrives
    // and gets an error frame instead of a dropped connection.
    let hard_cap = state.max_frame_bytes.saturating_mul(4).max(1 << 20);
    ws.protocols([crate::console::SUBPROTOCOL])
        .max_message_size(hard_cap)
        .max_frame_size(hard_cap)
        .read_buffer_size(WS_READ_BUFFER)
        .on_upgrade(move |socket| async move {
            ws::connection(socket, state, identity, expires_at).await;
            drop(permit);
        })
}

fn rate_limited(error: ErrorObject) -> Response {
    let retry_after_ms = error
        .data
        .as_ref()
        .and_then(|d| d.get("retry_after_ms"))
        .and_then(|v| v.as_u64())
        .unwrap_or(1000);
    let seconds = retry_after_ms.div_ceil(1000).to_string();
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(axum::http::header::RETRY_AFTER, seconds)],
        Json(serde_json::json!({ "error": error })),
    )
        .into_response()
}

fn unauthorized() -> Response {
    let body = serde_json::json!({
        "error": ErrorObject::new(ErrorCode::Unauthorized, "missing, invalid or expired bearer token")
    });
    (StatusCode::UNAUTHORIZED, Json(body)).into_response()
}
