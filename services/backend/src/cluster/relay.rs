//! Owner side of event relaying: every session a runtime opens for writing gets a task that
//! publishes its committed events and ephemeral deltas as Redis pub/sub hints. Hints are a
//! latency optimisation only — gateways check seqs and fill gaps from PostgreSQL.

use std::sync::Arc;

use lumina_cluster::Hints;
use lumina_protocol::ServerFrame;
use lumina_runtime::{Outbound, Session, SessionObserver};
use tokio::sync::broadcast::error::RecvError;

use super::node::session_key;

#[derive(Clone)]
pub struct Relay {
    pub(super) hints: Hints,
}

impl Relay {
    pub fn new(hints: Hints) -> Self {
        Self { hints }
    }
}

impl SessionObserver for Relay {
    fn opened(&self, session: &Arc<Session>) {
        let mut rx = session.journal().subscribe();
        let key = session_key(&session.journal().key().tenant, session.id());
        let hints = self.hints.clone();
        tokio::spawn(async move {
            loop {
                let (seq, frame) = match rx.recv().await {
                    Ok(Outbound::Event(e)) => (e.seq, ServerFrame::Event((*e).clone())),
                    Ok(Outbound::Delta(d)) => (0, ServerFrame::Delta((*d).clone())),
                    // Missed hints are fine: subscribers fill gaps from the journal.
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                };
                let Ok(payload) = serde_json::to_value(&frame) else {
                    continue;
                };
                if let Err(err) = hints.publish(&key, seq, &payload).await {
                    tracing::debug!(session = %key, error = %err, "hint not published");
                }
            }
        });
    }
}
