//! HTTP sessions (`Mcp-Session-Id`, handshake revisions): created by `initialize`, ended by
//! DELETE, idle expiry or shutdown. Ended ids are remembered (bounded) so that a client
//! using one gets 404 ("session gone, re-initialize") rather than 400.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;

use super::guard::header_str;
use super::stream::Streams;
use crate::session::Session;

pub(crate) use lumina_mcp_proto::header::SESSION_ID as SESSION_HEADER;
/// Ended session ids remembered for 404 answers.
const MAX_TERMINATED: usize = 4096;

pub(crate) struct HttpSession {
    pub id: String,
    pub core: Arc<Session>,
    pub streams: Streams,
    last_seen: Mutex<Instant>,
}

impl HttpSession {
    pub(crate) fn touch(&self) {
        *lock(&self.last_seen) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        lock(&self.last_seen).elapsed()
    }

    fn close(&self) {
        self.core.close();
        self.streams.close_all();
    }
}

pub(crate) enum Lookup {
    Found(Arc<HttpSession>),
    /// No `Mcp-Session-Id` header.
    Missing,
    /// An id this server never issued.
    Unknown,
    /// An id that was ended (DELETE, expiry).
    Terminated,
}

#[derive(Default)]
struct Terminated {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

pub(crate) struct Sessions {
    live: Mutex<HashMap<String, Arc<HttpSession>>>,
    terminated: Mutex<Terminated>,
    idle_timeout: Duration,
    retry: Duration,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Sessions {
    pub(crate) fn new(idle_timeout: Duration, retry: Duration) -> Self {
        Self {
            live: Mutex::new(HashMap::new()),
            terminated: Mutex::new(Terminated::default()),
            idle_timeout,
            retry,
        }
    }

    /// A new session with a random id; also ends sessions idle for too long.
    pub(crate) fn create(&self) -> Arc<HttpSession> {
        self.expire_idle();
        let session = Arc::new(HttpSession {
            id: uuid::Uuid::new_v4().to_string(),
            core: Arc::new(Session::new()),
            streams: Streams::new(self.retry),
            last_seen: Mutex::new(Instant::now()),
        });
        lock(&self.live).insert(session.id.clone(), session.clone());
        tracing::debug!(session_id = %session.id, "mcp http session created");
        session
    }

    pub(crate) fn lookup(&self, headers: &HeaderMap) -> Lookup {
        let Some(id) = header_str(headers, SESSION_HEADER) else {
            return Lookup::Missing;
        };
        if let Some(session) = lock(&self.live).get(id) {
            session.touch();
            return Lookup::Found(session.clone());
        }
        if lock(&self.terminated).ids.contains(id) {
            Lookup::Terminated
        } else {
            Lookup::Unknown
        }
    }

    /// Ends a session; false when it was not live.
    pub(crate) fn terminate(&self, id: &str) -> bool {
        let Some(session) = lock(&self.live).remove(id) else {
            return false;
        };
        session.close();
        let mut terminated = lock(&self.terminated);
        if terminated.ids.insert(id.to_string()) {
            terminated.order.push_back(id.to_string());
        }
        while terminated.order.len() > MAX_TERMINATED {
            if let Some(old) = terminated.order.pop_front() {
                terminated.ids.remove(&old);
            }
        }
        tracing::debug!(session_id = %id, "mcp http session ended");
        true
    }

    fn expire_idle(&self) {
        let idle: Vec<String> = lock(&self.live)
            .values()
            .filter(|s| {
                s.idle_for() > self.idle_timeout && s.core.in_flight() == 0 && !s.streams.has_live()
            })
            .map(|s| s.id.clone())
            .collect();
        for id in idle {
            tracing::info!(session_id = %id, "mcp http session expired");
            self.terminate(&id);
        }
    }

    /// Ends every session (server shutdown): open streams end so connections can close.
    pub(crate) fn close_all(&self) {
        let all: Vec<String> = lock(&self.live).keys().cloned().collect();
        for id in all {
            self.terminate(&id);
        }
    }
}
