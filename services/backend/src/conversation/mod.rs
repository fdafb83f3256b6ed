//! The Conversation API (docs/conversation-api.md): REST + SSE for web clients over the same
//! sessions, the same authentication and the same session operations as the WebSocket — every
//! call goes through the [`Profile`](crate::profile::Profile), so in the cluster mutations
//! reach the session's owner exactly as the gateway routes WebSocket calls and reads come
//! from PostgreSQL on any instance.
//!
//! - `conversations.rs`: create, list, messages, archive;
//! - `execute.rs`: execute (async, sync, SSE) and the conversation stream;
//! - `replay.rs`: journal events and deltas → SSE events with journal-derived ids;
//! - `window.rs`: messages and the hot window;
//! - `error.rs`: the error body and the one code → status mapping;
//! - `openapi.rs`: `GET /api/v1/openapi.json`, generated from the types.

pub mod conversations;
pub mod error;
pub mod execute;
pub mod openapi;
pub mod replay;
pub mod types;
pub mod window;

use std::sync::Arc;

use axum::http::HeaderMap;
use axum::routing::{delete, get, post};
use axum::Router;
use lumina_protocol::methods::Identity;
use lumina_protocol::{ErrorCode, Method, Scope};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::profile::AppState;
use error::ApiError;

/// The API's routes, under `/api/v1`.
pub fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/api/v1/conversations",
            post(conversations::create).get(conversations::list),
        )
        .route("/api/v1/conversations/{id}", delete(conversations::archive))
        .route(
            "/api/v1/conversations/{id}/messages",
            get(conversations::messages),
        )
        .route("/api/v1/conversations/{id}/stream", get(execute::resume))
        .route("/api/v1/agents/{agent}/execute", post(execute::execute))
        .route("/api/v1/agents/{agent}/execute/sync", post(execute::sync))
        .route(
            "/api/v1/agents/{agent}/execute/stream",
            post(execute::stream),
        )
        .route("/api/v1/openapi.json", get(openapi::document))
}

/// The caller of a request: its bearer token's identity, which must grant `scope`.
pub async fn caller(
    state: &AppState,
    headers: &HeaderMap,
    scope: Scope,
) -> Result<Identity, ApiError> {
    let Some((identity, _expires_at)) = state.profile.authenticate(headers).await else {
        state.metrics.ws_auth_failures.inc();
        return Err(ApiError::unauthorized());
    };
    if !scope.granted_by(&identity.scopes) {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!("this token lacks the `{}` scope", scope.as_str()),
        ));
    }
    Ok(identity)
}

/// Runs a session method through the profile, as the WebSocket dispatcher does.
pub async fn session_call<P: Serialize, R: DeserializeOwned>(
    state: &AppState,
    identity: &Identity,
    method: Method,
    params: &P,
) -> Result<R, ApiError> {
    let params = serde_json::to_value(params)
        .map_err(|e| ApiError::internal(format!("encoding params: {e}")))?;
    let value = state.profile.call(identity, method, params).await?;
    serde_json::from_value(value)
        .map_err(|e| ApiError::internal(format!("decoding the result of `{method}`: {e}")))
}

/// A conversation id from a path: a session UUID (anything else names no conversation).
pub fn conversation_id(id: &str) -> Result<String, ApiError> {
    uuid::Uuid::parse_str(id)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| ApiError::not_found(format!("no conversation `{}`", clip(id))))
}

fn clip(text: &str) -> String {
    text.chars().take(64).collect()
}
