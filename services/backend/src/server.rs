//! The HTTP server: `/v1/ws` (protocol v3), `/healthz`, `/readyz`. Takes its listener and a
//! shutdown token so tests run it in-process on port 0.

use std::sync::Arc;

use axum::extract::{State, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use lumina_protocol::methods::{Identity, ServerInfo};
use lumina_protocol::{ErrorCode, ErrorObject, WS_PATH};
use lumina_runtime::Runtime;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::auth::LocalAuth;
use crate::ws;

/// Everything a connection needs.
pub struct AppState {
    pub runtime: Runtime,
    pub auth: LocalAuth,
    pub info: ServerInfo,
    /// Frames above this get a `frame_too_large` error frame.
    pub max_frame_bytes: usize,
    /// Cancelled to stop the server (signal or `admin.shutdown`).
    pub shutdown: CancellationToken,
}

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(WS_PATH, get(upgrade))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// Serves until `shutdown` is cancelled, then lets open connections close.
pub async fn serve(listener: TcpListener, state: Arc<AppState>) -> std::io::Result<()> {
    let shutdown = state.shutdown.clone();
    axum::serve(listener, router(state))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.shutdown.is_cancelled() {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response()
    } else {
        "ready".into_response()
    }
}

async fn upgrade(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let Some(identity) = state.auth.authenticate(&headers) else {
        return unauthorized();
    };
    // The hard cap is above the configured limit so that an oversize frame still arrives
    // and gets an error frame instead of a dropped connection.
    let hard_cap = state.max_frame_bytes.saturating_mul(4).max(1 << 20);
    ws.max_message_size(hard_cap)
        .max_frame_size(hard_cap)
        .on_upgrade(move |socket| ws::connection(socket, state, identity))
}

fn unauthorized() -> Response {
    let body = serde_json::json!({
        "error": ErrorObject::new(ErrorCode::Unauthorized, "missing or invalid bearer token")
    });
    (StatusCode::UNAUTHORIZED, Json(body)).into_response()
}

/// The identity of the local profile's single user.
pub fn local_identity() -> Identity {
    Identity {
        sub: "local".into(),
        tenant: "local".into(),
        scopes: vec![
            "lumina:session:read".into(),
            "lumina:session:write".into(),
            "lumina:admin".into(),
        ],
    }
}
