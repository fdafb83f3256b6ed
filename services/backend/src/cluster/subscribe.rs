//! A cluster subscription: every durable event after `after_seq`, exactly once and in order,
//! from PostgreSQL; Redis hints only make it prompt. A hint whose seq is not the next one,
//! a resync signal, or the instance's once-a-second head check ([`super::heads`]) finding
//! the journal past what was delivered all lead to a read from the journal.

use std::sync::Arc;

use futures::StreamExt;
use lumina_cluster::HintEvent;
use lumina_journal::SessionKey;
use lumina_protocol::{ErrorObject, ServerFrame};
use lumina_runtime::journal::to_frame;
use lumina_runtime::Outbound;
use tokio::sync::mpsc;

use super::gateway::cluster_error;
use super::node::{session_key, Node};

pub async fn start(
    node: Arc<Node>,
    key: SessionKey,
    after_seq: u64,
) -> Result<mpsc::Receiver<Outbound>, ErrorObject> {
    // Subscribe to hints before reading the backlog so nothing falls between the two.
    let mut hints = node
        .relay_hints()
        .subscribe(&session_key(&key.tenant, &key.session_id))
        .await
        .map_err(cluster_error)?;
    let (tx, rx) = mpsc::channel(256);
    let watching = node.heads.watch(key.clone(), after_seq);
    tokio::spawn(async move {
        let mut last = after_seq;
        if catch_up(&node, &key, &tx, &mut last).await.is_err() {
            return;
        }
        loop {
            watching.delivered(last);
            let item = tokio::select! {
                item = hints.next() => item,
                _ = watching.behind() => Some(HintEvent::Resync),
                _ = tx.closed() => return,
            };
            let sent = match item {
                None => return,
                Some(HintEvent::Resync) => catch_up(&node, &key, &tx, &mut last).await,
                Some(HintEvent::Hint(hint)) => {
                    match serde_json::from_value::<ServerFrame>(hint.payload) {
                        Ok(ServerFrame::Delta(delta)) => tx
                            .send(Outbound::Delta(Arc::new(delta)))
                            .await
                            .map_err(|_| ()),
                        Ok(ServerFrame::Event(frame)) if frame.seq == last + 1 => {
                            last = frame.seq;
                            tx.send(Outbound::Event(Arc::new(frame)))
                                .await
                                .map_err(|_| ())
                        }
                        Ok(ServerFrame::Event(frame)) if frame.seq <= last => Ok(()),
                        // A gap, or something unexpected: the journal decides.
                        _ => catch_up(&node, &key, &tx, &mut last).await,
                    }
                }
            };
            if sent.is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

/// Sends every journal event after `last`, advancing it. A read error is retried on the
/// next poll (PostgreSQL may be briefly unavailable); only a closed receiver ends it.
async fn catch_up(
    node: &Node,
    key: &SessionKey,
    tx: &mpsc::Sender<Outbound>,
    last: &mut u64,
) -> Result<(), ()> {
    loop {
        let page = match node.store.read(key, *last, 500).await {
            Ok(page) => page,
            Err(err) => {
                tracing::debug!(session_id = %key.session_id, error = %err, "subscription read failed; will retry");
                return Ok(());
            }
        };
        if page.is_empty() {
            return Ok(());
        }
        for stored in &page {
            *last = stored.seq;
            if let Some(frame) = to_frame(&key.session_id, stored) {
                tx.send(Outbound::Event(Arc::new(frame)))
                    .await
                    .map_err(|_| ())?;
            }
        }
    }
}
