//! POST for the handshake revisions: `initialize` opens a session; other messages need it.
//! Requests that may produce server→client traffic (`tools/call`, or any request with a
//! progress token) are answered on their own SSE stream; the rest with one JSON object.
//! Either way the work runs detached from the HTTP connection: a disconnect is not a
//! cancellation (`notifications/cancelled` is).

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use lumina_mcp_proto::jsonrpc::{code, ErrorObject, Id, Message};
use serde_json::Value;

use super::guard::{accepts, json_response, refuse, rpc_error};
use super::sessions::{HttpSession, SESSION_HEADER};
use super::stream::{self, STANDALONE};
use super::{check_version_header, modern, session_of, sse_response, Shared};
use crate::context::{AuthValue, Outlet};
use crate::stateless::{self, Era};

/// Messages of one request's SSE stream.
struct StreamOutlet {
    session: Arc<HttpSession>,
    stream: u64,
}

impl Outlet for StreamOutlet {
    fn send(&self, message: Message) {
        self.session.streams.push(self.stream, &message);
    }
    fn close_stream(&self) {
        tracing::debug!(
            stream = self.stream,
            "closing the request's sse stream (polling)"
        );
        self.session.streams.disconnect(self.stream);
    }
}

pub(crate) async fn handle(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    body: &Bytes,
    auth: Option<AuthValue>,
) -> Response {
    if !accepts(headers, "application/json") && !accepts(headers, "text/event-stream") {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: the client must accept application/json and text/event-stream",
        );
    }
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(e) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                None,
                ErrorObject::new(code::PARSE_ERROR, format!("Parse error: {e}")),
            )
        }
    };
    let id = value
        .get("id")
        .and_then(|v| serde_json::from_value::<Id>(v.clone()).ok());
    let message = match Message::from_value(value) {
        Ok(message) => message,
        Err(error) => return rpc_error(StatusCode::BAD_REQUEST, id, error),
    };
    let params = match &message {
        Message::Request { params, .. } | Message::Notification { params, .. } => params.as_ref(),
        _ => None,
    };
    let modern_header = super::guard::header_str(headers, super::VERSION_HEADER)
        == Some(lumina_mcp_proto::version::STATELESS);
    if modern_header || !matches!(stateless::era(params), Era::Handshake) {
        return modern::handle(shared, headers, message, auth).await;
    }
    if let Err(refusal) = check_version_header(headers) {
        return refusal.into_response();
    }
    if let Message::Request { id, method, params } = &message {
        if method == "initialize" {
            return initialize(shared, id.clone(), params.clone(), auth).await;
        }
    }
    let session = match session_of(shared, headers) {
        Ok(session) => session,
        Err(refusal) => return refusal.into_response(),
    };
    let core = &shared.core;
    match message {
        Message::Notification { method, params } => {
            core.notification(&session.core, &method, params.as_ref())
                .await;
            StatusCode::ACCEPTED.into_response()
        }
        Message::Response { id, result } => {
            core.response(&session.core, &id, Ok(result));
            StatusCode::ACCEPTED.into_response()
        }
        Message::Error {
            id: Some(id),
            error,
        } => {
            core.response(&session.core, &id, Err(error));
            StatusCode::ACCEPTED.into_response()
        }
        Message::Error { id: None, error } => {
            tracing::warn!(%error, "the client reported an error without an id");
            StatusCode::ACCEPTED.into_response()
        }
        Message::Request { id, method, params } => {
            session.core.begin(&id);
            let streamed = accepts(headers, "text/event-stream")
                && (method == "tools/call" || has_progress_token(params.as_ref()));
            if streamed {
                request_on_stream(shared, session, id, method, params, auth)
            } else {
                request_as_json(shared, session, id, method, params, auth).await
            }
        }
    }
}

async fn initialize(
    shared: &Arc<Shared>,
    id: Id,
    params: Option<Value>,
    auth: Option<AuthValue>,
) -> Response {
    let session = shared.sessions.create();
    let outlet: Arc<dyn Outlet> = Arc::new(StreamOutlet {
        session: session.clone(),
        stream: STANDALONE,
    });
    let reply = shared
        .core
        .request(&session.core, id, "initialize", params, outlet, auth)
        .await;
    let Some(reply) = reply else {
        shared.sessions.terminate(&session.id);
        return StatusCode::NO_CONTENT.into_response();
    };
    if matches!(reply, Message::Error { .. }) {
        shared.sessions.terminate(&session.id);
        return json_response(StatusCode::OK, &reply);
    }
    let mut response = json_response(StatusCode::OK, &reply);
    if let Ok(value) = HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

fn request_on_stream(
    shared: &Arc<Shared>,
    session: Arc<HttpSession>,
    id: Id,
    method: String,
    params: Option<Value>,
    auth: Option<AuthValue>,
) -> Response {
    let (stream_id, rx) = session.streams.open();
    let outlet: Arc<dyn Outlet> = Arc::new(StreamOutlet {
        session: session.clone(),
        stream: stream_id,
    });
    let core = shared.core.clone();
    let task_session = session.clone();
    tokio::spawn(async move {
        let reply = core
            .request(&task_session.core, id, &method, params, outlet, auth)
            .await;
        task_session.streams.finish(stream_id, reply.as_ref());
    });
    sse_response(Some(&session.id), stream::body(rx, None))
}

async fn request_as_json(
    shared: &Arc<Shared>,
    session: Arc<HttpSession>,
    id: Id,
    method: String,
    params: Option<Value>,
    auth: Option<AuthValue>,
) -> Response {
    // Side messages of a JSON-answered request go to the standalone GET stream.
    let outlet: Arc<dyn Outlet> = Arc::new(StreamOutlet {
        session: session.clone(),
        stream: STANDALONE,
    });
    let core = shared.core.clone();
    let task_session = session.clone();
    let work = tokio::spawn(async move {
        core.request(&task_session.core, id, &method, params, outlet, auth)
            .await
    });
    let mut response = match work.await {
        Ok(Some(reply)) => json_response(StatusCode::OK, &reply),
        // Cancelled by the client: nobody waits for an answer.
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => {
            tracing::error!(error = %e, "mcp request task failed");
            refuse(StatusCode::INTERNAL_SERVER_ERROR, "Internal error")
        }
    };
    if let Ok(value) = HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

fn has_progress_token(params: Option<&Value>) -> bool {
    stateless::meta(params).is_some_and(|meta| meta.contains_key("progressToken"))
}
