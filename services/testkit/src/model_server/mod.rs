//! A scripted stand-in for the model APIs: Anthropic Messages and OpenAI-compatible Chat
//! Completions streaming, answering from a FIFO script of [`Turn`]s.
//!
//! The model API is the one dependency Lumina's tests replace (CONTRIBUTING.md#tests), so
//! the transcripts are byte-exact copies of the vendors' formats, including the awkward
//! parts (pings, empty first `input_json_delta`, interleaved tool-call fragments, a usage
//! chunk with empty `choices`).

mod render;
mod turn;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use turn::{HttpError, ScriptedToolCall, ScriptedUsage, Turn};

/// Which wire format a request used (decided by its path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptedApi {
    Anthropic,
    OpenAi,
}

/// One request as the server saw it. Auth header values are never stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedRequest {
    pub path: String,
    pub api: ScriptedApi,
    /// Lower-case header names → values, without `x-api-key` and `authorization`.
    pub headers: BTreeMap<String, String>,
    /// `Some("x-api-key")` or `Some("authorization")` when a credential was sent.
    pub auth_header: Option<String>,
    /// The parsed JSON body (`Value::String(raw)` if it was not JSON).
    pub body: Value,
}

#[derive(Debug)]
struct Inner {
    script: VecDeque<Turn>,
    default_turn: Turn,
    requests: Vec<RecordedRequest>,
}

#[derive(Debug)]
struct Shared {
    inner: Mutex<Inner>,
    /// Ends stalled streams when the server shuts down, so graceful shutdown completes.
    shutdown: CancellationToken,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test thread must not take every later assertion down with it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An in-process scripted model server on `127.0.0.1`. Shuts down when dropped.
#[derive(Debug)]
pub struct ScriptedModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

impl ScriptedModelServer {
    /// Bind `127.0.0.1:0` and serve on the current tokio runtime.
    pub fn start(turns: Vec<Turn>) -> anyhow::Result<Self> {
        Self::start_on_port(0, turns)
    }

    /// Like [`ScriptedModelServer::start`] on a chosen port (0 = any free port).
    pub fn start_on_port(port: u16, turns: Vec<Turn>) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Handle::try_current()
            .context("ScriptedModelServer must be started inside a tokio runtime")?;
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", port))
            .with_context(|| format!("binding 127.0.0.1:{port}"))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(std_listener)?
        };
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                script: turns.into(),
                default_turn: Turn::text("ok"),
                requests: Vec::new(),
            }),
            shutdown: CancellationToken::new(),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let stop = shared.shutdown.clone();
        let task = runtime.spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "scripted model server stopped");
            }
        });
        Ok(Self {
            addr,
            shared,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT`, usable as an `api_base_url` for either API type.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Append a turn to the script.
    pub fn push(&self, turn: Turn) {
        self.shared.lock().script.push_back(turn);
    }

    /// The answer used when the script is empty (initially `Turn::text("ok")`).
    pub fn set_default_turn(&self, turn: Turn) {
        self.shared.lock().default_turn = turn;
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    pub fn request_count(&self) -> usize {
        self.shared.lock().requests.len()
    }

    /// Scripted turns not yet consumed.
    pub fn remaining_turns(&self) -> usize {
        self.shared.lock().script.len()
    }

    /// Stop serving and wait until the server task has finished.
    pub async fn shutdown(mut self) {
        self.shared.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ScriptedModelServer {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

/// Prefer a turn whose `match_contains` matches, then the first unconditional turn, then
/// the default turn.
fn select_turn(inner: &mut Inner, raw_body: &str) -> Turn {
    let matched = inner.script.iter().position(|t| {
        t.match_contains
            .as_deref()
            .is_some_and(|needle| raw_body.contains(needle))
    });
    let pos = matched.or_else(|| inner.script.iter().position(|t| t.match_contains.is_none()));
    pos.and_then(|p| inner.script.remove(p))
        .unwrap_or_else(|| inner.default_turn.clone())
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    // Suffix matching accepts `/v1/messages`, `/messages` and a doubled `/v1/v1/messages`.
    let api = if path.ends_with("/messages") {
        ScriptedApi::Anthropic
    } else if path.ends_with("/chat/completions") {
        ScriptedApi::OpenAi
    } else {
        return (
            StatusCode::NOT_FOUND,
            format!("no scripted route for {path}"),
        )
            .into_response();
    };
    if method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let raw = String::from_utf8_lossy(&body).into_owned();
    let json: Value = serde_json::from_str(&raw).unwrap_or_else(|_| Value::String(raw.clone()));
    let mut recorded_headers = BTreeMap::new();
    let mut auth_header = None;
    for (name, value) in &headers {
        let name = name.as_str().to_ascii_lowercase();
        if name == "x-api-key" || name == "authorization" {
            auth_header = Some(name);
        } else {
            recorded_headers.insert(name, String::from_utf8_lossy(value.as_bytes()).into_owned());
        }
    }
    let (turn, request_no) = {
        let mut inner = shared.lock();
        inner.requests.push(RecordedRequest {
            path: path.clone(),
            api,
            headers: recorded_headers,
            auth_header,
            body: json.clone(),
        });
        let n = inner.requests.len();
        (select_turn(&mut inner, &raw), n)
    };
    tracing::debug!(path = %path, request_no, "scripted model request");
    if let Some(err) = &turn.http_error {
        return error_response(api, err, request_no);
    }
    let model = json
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted-model");
    let include_usage = json
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let ctx = render::Ctx {
        request_no,
        model,
        request_bytes: body.len(),
        include_usage,
    };
    let events = match api {
        ScriptedApi::Anthropic => render::anthropic(&turn, &ctx),
        ScriptedApi::OpenAi => render::openai(&turn, &ctx),
    };
    let body = stream_body(events, &turn, shared.shutdown.clone());
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    insert_request_id(h, api, request_no);
    resp
}

fn insert_request_id(h: &mut HeaderMap, api: ScriptedApi, request_no: usize) {
    let name = match api {
        ScriptedApi::Anthropic => "request-id",
        ScriptedApi::OpenAi => "x-request-id",
    };
    if let Ok(v) = HeaderValue::from_str(&format!("req_scripted_{request_no}")) {
        h.insert(name, v);
    }
}

fn error_response(api: ScriptedApi, err: &HttpError, request_no: usize) -> Response {
    let status = StatusCode::from_u16(err.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = err.body.clone().unwrap_or_else(|| match api {
        ScriptedApi::Anthropic => render::anthropic_error_body(err.status),
        ScriptedApi::OpenAi => render::openai_error_body(err.status),
    });
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    insert_request_id(h, api, request_no);
    let mut extra: Vec<(String, String)> = err.headers.clone().into_iter().collect();
    if let Some(s) = err.retry_after_secs {
        extra.push(("retry-after".into(), s.to_string()));
    }
    if let Some(ms) = err.retry_after_ms {
        extra.push(("retry-after-ms".into(), ms.to_string()));
    }
    for (k, v) in extra {
        if let (Ok(k), Ok(v)) = (HeaderName::try_from(k), HeaderValue::try_from(v)) {
            h.insert(k, v);
        }
    }
    resp
}

/// Feed the events through a channel so delays, stalls and disconnects happen on the wire.
fn stream_body(events: Vec<String>, turn: &Turn, shutdown: CancellationToken) -> Body {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let delay = Duration::from_millis(turn.chunk_delay_ms);
    let stall_after = turn.stall_after_chunks;
    let disconnect_after = turn.disconnect_after_chunks;
    tokio::spawn(async move {
        for (i, ev) in events.into_iter().enumerate() {
            if stall_after == Some(i) || disconnect_after == Some(i) {
                break;
            }
            if i > 0 && !delay.is_zero() {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            if tx.send(Ok(Bytes::from(ev))).await.is_err() {
                return; // the client went away
            }
        }
        if stall_after.is_some() {
            // Silent but open until the client gives up or the server stops.
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = tx.closed() => {}
            }
        } else if disconnect_after.is_some() {
            // Let hyper flush the events already sent (it writes while the body is pending),
            // then a body error makes it abort the connection without the terminating chunk.
            tokio::time::sleep(delay.max(Duration::from_millis(20))).await;
            let cut =
                std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "scripted disconnect");
            let _ = tx.send(Err(cut)).await;
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Body::from_stream(stream)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
