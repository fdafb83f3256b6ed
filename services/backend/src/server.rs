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
use crate::cluster::Node;
use crate::metrics::Metrics;
use crate::ws;

/// The profile this server runs.
pub enum Mode {
    /// One process, SQLite, the 127.0.0.1 token.
    Local { runtime: Runtime, auth: LocalAuth },
    /// N instances behind JWTs, PostgreSQL and Redis.
    Cluster(Arc<Node>),
}

/// Everything a connection needs.
pub struct AppState {
    pub mode: Mode,
    pub metrics: Metrics,
    pub info: ServerInfo,
    /// Frames above this get a `frame_too_large` error frame.
    pub max_frame_bytes: usize,
    /// Cancelled to stop the server (signal or `admin.shutdown`).
    pub shutdown: CancellationToken,
}

impl AppState {
    /// The local profile's runtime (`None` in the cluster profile, where runtimes are per
    /// tenant).
    pub fn runtime(&self) -> Option<&Runtime> {
        match &self.mode {
            Mode::Local { runtime, .. } => Some(runtime),
            Mode::Cluster(_) => None,
        }
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(WS_PATH, get(upgrade))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
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
    let (ready, detail) = match &state.mode {
        Mode::Local { .. } => (
            !state.shutdown.is_cancelled(),
            serde_json::json!({ "shutting_down": state.shutdown.is_cancelled() }),
        ),
        Mode::Cluster(node) => node.readiness().await,
    };
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
    if let Mode::Cluster(node) = &state.mode {
        node.sync_metrics();
    }
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
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let authenticated = match &state.mode {
        Mode::Local { auth, .. } => auth.authenticate(&headers).map(|id| (id, None)),
        Mode::Cluster(node) => node.authenticate(&headers).await,
    };
    let Some((identity, expires_at)) = authenticated else {
        state.metrics.ws_auth_failures.inc();
        return unauthorized();
    };
    // The hard cap is above the configured limit so that an oversize frame still arrives
    // and gets an error frame instead of a dropped connection.
    let hard_cap = state.max_frame_bytes.saturating_mul(4).max(1 << 20);
    ws.max_message_size(hard_cap)
        .max_frame_size(hard_cap)
        .on_upgrade(move |socket| ws::connection(socket, state, identity, expires_at))
}

fn unauthorized() -> Response {
    let body = serde_json::json!({
        "error": ErrorObject::new(ErrorCode::Unauthorized, "missing, invalid or expired bearer token")
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
