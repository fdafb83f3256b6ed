//! Request/response matching over a [`Transport`], and the dispatcher that answers server
//! requests and handles notifications.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::handlers;
use super::transport::{Inbound, Transport, TransportKind};
use crate::jsonrpc::{ErrorObject, Id, Message};
use crate::Error;

/// How long a `notifications/cancelled` may take before it is given up.
const CANCEL_SEND_TIMEOUT: Duration = Duration::from_secs(2);

enum Reply {
    Result(Value),
    Error(ErrorObject),
    Failed(Error),
}

pub(crate) struct Rpc {
    pub(crate) transport: Arc<dyn Transport>,
    pending: Mutex<HashMap<Id, oneshot::Sender<Reply>>>,
    next_id: AtomicI64,
    closed: Mutex<Option<String>>,
    /// The stateless revision's per-request `_meta`; `None` in the handshake era.
    meta: Mutex<Option<Map<String, Value>>>,
    /// `notifications/tools/list_changed` arrived since the last `tools/list`.
    pub(crate) tools_changed: AtomicBool,
    dispatcher: Mutex<Option<JoinHandle<()>>>,
    pub(crate) label: String,
}

impl Drop for Rpc {
    fn drop(&mut self) {
        if let Some(task) = self.dispatcher.lock().ok().and_then(|mut d| d.take()) {
            task.abort();
        }
    }
}

impl Rpc {
    pub(crate) fn start(
        transport: Arc<dyn Transport>,
        inbound: mpsc::Receiver<Inbound>,
        label: String,
    ) -> Arc<Self> {
        let rpc = Arc::new(Self {
            transport,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(1),
            closed: Mutex::new(None),
            meta: Mutex::new(None),
            tools_changed: AtomicBool::new(false),
            dispatcher: Mutex::new(None),
            label,
        });
        let task = tokio::spawn(dispatch(Arc::downgrade(&rpc), inbound));
        if let Ok(mut d) = rpc.dispatcher.lock() {
            *d = Some(task);
        }
        rpc
    }

    pub(crate) fn set_meta(&self, meta: Option<Map<String, Value>>) {
        if let Ok(mut m) = self.meta.lock() {
            *m = meta;
        }
    }

    pub(crate) fn is_stateless(&self) -> bool {
        self.meta.lock().map(|m| m.is_some()).unwrap_or(false)
    }

    pub(crate) fn closed_reason(&self) -> Option<String> {
        self.closed.lock().ok().and_then(|c| c.clone())
    }

    /// Marks the session closed and fails every pending request.
    pub(crate) fn mark_closed(&self, reason: String) {
        if let Ok(mut c) = self.closed.lock() {
            if c.is_none() {
                *c = Some(reason.clone());
            }
        }
        let pending: Vec<_> = self
            .pending
            .lock()
            .map(|mut p| p.drain().collect())
            .unwrap_or_default();
        for (_, tx) in pending {
            let _ = tx.send(Reply::Failed(Error::Closed(reason.clone())));
        }
    }

    /// Sends a request and waits for its answer, the timeout or `cancel`. On timeout or
    /// cancellation the server is told (`notifications/cancelled`).
    pub(crate) async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        cancel: Option<&CancellationToken>,
    ) -> Result<Value, Error> {
        self.exchange(method, params, timeout, cancel, true).await
    }

    /// A probe: like [`Self::request`] but a timeout is not announced to the server (it may
    /// not even know the method, and no session exists yet).
    pub(crate) async fn probe(&self, method: &str, timeout: Duration) -> Result<Value, Error> {
        self.exchange(method, None, timeout, None, false).await
    }

    async fn exchange(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        cancel: Option<&CancellationToken>,
        announce_cancel: bool,
    ) -> Result<Value, Error> {
        if let Some(reason) = self.closed_reason() {
            return Err(Error::Closed(reason));
        }
        let id = Id::Num(self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id.clone(), tx);
        }
        // Closed between the check and the insert: `mark_closed` already drained the map.
        if let Some(reason) = self.closed_reason() {
            if let Ok(mut p) = self.pending.lock() {
                p.remove(&id);
            }
            return Err(Error::Closed(reason));
        }
        let msg = Message::request(id.clone(), method, self.with_meta(params));
        let exchange = async {
            self.transport.send(&msg).await?;
            match rx.await {
                Ok(Reply::Result(v)) => Ok(v),
                Ok(Reply::Error(error)) => Err(Error::Rpc {
                    method: method.to_string(),
                    error,
                }),
                Ok(Reply::Failed(e)) => Err(e),
                Err(_) => Err(Error::Closed("the connection closed".into())),
            }
        };
        let never = CancellationToken::new();
        let cancel = cancel.unwrap_or(&never);
        let outcome = tokio::select! {
            r = exchange => r,
            _ = self.deadline(timeout) => Err(Error::Timeout {
                method: method.to_string(),
                ms: timeout.as_millis() as u64,
            }),
            _ = cancel.cancelled() => Err(Error::Cancelled),
        };
        if let Ok(mut p) = self.pending.lock() {
            p.remove(&id);
        }
        if let (true, Err(e @ (Error::Timeout { .. } | Error::Cancelled))) =
            (announce_cancel, &outcome)
        {
            self.send_cancelled(&id, &e.to_string()).await;
        }
        let value = outcome?;
        if value.get("resultType").and_then(Value::as_str) == Some("input_required") {
            return Err(Error::Protocol(format!(
                "{method}: the server asked for more input (multi-round-trip requests are not supported)"
            )));
        }
        Ok(value)
    }

    /// Sleeps for `timeout` plus whatever time the transport spends authorizing meanwhile
    /// (a sign-in is not the server being slow).
    async fn deadline(&self, timeout: Duration) {
        let start = tokio::time::Instant::now();
        let auth_at_start = self.transport.auth_time();
        let mut until = start + timeout;
        loop {
            tokio::time::sleep_until(until).await;
            let spent = self.transport.auth_time().saturating_sub(auth_at_start);
            let extended = start + timeout + spent;
            if extended <= tokio::time::Instant::now() {
                return;
            }
            until = extended;
        }
    }

    pub(crate) async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), Error> {
        self.transport
            .send(&Message::notification(method, params))
            .await
    }

    /// Over stateless HTTP abandoning the request (closing its stream) is the cancellation.
    async fn send_cancelled(&self, id: &Id, reason: &str) {
        if self.is_stateless() && self.transport.kind() != TransportKind::Stdio {
            return;
        }
        let params = serde_json::json!({"requestId": id, "reason": reason});
        let sent = tokio::time::timeout(
            CANCEL_SEND_TIMEOUT,
            self.notify("notifications/cancelled", Some(params)),
        )
        .await;
        if !matches!(sent, Ok(Ok(()))) {
            tracing::debug!(server = %self.label, "could not send notifications/cancelled");
        }
    }

    /// Adds the stateless `_meta` keys to `params` (keeping any `_meta` the caller set).
    fn with_meta(&self, params: Option<Value>) -> Option<Value> {
        let Some(meta) = self.meta.lock().ok().and_then(|m| m.clone()) else {
            return params;
        };
        let mut params = match params {
            Some(Value::Object(p)) => p,
            _ => Map::new(),
        };
        let entry = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = entry {
            for (k, v) in meta {
                m.entry(k).or_insert(v);
            }
        }
        Some(Value::Object(params))
    }
}

fn complete(rpc: &Rpc, id: &Id, reply: Reply) {
    let tx = rpc.pending.lock().ok().and_then(|mut p| p.remove(id));
    match tx {
        Some(tx) => {
            let _ = tx.send(reply);
        }
        None => tracing::debug!(server = %rpc.label, %id, "ignoring a reply to no pending request"),
    }
}

async fn dispatch(rpc: Weak<Rpc>, mut inbound: mpsc::Receiver<Inbound>) {
    while let Some(item) = inbound.recv().await {
        let Some(rpc) = rpc.upgrade() else { return };
        match item {
            Inbound::Message(Message::Response { id, result }) => {
                complete(&rpc, &id, Reply::Result(result))
            }
            Inbound::Message(Message::Error {
                id: Some(id),
                error,
            }) => complete(&rpc, &id, Reply::Error(error)),
            Inbound::Message(Message::Error { id: None, error }) => {
                tracing::warn!(server = %rpc.label, %error, "mcp server sent an error without id");
            }
            Inbound::Message(Message::Request { id, method, params }) => {
                let transport = rpc.transport.clone();
                let label = rpc.label.clone();
                tokio::spawn(async move {
                    let reply = match handlers::answer(&method, params.as_ref()) {
                        Ok(result) => Message::Response { id, result },
                        Err(error) => Message::Error {
                            id: Some(id),
                            error,
                        },
                    };
                    if let Err(e) = transport.send(&reply).await {
                        tracing::warn!(server = %label, method, error = %e, "could not answer mcp server request");
                    }
                });
            }
            Inbound::Message(Message::Notification { method, params }) => {
                handlers::notification(&rpc, &method, params.as_ref())
            }
            Inbound::RequestFailed { id, error } => complete(&rpc, &id, Reply::Failed(error)),
            Inbound::Closed(reason) => rpc.mark_closed(reason),
        }
    }
}
