//! What a handler can do while it serves one request: log (`notifications/message`), report
//! progress (`notifications/progress`), ask the client (`sampling/createMessage`,
//! `elicitation/create`) and notice cancellation. Messages go where the transport says
//! (the request's SSE stream, stdout, ...) through an [`Outlet`].

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use lumina_mcp_proto::jsonrpc::{code, ErrorObject, Id, Message};
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::types::LogLevel;

/// Opaque per-request credential produced by an [`HttpAuth`](crate::http::HttpAuth) hook.
pub type AuthValue = Arc<dyn Any + Send + Sync>;

/// Where the server→client messages of one request go.
pub(crate) trait Outlet: Send + Sync {
    fn send(&self, message: Message);
    /// Ends the transport stream carrying this request's messages without ending the
    /// request (SEP-1699 polling); later messages wait for the client to resume.
    fn close_stream(&self) {}
    /// False where the revision forbids server→client requests (stateless 2026-07-28).
    fn can_request(&self) -> bool {
        true
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a single map operation: a poisoned map is still consistent.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

type Reply = oneshot::Sender<Result<Value, ErrorObject>>;

/// Server→client requests waiting for the client's response.
#[derive(Default)]
pub(crate) struct Peer {
    next_id: AtomicI64,
    /// `None` once the connection is gone: nothing new may wait.
    pending: Mutex<Option<HashMap<Id, Reply>>>,
}

impl Peer {
    pub(crate) fn new() -> Self {
        Self {
            next_id: AtomicI64::new(1),
            pending: Mutex::new(Some(HashMap::new())),
        }
    }

    fn register(&self) -> Option<(Id, oneshot::Receiver<Result<Value, ErrorObject>>)> {
        let id = Id::Num(self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).as_mut()?.insert(id.clone(), tx);
        Some((id, rx))
    }

    fn forget(&self, id: &Id) {
        if let Some(map) = lock(&self.pending).as_mut() {
            map.remove(id);
        }
    }

    /// Routes the client's answer; false when nothing waits for `id`.
    pub(crate) fn complete(&self, id: &Id, outcome: Result<Value, ErrorObject>) -> bool {
        let reply = lock(&self.pending).as_mut().and_then(|map| map.remove(id));
        match reply {
            Some(reply) => {
                let _ = reply.send(outcome);
                true
            }
            None => false,
        }
    }

    /// Fails everything waiting (the connection ended) and refuses new requests.
    pub(crate) fn close(&self) {
        let waiting = lock(&self.pending).take();
        drop(waiting);
    }
}

/// The log threshold that applies to a request.
#[derive(Clone)]
pub(crate) enum LogFilter {
    /// Legacy sessions: `logging/setLevel` (unset: everything is sent).
    Session(Arc<Mutex<Option<LogLevel>>>),
    /// Stateless requests: `_meta` logLevel; absent means no log messages at all.
    Request(Option<LogLevel>),
}

impl LogFilter {
    fn allows(&self, level: LogLevel) -> bool {
        match self {
            LogFilter::Session(threshold) => lock(threshold).is_none_or(|min| level >= min),
            LogFilter::Request(threshold) => threshold.is_some_and(|min| level >= min),
        }
    }
}

pub(crate) struct ContextParts {
    pub request_id: Id,
    pub progress_token: Option<Value>,
    pub cancel: CancellationToken,
    pub outlet: Arc<dyn Outlet>,
    pub peer: Arc<Peer>,
    pub log_filter: LogFilter,
    pub client_capabilities: Value,
    pub client_info: Option<Value>,
    pub protocol_version: String,
    pub stateless: bool,
    pub auth: Option<AuthValue>,
}

/// The handle a [`Handler`](crate::Handler) gets for one request. Cheap to clone.
#[derive(Clone)]
pub struct RequestContext {
    inner: Arc<ContextParts>,
}

impl RequestContext {
    pub(crate) fn new(parts: ContextParts) -> Self {
        Self {
            inner: Arc::new(parts),
        }
    }

    pub fn request_id(&self) -> &Id {
        &self.inner.request_id
    }

    /// Cancelled when the client cancels the request (`notifications/cancelled`, a closed
    /// stateless stream) or the session ends.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// The protocol revision this request is served under.
    pub fn protocol_version(&self) -> &str {
        &self.inner.protocol_version
    }

    /// True for requests of the stateless revision (2026-07-28).
    pub fn is_stateless(&self) -> bool {
        self.inner.stateless
    }

    pub fn client_capabilities(&self) -> &Value {
        &self.inner.client_capabilities
    }

    pub fn client_info(&self) -> Option<&Value> {
        self.inner.client_info.as_ref()
    }

    /// The credential the HTTP auth hook returned for this request, if of type `T`.
    pub fn auth<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.inner.auth.clone()?.downcast::<T>().ok()
    }

    /// Sends `notifications/message` when the client's log level lets `level` through.
    pub fn log(&self, level: LogLevel, logger: Option<&str>, data: impl Into<Value>) {
        if !self.inner.log_filter.allows(level) {
            return;
        }
        let mut params = json!({ "level": level, "data": data.into() });
        if let (Some(logger), Some(map)) = (logger, params.as_object_mut()) {
            map.insert("logger".into(), Value::from(logger));
        }
        self.notify("notifications/message", params);
    }

    /// Sends `notifications/progress` when the request carried `_meta.progressToken`.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.inner.progress_token else {
            return;
        };
        let mut params = json!({ "progressToken": token, "progress": progress });
        if let Some(map) = params.as_object_mut() {
            if let Some(total) = total {
                map.insert("total".into(), json!(total));
            }
            if let Some(message) = message {
                map.insert("message".into(), Value::from(message));
            }
        }
        self.notify("notifications/progress", params);
    }

    /// Whether the request carried a progress token.
    pub fn wants_progress(&self) -> bool {
        self.inner.progress_token.is_some()
    }

    /// Sends any notification related to this request.
    pub fn notify(&self, method: &str, params: Value) {
        if self.inner.cancel.is_cancelled() {
            return;
        }
        self.inner
            .outlet
            .send(Message::notification(method, Some(params)));
    }

    /// SEP-1699: closes the transport stream of this request now (Streamable HTTP only); the
    /// client reconnects with `Last-Event-ID` and receives the rest. No-op elsewhere.
    pub fn close_sse_stream(&self) {
        self.inner.outlet.close_stream();
    }

    /// `sampling/createMessage`; fails when the client did not declare `sampling`.
    pub async fn create_message(&self, params: Value) -> Result<Value, ErrorObject> {
        self.require_capability("sampling")?;
        self.request("sampling/createMessage", params).await
    }

    /// `elicitation/create`; fails when the client did not declare `elicitation`.
    pub async fn elicit(&self, params: Value) -> Result<Value, ErrorObject> {
        self.require_capability("elicitation")?;
        self.request("elicitation/create", params).await
    }

    /// A server→client request on this request's stream; resolves with the client's result
    /// or error. Fails at once where the revision or transport cannot carry it.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        if !self.inner.outlet.can_request() {
            return Err(ErrorObject::new(
                code::INVALID_REQUEST,
                format!(
                    "{method} cannot be sent: protocol revision {} has no server-to-client requests",
                    self.inner.protocol_version
                ),
            ));
        }
        let Some((id, reply)) = self.inner.peer.register() else {
            return Err(connection_closed());
        };
        self.inner
            .outlet
            .send(Message::request(id.clone(), method, Some(params)));
        let outcome = tokio::select! {
            outcome = reply => outcome.unwrap_or_else(|_| Err(connection_closed())),
            _ = self.inner.cancel.cancelled() => Err(ErrorObject::new(
                code::INTERNAL_ERROR,
                "the request was cancelled",
            )),
        };
        self.inner.peer.forget(&id);
        outcome
    }

    fn require_capability(&self, name: &str) -> Result<(), ErrorObject> {
        if self.inner.client_capabilities.get(name).is_some() {
            return Ok(());
        }
        let mut error = ErrorObject::new(
            code::MISSING_CLIENT_CAPABILITY,
            format!("the client did not declare the `{name}` capability"),
        );
        error.data = Some(json!({ "requiredCapabilities": { name: {} } }));
        Err(error)
    }
}

fn connection_closed() -> ErrorObject {
    ErrorObject::new(
        code::INTERNAL_ERROR,
        "the client connection closed before it answered",
    )
}
