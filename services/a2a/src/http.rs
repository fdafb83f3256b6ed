//! The HTTP surface: `GET /.well-known/agent-card.json` (public) and JSON-RPC 2.0 at the
//! card's URL (both with and without a trailing `/`). Order of checks on a call:
//! credentials (401 / 403), `Content-Type` (-32005), body size (-32600, HTTP 413),
//! JSON-RPC envelope (-32700 / -32600), `A2A-Version` (-32009), method (-32601), params
//! (-32602). Streaming methods answer `text/event-stream`, one JSON-RPC response per event;
//! an error before the stream opens is a plain JSON-RPC error.

use std::convert::Infallible;
use std::sync::Arc;

use async_trait::async_trait;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::StreamExt;
use serde_json::Value;

use crate::error::Error;
use crate::jsonrpc::{self, Id, Method, Version};
use crate::params::Params;
use crate::service::A2aService;
use crate::types::StreamResponse;

pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// Largest JSON-RPC request body.
pub const MAX_BODY: usize = 10 * 1024 * 1024;
/// `Cache-Control` of the card.
const CARD_MAX_AGE: &str = "public, max-age=300";

/// Who is calling, as the authenticator saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Tasks are scoped to this key (tenant and subject).
    pub owner: String,
    pub can_read: bool,
    pub can_write: bool,
    /// What the authenticator knows about the caller, for the executor (the backend puts
    /// its `Identity` here). Never logged.
    pub identity: serde_json::Value,
}

/// Why a call has no principal: 401.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("authentication required")]
pub struct Unauthenticated;

/// Turns request headers into a principal (the backend: its WebSocket bearer rules).
#[async_trait]
pub trait Authenticator: Send + Sync + 'static {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Unauthenticated>;
}

/// Everyone is one principal with every right: the TCK fixture and tests only.
pub struct OpenAccess;

#[async_trait]
impl Authenticator for OpenAccess {
    async fn authenticate(&self, _headers: &HeaderMap) -> Result<Principal, Unauthenticated> {
        Ok(Principal {
            owner: "anonymous".into(),
            can_read: true,
            can_write: true,
            identity: serde_json::Value::Null,
        })
    }
}

#[derive(Clone)]
struct HttpState {
    service: A2aService,
    auth: Arc<dyn Authenticator>,
}

/// The card route and the JSON-RPC endpoint at `rpc_path` (e.g. `/` or `/a2a`).
pub fn router(service: A2aService, auth: Arc<dyn Authenticator>, rpc_path: &str) -> Router {
    let state = HttpState { service, auth };
    let trimmed = rpc_path.trim_end_matches('/');
    let mut router = Router::new().route(CARD_PATH, get(card));
    if trimmed.is_empty() {
        router = router.route("/", post(rpc));
    } else {
        router = router
            .route(trimmed, post(rpc))
            .route(&format!("{trimmed}/"), post(rpc));
    }
    router.with_state(state)
}

async fn card(State(state): State<HttpState>, headers: HeaderMap) -> Response {
    let doc = state.service.card();
    let mut response = if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| {
            tags.split(',')
                .any(|t| t.trim() == doc.etag || t.trim() == "*")
        }) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, doc.body.clone()).into_response()
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(CARD_MAX_AGE),
    );
    if let Ok(v) = HeaderValue::from_str(&doc.etag) {
        h.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(&doc.last_modified) {
        h.insert(header::LAST_MODIFIED, v);
    }
    response
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        bytes,
    )
        .into_response()
}

fn error_response(status: StatusCode, id: &Id, error: &Error, version: Version) -> Response {
    if matches!(error, Error::Internal(_) | Error::Store(_)) {
        tracing::error!(error = %error, "a2a call failed");
    }
    json_response(status, &jsonrpc::failure(id, error, version))
}

/// The version the `A2A-Version` header asks for.
fn header_version(headers: &HeaderMap) -> Result<Version, Error> {
    let Some(raw) = headers.get("a2a-version") else {
        return Ok(Version::V03);
    };
    let text = raw.to_str().unwrap_or("?").trim();
    match text {
        "" => Ok(Version::V03),
        "1.0" | "1" => Ok(Version::V1),
        "0.3" | "0.3.0" => Ok(Version::V03),
        other => Err(Error::VersionNotSupported(format!(
            "A2A-Version {other} (supported: 1.0, 0.3)"
        ))),
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| v == "application/json" || v == "application/a2a+json")
}

async fn rpc(State(state): State<HttpState>, headers: HeaderMap, body: Body) -> Response {
    let principal = match state.auth.authenticate(&headers).await {
        Ok(p) => p,
        Err(Unauthenticated) => {
            let mut response = json_response(
                StatusCode::UNAUTHORIZED,
                &serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "authentication required"}}),
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    };
    // Errors before the version is known are shaped as v1.0 (they carry ErrorInfo).
    let early = header_version(&headers).unwrap_or(Version::V1);
    if !is_json(&headers) {
        let error = Error::ContentTypeNotSupported(
            "a JSON-RPC request is Content-Type: application/json".into(),
        );
        return error_response(StatusCode::OK, &Id::Null, &error, early);
    }
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            let error = Error::InvalidRequest(format!("the body exceeds {MAX_BODY} bytes"));
            return error_response(StatusCode::PAYLOAD_TOO_LARGE, &Id::Null, &error, early);
        }
    };
    let request = match jsonrpc::parse_request(&bytes) {
        Ok(r) => r,
        Err((id, error)) => return error_response(StatusCode::OK, &id, &error, early),
    };
    let header = match header_version(&headers) {
        Ok(v) => v,
        Err(error) => return error_response(StatusCode::OK, &request.id, &error, Version::V1),
    };
    let Some((method, version)) = Method::resolve(&request.method, header) else {
        let error = Error::MethodNotFound(request.method.clone());
        return error_response(StatusCode::OK, &request.id, &error, header);
    };
    let allowed = if method.is_write() {
        principal.can_write
    } else {
        principal.can_read
    };
    if !allowed {
        let error = Error::InvalidRequest("the credentials lack the scope for this method".into());
        return error_response(StatusCode::FORBIDDEN, &request.id, &error, version);
    }
    let id = request.id;
    let params = match Params::decode(method, version, request.params) {
        Ok(p) => p,
        Err(error) => return error_response(StatusCode::OK, &id, &error, version),
    };
    if method.is_streaming() {
        return match stream(&state.service, &principal, params).await {
            Ok(events) => sse(id, method, version, events),
            Err(error) => error_response(StatusCode::OK, &id, &error, version),
        };
    }
    match call(&state.service, &principal, params).await {
        Ok(result) => {
            let result = match version {
                Version::V03 => crate::v03::result_out(method, result),
                Version::V1 => result,
            };
            json_response(StatusCode::OK, &jsonrpc::success(&id, result))
        }
        Err(error) => error_response(StatusCode::OK, &id, &error, version),
    }
}

fn to_value<T: serde::Serialize>(value: &T) -> Result<Value, Error> {
    serde_json::to_value(value).map_err(|e| Error::Internal(format!("encode: {e}")))
}

async fn call(service: &A2aService, owner: &Principal, params: Params) -> Result<Value, Error> {
    match params {
        Params::SendMessage(p) => to_value(&service.send(owner, p).await?),
        Params::GetTask(p) => to_value(&service.get_task(owner, p).await?),
        Params::ListTasks(p) => to_value(&service.list_tasks(owner, p).await?),
        Params::CancelTask(p) => to_value(&service.cancel(owner, p).await?),
        Params::CreatePushConfig(p) => to_value(&service.create_push_config(owner, p).await?),
        Params::GetPushConfig(p) => to_value(&service.get_push_config(owner, p).await?),
        Params::ListPushConfigs(p) => to_value(&service.list_push_configs(owner, p).await?),
        Params::DeletePushConfig(p) => {
            service.delete_push_config(owner, p).await?;
            Ok(serde_json::json!({}))
        }
        Params::GetExtendedAgentCard => to_value(&service.extended_card()?.card),
        Params::SendStreamingMessage(_) | Params::SubscribeToTask(_) => Err(Error::Internal(
            "a streaming method reached the unary path".into(),
        )),
    }
}

async fn stream(
    service: &A2aService,
    owner: &Principal,
    params: Params,
) -> Result<crate::service::EventStream, Error> {
    if !service.card().card.capabilities.streaming {
        return Err(Error::UnsupportedOperation(
            "streaming is not enabled".into(),
        ));
    }
    match params {
        Params::SendStreamingMessage(p) => service.send_stream(owner, p).await,
        Params::SubscribeToTask(p) => service.subscribe(owner, p).await,
        _ => Err(Error::Internal(
            "a unary method reached the stream path".into(),
        )),
    }
}

fn sse(id: Id, method: Method, version: Version, events: crate::service::EventStream) -> Response {
    let frames = events.map(move |event: StreamResponse| {
        let result = serde_json::to_value(&event).unwrap_or(Value::Null);
        let result = match version {
            Version::V03 => crate::v03::result_out(method, result),
            Version::V1 => result,
        };
        let data = serde_json::to_string(&jsonrpc::success(&id, result)).unwrap_or_default();
        Ok::<_, Infallible>(Event::default().data(data))
    });
    Sse::new(frames)
        .keep_alive(KeepAlive::default())
        .into_response()
}
