//! One connection's context, shared by its request tasks: who it is, where its frames go,
//! and its session subscriptions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use lumina_protocol::methods::Identity;
use lumina_protocol::ServerFrame;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::profile::AppState;

/// Per-connection context shared by its request tasks.
pub struct Conn {
    pub state: Arc<AppState>,
    pub identity: Identity,
    /// Frames to send, in order.
    pub out: mpsc::Sender<ServerFrame>,
    /// session_id → the task forwarding its events.
    pub subscriptions: Mutex<HashMap<String, JoinHandle<()>>>,
}

impl Conn {
    pub fn new(state: Arc<AppState>, identity: Identity, out: mpsc::Sender<ServerFrame>) -> Conn {
        Conn {
            state,
            identity,
            out,
            subscriptions: Mutex::new(HashMap::new()),
        }
    }

    pub async fn send(&self, frame: ServerFrame) {
        // A closed writer means the client went away; nothing more to do.
        let _ = self.out.send(frame).await;
    }

    pub fn replace_subscription(&self, session_id: &str, task: JoinHandle<()>) {
        let mut subs = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = subs.insert(session_id.to_string(), task) {
            old.abort();
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let subs = self
            .subscriptions
            .get_mut()
            .unwrap_or_else(|p| p.into_inner());
        for (_, task) in subs.drain() {
            task.abort();
        }
    }
}
