//! POST for the stateless revision (2026-07-28): no session; the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers must agree with the body (else 400 + -32020); an
//! unsupported revision is 400 + -32022; an unknown method is 404 + -32601. Requests that
//! asked for progress or logs get a request-scoped SSE stream (no ids, not resumable) whose
//! closing cancels the request; the rest get one JSON object.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use lumina_mcp_proto::jsonrpc::{code, ErrorObject, Message};
use lumina_mcp_proto::version;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::guard::{accepts, header_str, json_response, refuse, rpc_error};
use super::stream::{self, plain_event};
use super::{sse_response, Shared, VERSION_HEADER};
use crate::context::{AuthValue, Outlet};
use crate::session::Session;
use crate::stateless::{self, META_LOG_LEVEL};

/// A request-scoped SSE stream; closed explicitly once the response is out.
struct ChannelOutlet(Mutex<Option<mpsc::UnboundedSender<Bytes>>>);

impl ChannelOutlet {
    fn close(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

impl Outlet for ChannelOutlet {
    fn send(&self, message: Message) {
        if let Some(tx) = self.0.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            let _ = tx.send(plain_event(&message));
        }
    }
}

pub(crate) async fn handle(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    message: Message,
    auth: Option<AuthValue>,
) -> Response {
    let (id, method, params) = match message {
        Message::Request { id, method, params } => (id, method, params),
        // The revision defines no client notifications over HTTP; accept and ignore them.
        Message::Notification { .. } => return StatusCode::ACCEPTED.into_response(),
        _ => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "Bad Request: clients do not send responses in protocol revision 2026-07-28",
            )
        }
    };
    if let Err(error) = validate_headers(headers, &method, params.as_ref()) {
        return rpc_error(StatusCode::BAD_REQUEST, Some(id), error);
    }
    let requested = stateless::requested_version(params.as_ref()).unwrap_or_default();
    if requested != version::STATELESS {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Some(id),
            stateless::unsupported_version(requested),
        );
    }
    if !shared.core.knows(&method, true) {
        return rpc_error(
            StatusCode::NOT_FOUND,
            Some(id),
            crate::dispatch::method_not_found(&method),
        );
    }
    let wants_stream = stateless::meta(params.as_ref()).is_some_and(|meta| {
        meta.contains_key("progressToken") || meta.contains_key(META_LOG_LEVEL)
    });
    let session = Arc::new(Session::new());
    if !(wants_stream && accepts(headers, "text/event-stream")) {
        let outlet: Arc<dyn Outlet> = Arc::new(ChannelOutlet(Mutex::new(None)));
        // Served inline: a client that disconnects drops (cancels) the work.
        let reply = shared
            .core
            .request(&session, id, &method, params, outlet, auth)
            .await;
        return match reply {
            Some(reply) => json_response(status_of(&reply), &reply),
            None => StatusCode::NO_CONTENT.into_response(),
        };
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let outlet = Arc::new(ChannelOutlet(Mutex::new(Some(tx))));
    let closed = CancellationToken::new();
    let core = shared.core.clone();
    let watcher = closed.clone();
    tokio::spawn(async move {
        let work = core.request(&session, id, &method, params, outlet.clone(), auth);
        tokio::pin!(work);
        let reply = tokio::select! {
            reply = &mut work => reply,
            _ = watcher.cancelled() => {
                // Closing the stream is the cancellation of this revision.
                session.close();
                work.await
            }
        };
        if let Some(reply) = reply {
            outlet.send(reply);
        }
        outlet.close();
    });
    sse_response(None, stream::body(rx, Some(closed.drop_guard())))
}

/// The HTTP status that goes with a JSON-RPC answer of this revision.
fn status_of(reply: &Message) -> StatusCode {
    match reply {
        Message::Error { error, .. } => match error.code {
            code::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            code::HEADER_MISMATCH
            | code::UNSUPPORTED_PROTOCOL_VERSION
            | code::MISSING_CLIENT_CAPABILITY => StatusCode::BAD_REQUEST,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    }
}

fn mismatch(message: String) -> ErrorObject {
    ErrorObject::new(code::HEADER_MISMATCH, format!("Header mismatch: {message}"))
}

/// The mirrored headers must be present and equal the body's values.
fn validate_headers(
    headers: &HeaderMap,
    method: &str,
    params: Option<&Value>,
) -> Result<(), ErrorObject> {
    let body_version = stateless::requested_version(params);
    match (header_str(headers, VERSION_HEADER), body_version) {
        (Some(h), Some(b)) if h == b => {}
        (h, b) => {
            return Err(mismatch(format!(
                "MCP-Protocol-Version header {h:?} does not match _meta protocolVersion {b:?}"
            )))
        }
    }
    match header_str(headers, "mcp-method") {
        Some(h) if h == method => {}
        Some(h) => {
            return Err(mismatch(format!(
                "Mcp-Method header '{h}' does not match body method '{method}'"
            )))
        }
        None => return Err(mismatch("the Mcp-Method header is missing".into())),
    }
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return Ok(()),
    };
    let body_name = params.and_then(|p| p.get(field)).and_then(Value::as_str);
    let header_name = match header_str(headers, "mcp-name") {
        None => return Err(mismatch("the Mcp-Name header is missing".into())),
        Some(raw) => decode_header_value(raw)
            .ok_or_else(|| mismatch("the Mcp-Name header is malformed".into()))?,
    };
    if body_name != Some(header_name.as_str()) {
        return Err(mismatch(format!(
            "Mcp-Name header value '{header_name}' does not match body value {body_name:?}"
        )));
    }
    Ok(())
}

/// A header value, decoding the `=?base64?…?=` sentinel form.
fn decode_header_value(raw: &str) -> Option<String> {
    match raw
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(raw.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_sentinel_values() {
        assert_eq!(decode_header_value("plain").as_deref(), Some("plain"));
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=").as_deref(),
            Some("Hello, 世界")
        );
        assert_eq!(decode_header_value("=?base64?***?="), None);
    }
}
