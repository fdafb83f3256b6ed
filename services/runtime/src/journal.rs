//! The session's writer: appends to the store under the owner's fence, keeps the projection
//! current, and broadcasts committed events (in seq order) and ephemeral deltas.
//!
//! Usually the owner is the session's only writer. With distributed team members
//! (docs/teams.md#distributed-members) another instance writes a member's stream under the
//! same fence, as a *guest* ([`GuestWriter`]); the store numbers every append, so seqs stay
//! contiguous, and each writer fills the gaps the other left in its projection from the
//! store before applying its own events.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use lumina_journal::{
    AppendBatch, CommandRecord, ExpectedVersion, Fence, JournalStore, NewAudit, NewEvent,
    SessionKey, StoredEvent,
};
use lumina_protocol::{DeltaFrame, Event, EventFrame, MAIN_STREAM};
use tokio::sync::{broadcast, Mutex};

use crate::memory::MemorySink;
use crate::projection::Projection;
use crate::Result;

/// What subscribers receive.
#[derive(Debug, Clone)]
pub enum Outbound {
    Event(Arc<EventFrame>),
    Delta(Arc<DeltaFrame>),
}

/// Capacity of the live broadcast; a subscriber that lags further re-reads from the store.
const BROADCAST_CAPACITY: usize = 1024;

/// Whether a guest writer's instance may still write (its registry liveness holds).
pub type Alive = Arc<dyn Fn() -> bool + Send + Sync>;

/// A writer of one member task's stream on an instance that does not own the session
/// (docs/teams.md#distributed-members). Besides the session's fence, its appends to that
/// stream carry the stream's version as it left it: once the owner closed the task there
/// (the guest's instance was declared dead), the next append is refused in the store, and
/// none is attempted once `alive` says the instance's liveness lapsed.
pub struct GuestWriter {
    pub stream: String,
    /// The stream's version after this writer's last append.
    pub version: AtomicU64,
    pub alive: Alive,
}

pub struct SessionJournal {
    store: Arc<dyn JournalStore>,
    key: SessionKey,
    fence: Fence,
    /// Held across append + broadcast so subscribers see events in seq order.
    projection: Mutex<Projection>,
    tx: broadcast::Sender<Outbound>,
    /// Visible main-stream events also become Memory Fabric evidence.
    memory: Option<MemorySink>,
    /// Set when an append failed for another reason than the fence: the store may have
    /// committed it all the same (a reply lost with the connection), so the projection
    /// catches up from the store before the next append.
    stale: AtomicBool,
    /// Set on a guest writer (another instance owns the session).
    guest: Option<GuestWriter>,
    /// Tasks another instance writes into this session now: while any runs, every append
    /// first catches the projection up with the store.
    external: AtomicUsize,
}

impl SessionJournal {
    /// Opens the writer and replays the journal into the projection.
    pub async fn open(store: Arc<dyn JournalStore>, key: SessionKey, fence: Fence) -> Result<Self> {
        let mut projection = Projection::default();
        let mut after = 0;
        loop {
            let page = store.read(&key, after, 1000).await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for stored in &page {
                if let Some(frame) = to_frame(&key.session_id, stored) {
                    projection.apply(&frame);
                }
            }
        }
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        Ok(Self {
            store,
            key,
            fence,
            projection: Mutex::new(projection),
            tx,
            memory: None,
            stale: AtomicBool::new(false),
            guest: None,
            external: AtomicUsize::new(0),
        })
    }

    /// Makes this a guest writer (see [`GuestWriter`]): it never writes the session's
    /// summary (the owner does) and catches up with the store before every append.
    pub(crate) fn with_guest(mut self, guest: GuestWriter) -> Self {
        self.guest = Some(guest);
        self
    }

    /// Counts a task that another instance writes into this session (until the guard is
    /// dropped): meanwhile appends catch up with the store first.
    pub(crate) fn external_writer(self: &Arc<Self>) -> ExternalWriter {
        self.external.fetch_add(1, Ordering::SeqCst);
        ExternalWriter(self.clone())
    }

    /// [`SessionJournal::sync`] when another instance writes this session too (a guest
    /// writer, or an owner with distributed member tasks running).
    pub(crate) async fn sync_if_shared(&self) -> Result<()> {
        if self.guest.is_some() || self.external.load(Ordering::SeqCst) > 0 {
            self.sync().await?;
        }
        Ok(())
    }

    /// Brings the projection up to the store now (events other instances wrote), and
    /// broadcasts them.
    pub(crate) async fn sync(&self) -> Result<()> {
        let mut projection = self.projection.lock().await;
        self.catch_up(&mut projection).await
    }

    /// Records visible events as evidence in `memory` after each append.
    pub(crate) fn with_memory(mut self, memory: Option<MemorySink>) -> Self {
        self.memory = memory;
        self
    }

    pub(crate) fn memory(&self) -> Option<&MemorySink> {
        self.memory.as_ref()
    }

    pub fn key(&self) -> &SessionKey {
        &self.key
    }

    pub fn session_id(&self) -> &str {
        &self.key.session_id
    }

    pub fn store(&self) -> &Arc<dyn JournalStore> {
        &self.store
    }

    pub fn fence(&self) -> Fence {
        self.fence
    }

    /// Appends events to the main stream.
    pub async fn append(&self, events: Vec<Event>) -> Result<Vec<Arc<EventFrame>>> {
        self.append_batch(MAIN_STREAM, events, None, Vec::new())
            .await
    }

    /// Appends events to another stream of the session (a sub-agent's `agent/<id>`). The
    /// global seq stays contiguous across streams; the projection and subscribers see the
    /// events like any other.
    pub async fn append_to(
        &self,
        stream: &str,
        events: Vec<Event>,
    ) -> Result<Vec<Arc<EventFrame>>> {
        self.append_batch(stream, events, None, Vec::new()).await
    }

    /// Appends events that journal permission decisions with their approvals audit
    /// records (docs/audit.md), in the same store transaction.
    pub(crate) async fn append_audited(
        &self,
        stream: &str,
        events: Vec<Event>,
        audit: Vec<NewAudit>,
    ) -> Result<Vec<Arc<EventFrame>>> {
        self.append_batch(stream, events, None, audit).await
    }

    /// Appends events and records an idempotent command result in the same transaction.
    pub async fn append_with_command(
        &self,
        events: Vec<Event>,
        command: CommandRecord,
    ) -> Result<Vec<Arc<EventFrame>>> {
        self.append_batch(MAIN_STREAM, events, Some(command), Vec::new())
            .await
    }

    /// Appends to `stream` only while its version is `expected` (a conflict otherwise):
    /// how exactly one instance starts a distributed member task.
    pub(crate) async fn append_guarded(
        &self,
        stream: &str,
        events: Vec<Event>,
        audit: Vec<NewAudit>,
        expected: ExpectedVersion,
    ) -> Result<Vec<Arc<EventFrame>>> {
        self.append_inner(stream, events, None, audit, Some(expected))
            .await
    }

    async fn append_batch(
        &self,
        stream: &str,
        events: Vec<Event>,
        command: Option<CommandRecord>,
        audit: Vec<NewAudit>,
    ) -> Result<Vec<Arc<EventFrame>>> {
        self.append_inner(stream, events, command, audit, None)
            .await
    }

    async fn append_inner(
        &self,
        stream: &str,
        events: Vec<Event>,
        command: Option<CommandRecord>,
        audit: Vec<NewAudit>,
        expected: Option<ExpectedVersion>,
    ) -> Result<Vec<Arc<EventFrame>>> {
        let mut projection = self.projection.lock().await;
        let guarded = self.guest.as_ref().filter(|g| g.stream == stream);
        if let Some(guest) = &self.guest {
            if !(guest.alive)() {
                return Err(crate::Error::Fenced);
            }
        }
        let expected = match (expected, guarded) {
            (Some(expected), _) => expected,
            (None, Some(guest)) => ExpectedVersion::Exact(guest.version.load(Ordering::SeqCst)),
            (None, None) => ExpectedVersion::Any,
        };
        let touches_summary = events.iter().any(|e| {
            matches!(
                e,
                Event::SessionCreated { .. }
                    | Event::SessionArchived {}
                    | Event::RunStarted { .. }
                    | Event::RunQueued { .. }
                    | Event::RunCompleted { .. }
                    | Event::RunFailed { .. }
                    | Event::RunInterrupted { .. }
                    | Event::TaskUpdated { .. }
            )
        });
        let batch = AppendBatch {
            stream: stream.to_string(),
            expected,
            events: events
                .iter()
                .map(|e| {
                    let (kind, payload) = e.to_parts();
                    NewEvent { kind, payload }
                })
                .collect(),
            command,
            audit,
        };
        let shared = self.guest.is_some() || self.external.load(Ordering::SeqCst) > 0;
        if shared || self.stale.load(Ordering::SeqCst) {
            self.catch_up(&mut projection).await?;
        }
        let stored = match self.store.append(&self.key, self.fence, batch).await {
            Ok(stored) => stored,
            // The guest's own stream moved on: the owner closed the task.
            Err(lumina_journal::Error::Conflict { .. }) if guarded.is_some() => {
                return Err(crate::Error::Fenced)
            }
            Err(err) => {
                if !matches!(
                    err,
                    lumina_journal::Error::Fenced { .. } | lumina_journal::Error::Conflict { .. }
                ) {
                    self.stale.store(true, Ordering::SeqCst);
                }
                return Err(err.into());
            }
        };
        if let (Some(guest), Some(last)) = (guarded, stored.last()) {
            guest.version.store(last.stream_seq, Ordering::SeqCst);
        }
        // Another writer of the session appended since the projection's head: apply its
        // events first, so the projection and subscribers see every seq in order.
        if let Some(first) = stored.first() {
            if first.seq > projection.head_seq + 1 {
                self.fill_gap(&mut projection, first.seq).await?;
            }
        }
        let frames: Vec<Arc<EventFrame>> = stored
            .iter()
            .filter_map(|s| to_frame(&self.key.session_id, s))
            .map(Arc::new)
            .collect();
        for frame in &frames {
            projection.apply(frame);
            // No receivers is fine: nobody is watching this session right now.
            let _ = self.tx.send(Outbound::Event(frame.clone()));
        }
        if touches_summary && self.guest.is_none() {
            let summary = serde_json::to_value(projection.summary()).unwrap_or_default();
            if let Err(err) = self
                .store
                .put_summary(&self.key, self.fence, &summary)
                .await
            {
                tracing::warn!(session_id = %self.key.session_id, error = %err, "summary projection not written");
            }
        }
        drop(projection);
        if let Some(memory) = &self.memory {
            memory.record(&frames);
        }
        Ok(frames)
    }

    /// Brings the projection up to the store after a failed append, so a caller can see
    /// whether that append committed after all. A no-op when no append failed.
    pub(crate) async fn resync(&self) -> Result<()> {
        let mut projection = self.projection.lock().await;
        if self.stale.load(Ordering::SeqCst) {
            self.catch_up(&mut projection).await?;
        }
        Ok(())
    }

    /// Applies and broadcasts what the store holds beyond the projection's head, in order.
    async fn catch_up(&self, projection: &mut Projection) -> Result<()> {
        loop {
            let page = self
                .store
                .read(&self.key, projection.head_seq, 1000)
                .await?;
            if page.is_empty() {
                break;
            }
            for stored in &page {
                if let Some(frame) = to_frame(&self.key.session_id, stored) {
                    let frame = Arc::new(frame);
                    projection.apply(&frame);
                    let _ = self.tx.send(Outbound::Event(frame));
                }
            }
            if let Some(last) = page.last() {
                // An event that `to_frame` cannot decode still moves the head past it.
                projection.head_seq = projection.head_seq.max(last.seq);
            }
        }
        self.stale.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// Applies and broadcasts the events between the projection's head and `before`.
    async fn fill_gap(&self, projection: &mut Projection, before: u64) -> Result<()> {
        while projection.head_seq + 1 < before {
            let want = (before - projection.head_seq - 1).min(1000) as usize;
            let page = self
                .store
                .read(&self.key, projection.head_seq, want)
                .await?;
            let Some(last) = page.last() else { break };
            let last = last.seq;
            for stored in page.iter().filter(|s| s.seq < before) {
                if let Some(frame) = to_frame(&self.key.session_id, stored) {
                    let frame = Arc::new(frame);
                    projection.apply(&frame);
                    let _ = self.tx.send(Outbound::Event(frame));
                }
            }
            projection.head_seq = projection.head_seq.max(last.min(before - 1));
        }
        Ok(())
    }

    /// Broadcasts an ephemeral delta (not journaled).
    pub fn send_delta(&self, delta: DeltaFrame) {
        let _ = self.tx.send(Outbound::Delta(Arc::new(delta)));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Outbound> {
        self.tx.subscribe()
    }

    /// Runs `f` on the current projection.
    pub async fn with_projection<R>(&self, f: impl FnOnce(&Projection) -> R) -> R {
        let projection = self.projection.lock().await;
        f(&projection)
    }

    /// Every durable event of one stream, in order.
    pub async fn read_stream(&self, stream: &str) -> Result<Vec<EventFrame>> {
        let mut frames = Vec::new();
        let mut after = 0;
        loop {
            let page = self
                .store
                .read_stream(&self.key, stream, after, 1000)
                .await?;
            let Some(last) = page.last() else { break };
            after = last.stream_seq;
            frames.extend(
                page.iter()
                    .filter_map(|s| to_frame(&self.key.session_id, s)),
            );
        }
        Ok(frames)
    }

    /// Durable events after `after_seq`, at most `limit`.
    pub async fn read(&self, after_seq: u64, limit: usize) -> Result<Vec<EventFrame>> {
        let stored = self.store.read(&self.key, after_seq, limit).await?;
        Ok(stored
            .iter()
            .filter_map(|s| to_frame(&self.key.session_id, s))
            .collect())
    }
}

/// Counts one task another instance writes into the session (see
/// [`SessionJournal::external_writer`]).
pub(crate) struct ExternalWriter(Arc<SessionJournal>);

impl Drop for ExternalWriter {
    fn drop(&mut self) {
        self.0.external.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Decodes a stored event; events of kinds this build does not know are skipped with a warning.
pub fn to_frame(session_id: &str, stored: &StoredEvent) -> Option<EventFrame> {
    match Event::from_parts(&stored.kind, &stored.payload) {
        Ok(event) => Some(EventFrame {
            session_id: session_id.to_string(),
            seq: stored.seq,
            stream: stored.stream.clone(),
            stream_seq: stored.stream_seq,
            ts_ms: stored.ts_ms,
            event,
        }),
        Err(err) => {
            tracing::warn!(session_id, seq = stored.seq, kind = %stored.kind, error = %err, "skipping undecodable event");
            None
        }
    }
}

#[cfg(test)]
mod tests;
