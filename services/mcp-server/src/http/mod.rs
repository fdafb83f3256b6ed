//! Streamable HTTP: one endpoint (default `/mcp`) taking POST (messages), GET (the
//! server→client stream, resumption) and DELETE (end the session).
//!
//! Handshake revisions get sessions (`Mcp-Session-Id` issued by `initialize`), SSE streams
//! with event ids and a priming event, and resumption with `Last-Event-ID`. Requests of the
//! stateless revision (2026-07-28 in `_meta`) are served without a session, with the
//! header/`_meta` consistency rules of that revision. Every request first passes
//! DNS-rebinding protection and the optional [`HttpAuth`] hook.

mod guard;
mod modern;
mod post;
mod sessions;
mod stream;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use lumina_mcp_proto::version;
use tokio::net::TcpListener;

pub use axum::http::HeaderMap;
pub use guard::{HostPolicy, TRANSPORT_ERROR};

use crate::context::AuthValue;
use crate::dispatch::Core;
use crate::error::{Error, Result};
use crate::handler::Handler;
use guard::{accepts, header_str, refuse, Refusal};
use sessions::{Lookup, Sessions, SESSION_HEADER};

pub(crate) use lumina_mcp_proto::header::PROTOCOL_VERSION as VERSION_HEADER;

/// Why the auth hook refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthRejection {
    /// 401 with `WWW-Authenticate: Bearer`: no or a bad credential.
    Unauthorized,
    /// 403: a valid credential that may not use this endpoint.
    Forbidden,
    /// 503: the credential cannot be checked right now (its authority is unreachable).
    Unavailable,
}

/// Authenticates every HTTP request before the protocol sees it. The value returned is
/// available to the handler as [`RequestContext::auth`](crate::RequestContext::auth).
#[async_trait]
pub trait HttpAuth: Send + Sync + 'static {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Option<AuthValue>, AuthRejection>;
}

/// Endpoint settings; `Default` gives the documented defaults.
#[derive(Clone)]
pub struct HttpOptions {
    /// The MCP endpoint path (`/mcp`).
    pub path: String,
    /// DNS-rebinding protection (`Auto`: loopback names when bound to loopback).
    pub hosts: HostPolicy,
    /// The `retry` (ms) announced in SSE priming events (1 s).
    pub sse_retry: Duration,
    /// Sessions without traffic, requests or open streams for this long end (1 h).
    pub session_idle_timeout: Duration,
    /// Largest accepted POST body (4 MiB).
    pub max_body_bytes: usize,
    /// Optional authentication of every request.
    pub auth: Option<Arc<dyn HttpAuth>>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            path: "/mcp".into(),
            hosts: HostPolicy::Auto,
            sse_retry: Duration::from_secs(1),
            session_idle_timeout: Duration::from_secs(3600),
            max_body_bytes: 4 << 20,
            auth: None,
        }
    }
}

pub(crate) struct Shared {
    pub core: Arc<Core>,
    pub sessions: Sessions,
    pub hosts: HostPolicy,
    pub auth: Option<Arc<dyn HttpAuth>>,
}

/// The endpoint as a router, plus the handle that ends its sessions.
pub struct McpHttp {
    pub router: Router,
    shared: Arc<Shared>,
}

impl McpHttp {
    /// Ends every session and its streams (call before a graceful shutdown).
    pub fn close_sessions(&self) {
        self.shared.sessions.close_all();
    }
}

/// Builds the endpoint. `HostPolicy::Auto` is treated as `Loopback` here; [`serve`] resolves
/// it from the bound address.
pub fn router(handler: Arc<dyn Handler>, options: HttpOptions) -> McpHttp {
    let shared = Arc::new(Shared {
        core: Core::new(handler),
        sessions: Sessions::new(options.session_idle_timeout, options.sse_retry),
        hosts: options.hosts.clone(),
        auth: options.auth.clone(),
    });
    let router = Router::new()
        .route(&options.path, any(endpoint))
        .layer(DefaultBodyLimit::max(options.max_body_bytes))
        .with_state(shared.clone());
    McpHttp { router, shared }
}

/// Serves the endpoint on `listener` until `shutdown` completes; then ends the sessions (so
/// open SSE streams close) and lets requests in flight finish.
pub async fn serve<S>(
    listener: TcpListener,
    handler: Arc<dyn Handler>,
    mut options: HttpOptions,
    shutdown: S,
) -> Result<()>
where
    S: Future<Output = ()> + Send + 'static,
{
    let addr = listener.local_addr()?;
    options.hosts = options.hosts.resolve(addr);
    if options.hosts == HostPolicy::Any && options.auth.is_none() {
        tracing::warn!(%addr, "mcp http endpoint without host checks or authentication");
    }
    tracing::info!(%addr, path = %options.path, "mcp http endpoint listening");
    let mcp = router(handler, options);
    let shared = mcp.shared.clone();
    axum::serve(listener, mcp.router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            shared.sessions.close_all();
        })
        .await
        .map_err(|e| Error::Http(e.to_string()))
}

async fn endpoint(
    State(shared): State<Arc<Shared>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(why) = shared.hosts.check(&headers) {
        tracing::warn!(
            reason = why,
            "mcp http request refused (dns-rebinding protection)"
        );
        return refuse(StatusCode::FORBIDDEN, &format!("Forbidden: {why}"));
    }
    let auth = match &shared.auth {
        None => None,
        Some(hook) => match hook.authenticate(&headers).await {
            Ok(value) => value,
            Err(AuthRejection::Unauthorized) => return unauthorized(),
            Err(AuthRejection::Forbidden) => return refuse(StatusCode::FORBIDDEN, "Forbidden"),
            Err(AuthRejection::Unavailable) => {
                return refuse(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable")
            }
        },
    };
    let modern = header_str(&headers, VERSION_HEADER) == Some(version::STATELESS);
    match method {
        Method::POST => post::handle(&shared, &headers, &body, auth).await,
        // The stateless revision has no GET stream and no sessions.
        Method::GET | Method::DELETE if modern => method_not_allowed(),
        Method::GET => get(&shared, &headers),
        Method::DELETE => delete(&shared, &headers),
        _ => method_not_allowed(),
    }
}

fn unauthorized() -> Response {
    let mut response = refuse(StatusCode::UNAUTHORIZED, "Unauthorized");
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

fn method_not_allowed() -> Response {
    let mut response = refuse(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed");
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
    response
}

/// A handshake-era `MCP-Protocol-Version` header: absent (2025-03-26 assumed) or known.
pub(crate) fn check_version_header(headers: &HeaderMap) -> Result<(), Refusal> {
    match header_str(headers, VERSION_HEADER) {
        None => Ok(()),
        Some(v) if version::is_handshake(v) => Ok(()),
        Some(v) => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            format!("Bad Request: unsupported MCP-Protocol-Version: {v}"),
        )),
    }
}

/// The session a request names, or the response that refuses it.
pub(crate) fn session_of(
    shared: &Shared,
    headers: &HeaderMap,
) -> Result<Arc<sessions::HttpSession>, Refusal> {
    match shared.sessions.lookup(headers) {
        Lookup::Found(session) => Ok(session),
        Lookup::Missing => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "Bad Request: Mcp-Session-Id header is required",
        )),
        Lookup::Unknown => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "Bad Request: unknown session",
        )),
        Lookup::Terminated => Err(Refusal::new(StatusCode::NOT_FOUND, "Session not found")),
    }
}

fn get(shared: &Shared, headers: &HeaderMap) -> Response {
    if let Err(refusal) = check_version_header(headers) {
        return refusal.into_response();
    }
    if !accepts(headers, "text/event-stream") {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: the client must accept text/event-stream",
        );
    }
    let session = match session_of(shared, headers) {
        Ok(session) => session,
        Err(refusal) => return refusal.into_response(),
    };
    let rx = match header_str(headers, "last-event-id") {
        Some(last) => match session.streams.resume(last) {
            Ok(rx) => rx,
            Err(_) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: unknown Last-Event-ID",
                )
            }
        },
        None => session.streams.standalone(),
    };
    sse_response(Some(&session.id), stream::body(rx, None))
}

fn delete(shared: &Shared, headers: &HeaderMap) -> Response {
    match session_of(shared, headers) {
        Ok(session) => {
            shared.sessions.terminate(&session.id);
            StatusCode::OK.into_response()
        }
        Err(refusal) => refusal.into_response(),
    }
}

pub(crate) fn sse_response(session_id: Option<&str>, body: axum::body::Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Some(value) = session_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        headers.insert(SESSION_HEADER, value);
    }
    response
}
