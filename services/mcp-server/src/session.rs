//! The state of one protocol session (a stdio process or an HTTP `Mcp-Session-Id`): the
//! negotiated revision, the client's capabilities, the log level, requests in flight and
//! server→client requests waiting for answers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use lumina_mcp_proto::jsonrpc::Id;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::context::Peer;
use crate::types::LogLevel;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What `initialize` established.
#[derive(Debug, Clone, Default)]
pub(crate) struct Negotiated {
    pub protocol_version: String,
    pub client_capabilities: Value,
    pub client_info: Option<Value>,
}

pub(crate) struct Session {
    pub peer: Arc<Peer>,
    pub log_level: Arc<Mutex<Option<LogLevel>>>,
    negotiated: Mutex<Option<Negotiated>>,
    in_flight: Mutex<HashMap<Id, CancellationToken>>,
    /// Parent of every request's token: cancelled when the session ends.
    closed: CancellationToken,
}

impl Session {
    pub(crate) fn new() -> Self {
        Self {
            peer: Arc::new(Peer::new()),
            log_level: Arc::new(Mutex::new(None)),
            negotiated: Mutex::new(None),
            in_flight: Mutex::new(HashMap::new()),
            closed: CancellationToken::new(),
        }
    }

    pub(crate) fn negotiated(&self) -> Option<Negotiated> {
        lock(&self.negotiated).clone()
    }

    pub(crate) fn set_negotiated(&self, negotiated: Negotiated) {
        *lock(&self.negotiated) = Some(negotiated);
    }

    /// The token of request `id`, registered now unless the transport already did (so a
    /// `notifications/cancelled` read right after the request cannot miss it). Cancelled by
    /// `cancel(id)` or `close()`.
    pub(crate) fn begin(&self, id: &Id) -> CancellationToken {
        lock(&self.in_flight)
            .entry(id.clone())
            .or_insert_with(|| self.closed.child_token())
            .clone()
    }

    pub(crate) fn end(&self, id: &Id) {
        lock(&self.in_flight).remove(id);
    }

    /// `notifications/cancelled`: true when the request was still running.
    pub(crate) fn cancel(&self, id: &Id) -> bool {
        match lock(&self.in_flight).get(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    pub(crate) fn in_flight(&self) -> usize {
        lock(&self.in_flight).len()
    }

    /// Ends the session: cancels running requests and fails waiting server→client requests.
    pub(crate) fn close(&self) {
        self.closed.cancel();
        self.peer.close();
    }
}
