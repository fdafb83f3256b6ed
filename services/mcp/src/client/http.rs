//! Streamable HTTP transport (2025-03-26 … 2025-11-25, and stateless 2026-07-28).
//!
//! Every message is one POST. A request's answer comes back as JSON or as an SSE stream
//! that may carry server requests and notifications first. When such a stream (or the GET
//! stream) ends before the answer, the client resumes with GET + `Last-Event-ID` after
//! exactly the server's `retry` delay. Session ids are echoed; 404 on a session means it
//! expired. The stateless revision drops sessions and the GET stream and adds the
//! `Mcp-Method`/`Mcp-Name` headers. With an [`OAuth`], every request carries its bearer
//! token, and a `401` / `403 insufficient_scope` is retried once it has a better one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use url::Url;

use super::auth::{self, OAuth};
use super::headers::{header_map, stateless_headers};
use super::sse_body::{is_event_stream, is_message_event, SseBody};
use super::transport::{Inbound, InboundTx, Negotiated, Transport, TransportKind};
use crate::jsonrpc::{Id, Message};
use crate::Error;

/// The reconnection delay when the server never sent `retry:`.
const DEFAULT_RETRY_MS: u64 = 1000;
/// Resumption attempts for one request before it fails.
const MAX_RESUMES: u32 = 5;
/// Consecutive GET-stream connections without any event before the client stops reopening it.
const MAX_IDLE_RECONNECTS: u32 = 3;
/// How long `start_listening` waits for the GET stream's response headers.
const LISTEN_READY: Duration = Duration::from_secs(2);
/// Bytes of an error body read to find a JSON-RPC error in it.
const ERROR_BODY_CAP: usize = 64 * 1024;

use lumina_mcp_proto::header::{PROTOCOL_VERSION, SESSION_ID};

pub struct StreamableHttp {
    shared: Arc<Shared>,
}

struct Shared {
    client: reqwest::Client,
    url: Url,
    /// Configured headers (expanded: may hold secrets, never logged).
    headers: HeaderMap,
    inbound: InboundTx,
    state: Mutex<State>,
    shutdown: CancellationToken,
    listener: Mutex<Option<JoinHandle<()>>>,
    label: String,
    auth: Option<Arc<OAuth>>,
}

#[derive(Debug, Default)]
struct State {
    session_id: Option<String>,
    negotiated: Negotiated,
    retry_ms: Option<u64>,
}

/// How a pumped stream ended.
enum Pumped {
    Answered,
    Ended { events: usize },
}

impl StreamableHttp {
    pub fn new(
        client: reqwest::Client,
        url: Url,
        headers: &[(String, String)],
        inbound: InboundTx,
        label: String,
        auth: Option<Arc<OAuth>>,
    ) -> Result<Self, Error> {
        Ok(Self {
            shared: Arc::new(Shared {
                client,
                url,
                headers: header_map(headers)?,
                inbound,
                state: Mutex::new(State::default()),
                shutdown: CancellationToken::new(),
                listener: Mutex::new(None),
                label,
                auth,
            }),
        })
    }
}

impl Drop for StreamableHttp {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

#[async_trait]
impl Transport for StreamableHttp {
    fn kind(&self) -> TransportKind {
        TransportKind::Http
    }

    async fn send(&self, msg: &Message) -> Result<(), Error> {
        self.shared.post(msg).await
    }

    fn auth_time(&self) -> Duration {
        self.shared
            .auth
            .as_ref()
            .map(|a| a.busy_time())
            .unwrap_or_default()
    }

    fn set_negotiated(&self, negotiated: &Negotiated) {
        if let Ok(mut st) = self.shared.state.lock() {
            st.negotiated = negotiated.clone();
            if negotiated.stateless {
                st.session_id = None;
            }
        }
    }

    async fn start_listening(&self) {
        if self.shared.lock_state(|s| s.negotiated.stateless) {
            return;
        }
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(self.shared.clone().listen(ready_tx));
        if let Ok(mut l) = self.shared.listener.lock() {
            *l = Some(task);
        }
        // Wait for the stream to be established so that it exists before later requests.
        let _ = tokio::time::timeout(LISTEN_READY, ready_rx).await;
    }

    async fn close(&self) {
        self.shared.shutdown.cancel();
        let task = self.shared.listener.lock().ok().and_then(|mut l| l.take());
        if let Some(task) = task {
            task.abort();
        }
        let session = self.shared.lock_state(|s| s.session_id.take());
        if let Some(id) = session {
            let req = self
                .shared
                .request(reqwest::Method::DELETE)
                .header(SESSION_ID, id);
            let (req, _) = auth::with_bearer(self.shared.auth.as_ref(), req).await;
            match tokio::time::timeout(Duration::from_secs(5), req.send()).await {
                Ok(Ok(resp)) => tracing::debug!(
                    server = %self.shared.label, status = resp.status().as_u16(),
                    "mcp session deleted"
                ),
                Ok(Err(e)) => tracing::debug!(
                    server = %self.shared.label, error = %Error::http(e), "mcp session delete failed"
                ),
                Err(_) => {
                    tracing::debug!(server = %self.shared.label, "mcp session delete timed out")
                }
            }
        }
    }
}

impl Shared {
    fn lock_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// A request with the configured headers, the protocol version and the session id.
    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let (version, session) = self.lock_state(|s| {
            (
                s.negotiated.protocol_version.clone(),
                s.session_id.clone().filter(|_| !s.negotiated.stateless),
            )
        });
        let mut req = self
            .client
            .request(method, self.url.clone())
            .headers(self.headers.clone());
        if let Some(v) = version {
            req = req.header(PROTOCOL_VERSION, v);
        }
        if let Some(id) = session {
            req = req.header(SESSION_ID, id);
        }
        req
    }

    async fn post(&self, msg: &Message) -> Result<(), Error> {
        let stateless = self.lock_state(|s| s.negotiated.stateless);
        let body = msg.to_line();
        let build = || {
            let mut req = self
                .request(reqwest::Method::POST)
                .header(ACCEPT, "application/json, text/event-stream")
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
            if stateless {
                for (name, value) in stateless_headers(msg) {
                    req = req.header(name, value);
                }
            }
            req
        };
        let had_session = self.lock_state(|s| s.session_id.is_some());
        let resp = auth::send(self.auth.as_ref(), build).await?;
        let status = resp.status();
        if !stateless && msg.method() == Some("initialize") && status.is_success() {
            let sid = resp
                .headers()
                .get(SESSION_ID)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            self.lock_state(|s| s.session_id = sid);
        }
        if status == reqwest::StatusCode::NOT_FOUND && had_session {
            return Err(Error::SessionExpired);
        }
        if !status.is_success() {
            return Err(status_error(resp).await);
        }
        let Message::Request { id, .. } = msg else {
            return Ok(()); // 202 for notifications and responses; any body is ignored
        };
        if is_event_stream(&resp) {
            return self.answer_stream(resp, id).await;
        }
        let body = resp.bytes().await.map_err(Error::http)?;
        let reply = Message::parse(&String::from_utf8_lossy(&body))
            .map_err(|e| Error::Protocol(format!("the reply to a request is not JSON-RPC: {e}")))?;
        self.deliver(reply).await;
        Ok(())
    }

    /// Reads a POST's SSE stream until the answer to `id`, resuming it when it ends early.
    async fn answer_stream(&self, resp: reqwest::Response, id: &Id) -> Result<(), Error> {
        let mut last_event_id = None;
        let mut pumped = self.pump(resp, Some(id), &mut last_event_id).await;
        let mut resumes = 0;
        while let Pumped::Ended { .. } = pumped {
            let Some(last) = last_event_id.clone() else {
                return Err(Error::Protocol(
                    "the server closed the response stream before answering (and gave no \
                     event id to resume from)"
                        .into(),
                ));
            };
            resumes += 1;
            if resumes > MAX_RESUMES {
                return Err(Error::Protocol(format!(
                    "no answer after resuming the response stream {MAX_RESUMES} times"
                )));
            }
            tokio::time::sleep(self.retry_delay()).await;
            tracing::debug!(server = %self.label, attempt = resumes, "resuming mcp response stream");
            let resp = self.get_stream(Some(&last)).await?;
            pumped = self.pump(resp, Some(id), &mut last_event_id).await;
        }
        Ok(())
    }

    /// The server→client GET stream: reopened (after `retry`) whenever it ends.
    async fn listen(self: Arc<Self>, ready: tokio::sync::oneshot::Sender<()>) {
        let mut ready = Some(ready);
        let mut last_event_id: Option<String> = None;
        let mut idle = 0;
        loop {
            let opened = tokio::select! {
                r = self.get_stream(last_event_id.as_deref()) => r,
                _ = self.shutdown.cancelled() => return,
            };
            if let Some(tx) = ready.take() {
                let _ = tx.send(());
            }
            let resp = match opened {
                Ok(resp) => resp,
                Err(e) => {
                    // 405 is the normal "no stream" answer; others are not fatal either.
                    tracing::debug!(server = %self.label, error = %e, "no mcp server stream");
                    return;
                }
            };
            let pumped = tokio::select! {
                p = self.pump(resp, None, &mut last_event_id) => p,
                _ = self.shutdown.cancelled() => return,
            };
            match pumped {
                Pumped::Ended { events: 0 } => idle += 1,
                _ => idle = 0,
            }
            if idle >= MAX_IDLE_RECONNECTS {
                tracing::debug!(server = %self.label, "mcp server stream keeps closing; giving up");
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(self.retry_delay()) => {}
                _ = self.shutdown.cancelled() => return,
            }
        }
    }

    async fn get_stream(&self, last_event_id: Option<&str>) -> Result<reqwest::Response, Error> {
        let build = || {
            let mut req = self
                .request(reqwest::Method::GET)
                .header(ACCEPT, "text/event-stream");
            if let Some(id) = last_event_id {
                req = req.header("last-event-id", id);
            }
            req
        };
        let had_session = self.lock_state(|s| s.session_id.is_some());
        let resp = auth::send(self.auth.as_ref(), build).await?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND && had_session {
            return Err(Error::SessionExpired);
        }
        if !resp.status().is_success() {
            return Err(status_error(resp).await);
        }
        if !is_event_stream(&resp) {
            return Err(Error::Protocol(
                "the GET stream is not text/event-stream".into(),
            ));
        }
        Ok(resp)
    }

    /// Delivers a stream's messages; stops early once the answer to `want` arrived.
    async fn pump(
        &self,
        resp: reqwest::Response,
        want: Option<&Id>,
        last_event_id: &mut Option<String>,
    ) -> Pumped {
        let mut body = SseBody::new(resp);
        let mut events = 0;
        loop {
            let ev = match body.next().await {
                Ok(Some(ev)) => ev,
                Ok(None) => return Pumped::Ended { events },
                Err(e) => {
                    tracing::debug!(server = %self.label, error = %e, "mcp sse stream broke");
                    return Pumped::Ended { events };
                }
            };
            events += 1;
            if let Some(id) = &ev.id {
                *last_event_id = Some(id.clone());
            }
            if let Some(ms) = ev.retry {
                self.lock_state(|s| s.retry_ms = Some(ms));
            }
            if !is_message_event(&ev) {
                continue;
            }
            match Message::parse(&ev.data) {
                Ok(msg) => {
                    let answered = want.is_some_and(|w| answers(&msg, w));
                    self.deliver(msg).await;
                    if answered {
                        return Pumped::Answered;
                    }
                }
                Err(e) => tracing::warn!(
                    server = %self.label, error = %e, "ignoring malformed sse message from mcp server"
                ),
            }
        }
    }

    fn retry_delay(&self) -> Duration {
        Duration::from_millis(self.lock_state(|s| s.retry_ms).unwrap_or(DEFAULT_RETRY_MS))
    }

    async fn deliver(&self, msg: Message) {
        let _ = self.inbound.send(Inbound::Message(msg)).await;
    }
}

/// Whether `msg` is the answer to request `id`.
fn answers(msg: &Message, id: &Id) -> bool {
    match msg {
        Message::Response { id: got, .. } => got == id,
        Message::Error { id: Some(got), .. } => got == id,
        _ => false,
    }
}

/// A non-success reply as an error, with the JSON-RPC error of its body when there is one.
async fn status_error(resp: reqwest::Response) -> Error {
    let status = resp.status().as_u16();
    let mut body = Vec::new();
    let mut resp = resp;
    while let Ok(Some(chunk)) = resp.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() > ERROR_BODY_CAP {
            break;
        }
    }
    let rpc = match Message::parse(&String::from_utf8_lossy(&body)) {
        Ok(Message::Error { error, .. }) => Some(error),
        _ => None,
    };
    Error::HttpStatus { status, rpc }
}
