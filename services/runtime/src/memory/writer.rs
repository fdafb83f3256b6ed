//! The runtime's one writer of journal evidence into the memory store.
//!
//! Every journal append of every session used to append its evidence itself, awaited
//! inside the append: in the cluster each memory append takes its space's fence row lock
//! (the space's hash chain is one sequence across instances) and commits, so under load
//! every session's journal appends — a submit's acknowledgement, each step of a run —
//! queued behind the other sessions' memory appends of the same project. Now an append
//! only hands its rows to this writer, which appends whatever has gathered in one batch
//! (one lock, one commit) at a time, in the order the rows came, and `flush` waits until
//! everything handed over before it is written, so a reader (recall, the compile job)
//! still sees every turn that ended before it asked.
//!
//! Evidence is derived from the journal with idempotent source ids; like the inline
//! append it replaces, a failed write is logged and the rows are dropped, never failing a
//! run.

use std::sync::{Arc, OnceLock};

use lumina_memory::{MemoryStore, NewEvidence};
use tokio::sync::{mpsc, oneshot};

/// Rows one store append takes at most.
const BATCH_ROWS: usize = 500;

enum Msg {
    /// One journal append's rows (appended together: a refused batch is retried per
    /// append, so one bad row never costs another append its rows).
    Rows(Vec<NewEvidence>),
    /// Answered once everything sent before it is written.
    Flush(oneshot::Sender<()>),
}

/// Cheap to share; the writing task starts with the first rows.
pub(crate) struct EvidenceWriter {
    store: Arc<dyn MemoryStore>,
    tx: OnceLock<mpsc::UnboundedSender<Msg>>,
}

impl EvidenceWriter {
    pub(crate) fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self {
            store,
            tx: OnceLock::new(),
        }
    }

    fn sender(&self) -> &mpsc::UnboundedSender<Msg> {
        self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(write_loop(Arc::clone(&self.store), rx));
            tx
        })
    }

    /// Hands one journal append's rows over; returns at once.
    pub(crate) fn send(&self, rows: Vec<NewEvidence>) {
        if rows.is_empty() {
            return;
        }
        // The loop ends only with the writer itself.
        let _ = self.sender().send(Msg::Rows(rows));
    }

    /// Waits until every row sent before this call is written (or was refused).
    pub(crate) async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.sender().send(Msg::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

async fn write_loop(store: Arc<dyn MemoryStore>, mut rx: mpsc::UnboundedReceiver<Msg>) {
    while let Some(first) = rx.recv().await {
        let mut groups: Vec<Vec<NewEvidence>> = Vec::new();
        let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
        let mut rows = 0usize;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Rows(group) => {
                    rows += group.len();
                    groups.push(group);
                }
                Msg::Flush(done) => waiting.push(done),
            }
            if rows < BATCH_ROWS {
                next = rx.try_recv().ok();
            }
        }
        write(&*store, groups).await;
        for done in waiting {
            let _ = done.send(());
        }
    }
}

/// Appends the groups as one batch; when the store refuses it, each group on its own.
async fn write(store: &dyn MemoryStore, groups: Vec<Vec<NewEvidence>>) {
    match groups.len() {
        0 => return,
        1 => {}
        _ => {
            let batch: Vec<NewEvidence> = groups.iter().flatten().cloned().collect();
            match store.append(batch).await {
                Ok(_) => return,
                Err(err) => {
                    tracing::debug!(error = %err, "memory evidence batch refused, appending each journal append's rows alone");
                }
            }
        }
    }
    for group in groups {
        let space = group.first().map(|r| r.space.clone()).unwrap_or_default();
        if let Err(err) = store.append(group).await {
            tracing::warn!(space = %space, error = %err, "memory evidence not recorded");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumina_memory::conformance::sample_conversation;
    use lumina_memory_sqlite::{SqliteMemory, SqliteOptions};

    #[tokio::test]
    async fn rows_are_written_in_order_and_flush_waits_for_them() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn MemoryStore> =
            Arc::new(SqliteMemory::open(dir.path(), SqliteOptions::default(), None).unwrap());
        let writer = EvidenceWriter::new(Arc::clone(&store));
        let rows = sample_conversation("p");
        for row in &rows {
            writer.send(vec![row.clone()]);
        }
        writer.flush().await;
        let read = store.read("p", 0, 100).await.unwrap();
        let ids: Vec<&str> = read.iter().map(|e| e.row.source_id.as_str()).collect();
        let sent: Vec<&str> = rows.iter().map(|r| r.source_id.as_str()).collect();
        assert_eq!(ids, sent);
    }

    #[tokio::test]
    async fn a_refused_append_costs_no_other_append_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn MemoryStore> =
            Arc::new(SqliteMemory::open(dir.path(), SqliteOptions::default(), None).unwrap());
        let rows = sample_conversation("p");
        store.append(vec![rows[0].clone()]).await.unwrap();
        let writer = EvidenceWriter::new(Arc::clone(&store));
        // Same source id, other text: the store refuses it (and any batch holding it).
        let mut conflicting = rows[0].clone();
        conflicting.text.push_str(" (changed)");
        writer.send(vec![rows[1].clone()]);
        writer.send(vec![conflicting]);
        writer.send(vec![rows[2].clone()]);
        writer.flush().await;
        let read = store.read("p", 0, 100).await.unwrap();
        let ids: Vec<&str> = read.iter().map(|e| e.row.source_id.as_str()).collect();
        assert_eq!(
            ids,
            vec![
                rows[0].source_id.as_str(),
                rows[1].source_id.as_str(),
                rows[2].source_id.as_str()
            ]
        );
    }
}
