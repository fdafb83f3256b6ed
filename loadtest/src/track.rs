//! One client's view of one session: connect, subscribe, apply events exactly once through
//! [`SessionView`] (gaps backfilled with [`catch_up`]), time every run's first and terminal
//! event, drop and re-establish the connection, and check what was applied against the
//! journal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use lumina_client::protocol::methods::{SessionCreateParams, SessionSubmitParams};
use lumina_client::protocol::{Event, EventFrame};
use lumina_client::{
    catch_up, Client, ClientError, ConnectOptions, Notification, Notifications, Offer, SessionView,
};
use tokio::sync::{Mutex, Notify};
use tokio::task::JoinHandle;

use crate::error::error_kind;
use crate::metrics::{self, Shared};
use crate::target::Target;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Terminal {
    Completed,
    Failed(String),
    Interrupted(String),
}

/// When this client saw a run's events.
#[derive(Debug, Clone, Default)]
pub struct RunTimes {
    pub first_event: Option<Instant>,
    pub terminal: Option<(Instant, Terminal)>,
}

#[derive(Debug, Default)]
struct State {
    view: SessionView,
    /// `(seq, kind)` of every applied event, in application order.
    applied: Vec<(u64, &'static str)>,
    /// Arrival time per seq, when fan-out lag is measured.
    arrivals: Option<HashMap<u64, Instant>>,
    /// Every applied frame in application order, when kept (`chaos` compares them with
    /// the journal in PostgreSQL).
    frames: Option<Vec<EventFrame>>,
    runs: HashMap<String, RunTimes>,
    /// Frames the view refused as already applied (expected after a reconnect).
    wire_duplicates: u64,
    /// Gaps seen (each backfilled with `session.events`).
    gaps: u64,
    closed: bool,
    /// Backfill failures of the pump.
    errors: Vec<String>,
}

impl State {
    fn apply(&mut self, frames: Vec<EventFrame>, at: Instant) {
        for frame in frames {
            self.applied.push((frame.seq, frame.event.kind()));
            if let Some(kept) = &mut self.frames {
                kept.push(frame.clone());
            }
            if let Some(arrivals) = &mut self.arrivals {
                arrivals.insert(frame.seq, at);
            }
            if let Some(run_id) = frame.event.run_id() {
                let run = self.runs.entry(run_id.to_string()).or_default();
                run.first_event.get_or_insert(at);
            }
            let terminal = match &frame.event {
                Event::RunCompleted { run_id, .. } => Some((run_id, Terminal::Completed)),
                Event::RunFailed { run_id, code, .. } => {
                    Some((run_id, Terminal::Failed(code.to_string())))
                }
                Event::RunInterrupted { run_id, reason } => {
                    Some((run_id, Terminal::Interrupted(reason.clone())))
                }
                _ => None,
            };
            if let Some((run_id, terminal)) = terminal {
                if let Some(run) = self.runs.get_mut(run_id.as_str()) {
                    run.terminal.get_or_insert((at, terminal));
                }
            }
        }
    }
}

/// A subscribed client of one session. Cheap to share behind an `Arc`.
pub struct Tracked {
    pub session_id: String,
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    conn: StdMutex<Option<(Client, JoinHandle<()>)>>,
}

/// Connection settings shared by a scenario's clients.
#[derive(Debug, Clone)]
pub struct Connector {
    pub target: Target,
    pub options: ConnectOptions,
    pub client_name: String,
}

impl Connector {
    /// Connects to `url` and says hello, recording [`metrics::CONNECT`] and
    /// [`metrics::HELLO`]; failures are counted under `connect:<kind>`.
    pub async fn connect(
        &self,
        url: &str,
        metrics: &Shared,
    ) -> Result<(Client, Notifications), ClientError> {
        let start = Instant::now();
        let connected = Client::connect_with(url, self.target.bearer(), self.options.clone()).await;
        let (client, notes) = match connected {
            Ok(pair) => pair,
            Err(error) => {
                metrics.error(&format!("connect:{}", error_kind(&error)));
                return Err(error);
            }
        };
        metrics.record(metrics::CONNECT, start.elapsed());
        let hello_start = Instant::now();
        if let Err(error) = client.hello(&self.client_name).await {
            metrics.error(&format!("hello:{}", error_kind(&error)));
            return Err(error);
        }
        metrics.record(metrics::HELLO, hello_start.elapsed());
        Ok((client, notes))
    }
}

/// Locks a std mutex whose data stays valid on poisoning (single assignments only).
fn lock<T>(m: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Tracked {
    /// Creates a session through `client` (in `project_root`, or the server's default).
    pub async fn create_session(
        client: &Client,
        project_root: Option<&str>,
        title: &str,
    ) -> Result<String, ClientError> {
        let info = client
            .session_create(&SessionCreateParams {
                project_root: project_root.map(str::to_string),
                title: Some(title.to_string()),
            })
            .await?;
        Ok(info.id)
    }

    /// Subscribes `client` to `session_id` from seq 0 and starts applying its events.
    pub async fn subscribe(
        client: Client,
        notes: Notifications,
        session_id: &str,
        record_arrivals: bool,
    ) -> Result<Tracked, ClientError> {
        Self::subscribe_with(client, notes, session_id, record_arrivals, false).await
    }

    /// [`Tracked::subscribe`], keeping every applied frame ([`Tracked::frames`]).
    pub async fn subscribe_keeping_frames(
        client: Client,
        notes: Notifications,
        session_id: &str,
    ) -> Result<Tracked, ClientError> {
        Self::subscribe_with(client, notes, session_id, false, true).await
    }

    async fn subscribe_with(
        client: Client,
        notes: Notifications,
        session_id: &str,
        record_arrivals: bool,
        keep_frames: bool,
    ) -> Result<Tracked, ClientError> {
        let tracked = Tracked {
            session_id: session_id.to_string(),
            state: Arc::new(Mutex::new(State {
                arrivals: record_arrivals.then(HashMap::new),
                frames: keep_frames.then(Vec::new),
                ..State::default()
            })),
            changed: Arc::new(Notify::new()),
            conn: StdMutex::new(None),
        };
        client.session_resume(session_id, 0).await?;
        tracked.start_pump(client, notes);
        Ok(tracked)
    }

    fn start_pump(&self, client: Client, notes: Notifications) {
        let pump = tokio::spawn(pump(
            self.session_id.clone(),
            client.clone(),
            notes,
            Arc::clone(&self.state),
            Arc::clone(&self.changed),
        ));
        let old = lock(&self.conn).replace((client, pump));
        if let Some((client, pump)) = old {
            client.close();
            pump.abort();
        }
    }

    /// The current connection (`None` after [`Tracked::kill`]).
    pub fn client(&self) -> Option<Client> {
        lock(&self.conn).as_ref().map(|(c, _)| c.clone())
    }

    /// Submits `prompt` (headless, fresh idempotency key) and records
    /// [`metrics::SUBMIT_ACK`]. Returns the run id and the instant the submit was sent.
    pub async fn submit(
        &self,
        prompt: &str,
        metrics: &Shared,
    ) -> Result<(String, Instant), ClientError> {
        let Some(client) = self.client() else {
            metrics.error("submit:closed");
            return Err(ClientError::Closed);
        };
        let params = submit_params(&self.session_id, prompt);
        let sent = Instant::now();
        match client.session_submit(&params).await {
            Ok(result) => {
                metrics.record(metrics::SUBMIT_ACK, sent.elapsed());
                Ok((result.run_id, sent))
            }
            Err(error) => {
                metrics.error(&format!("submit:{}", error_kind(&error)));
                Err(error)
            }
        }
    }

    /// Waits until `check` holds on the state or `deadline` passes.
    async fn wait_for<T>(
        &self,
        deadline: Instant,
        mut check: impl FnMut(&State) -> Option<T>,
    ) -> Option<T> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.state.lock().await;
                if let Some(value) = check(&state) {
                    return Some(value);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, notified).await.is_err() {
                let state = self.state.lock().await;
                return check(&state);
            }
        }
    }

    /// The run's times once its terminal event was applied, or `None` at `deadline`.
    pub async fn wait_terminal(&self, run_id: &str, deadline: Instant) -> Option<RunTimes> {
        self.wait_for(deadline, |s| {
            s.runs.get(run_id).filter(|r| r.terminal.is_some()).cloned()
        })
        .await
    }

    /// The run's times once its first event was applied, or `None` at `deadline`.
    pub async fn wait_first_event(&self, run_id: &str, deadline: Instant) -> Option<RunTimes> {
        self.wait_for(deadline, |s| {
            s.runs
                .get(run_id)
                .filter(|r| r.first_event.is_some())
                .cloned()
        })
        .await
    }

    /// Whether everything up to `seq` was applied by `deadline`.
    pub async fn wait_seq(&self, seq: u64, deadline: Instant) -> bool {
        self.wait_for(deadline, |s| (s.view.last_seq() >= seq).then_some(()))
            .await
            .is_some()
    }

    /// Drops the connection (client-side close) and stops applying its events.
    pub async fn kill(&self) {
        let old = lock(&self.conn).take();
        if let Some((client, pump)) = old {
            client.close();
            // The pump ends on the connection's last notification, `Closed`.
            let mut pump = pump;
            if tokio::time::timeout(Duration::from_secs(3), &mut pump)
                .await
                .is_err()
            {
                pump.abort();
            }
        }
    }

    /// Connects again, resumes after the last applied seq and backfills up to the head the
    /// server reported, recording [`metrics::RECONNECT_BACKFILL`].
    pub async fn reconnect(
        &self,
        connector: &Connector,
        url: &str,
        metrics: &Shared,
        deadline: Instant,
    ) -> Result<(), ClientError> {
        let start = Instant::now();
        let (client, notes) = connector.connect(url, metrics).await?;
        let head = {
            let mut state = self.state.lock().await;
            let after = state.view.last_seq();
            let resumed = match client.session_resume(&self.session_id, after).await {
                Ok(resumed) => resumed,
                Err(error) => {
                    metrics.error(&format!("resume:{}", error_kind(&error)));
                    return Err(error);
                }
            };
            // Pull the gap explicitly; the resume backlog then arrives as duplicates.
            let frames = match catch_up(&client, &self.session_id, &mut state.view).await {
                Ok(frames) => frames,
                Err(error) => {
                    metrics.error(&format!("backfill:{}", error_kind(&error)));
                    return Err(error);
                }
            };
            state.apply(frames, Instant::now());
            state.closed = false;
            resumed.head_seq
        };
        self.start_pump(client, notes);
        self.changed.notify_waiters();
        if self.wait_seq(head, deadline).await {
            metrics.record(metrics::RECONNECT_BACKFILL, start.elapsed());
            Ok(())
        } else {
            metrics.error("backfill:incomplete");
            Err(ClientError::Timeout)
        }
    }

    /// Arrival times by seq (empty unless created with `record_arrivals`).
    pub async fn arrivals(&self) -> HashMap<u64, Instant> {
        self.state.lock().await.arrivals.clone().unwrap_or_default()
    }

    /// Whether this client has applied the run's terminal event.
    pub async fn has_ended(&self, run_id: &str) -> bool {
        let state = self.state.lock().await;
        state.runs.get(run_id).is_some_and(|r| r.terminal.is_some())
    }

    /// Every applied frame in order (empty unless subscribed keeping frames).
    pub async fn frames(&self) -> Vec<EventFrame> {
        self.state.lock().await.frames.clone().unwrap_or_default()
    }

    /// Errors of the pump (failed backfills) so far.
    pub async fn pump_errors(&self) -> Vec<String> {
        self.state.lock().await.errors.clone()
    }

    /// Frames refused as duplicates and gaps backfilled so far.
    pub async fn wire_stats(&self) -> (u64, u64) {
        let state = self.state.lock().await;
        (state.wire_duplicates, state.gaps)
    }

    /// Compares what this client applied with the journal, read through `client`.
    pub async fn verify(&self, client: &Client) -> Result<Verification, ClientError> {
        let mut journal_view = SessionView::new(0);
        let journal = catch_up(client, &self.session_id, &mut journal_view).await?;
        let state = self.state.lock().await;
        let mut problems = state.errors.clone();
        let mut seen: HashMap<u64, u32> = HashMap::new();
        let mut out_of_order = 0u64;
        let mut last = 0u64;
        for (seq, _) in &state.applied {
            *seen.entry(*seq).or_default() += 1;
            if *seq <= last {
                out_of_order += 1;
            }
            last = *seq;
        }
        let duplicated = seen.values().filter(|n| **n > 1).count() as u64;
        let applied_kinds: HashMap<u64, &'static str> = state.applied.iter().copied().collect();
        let mut lost = 0u64;
        let mut mismatched = 0u64;
        for frame in &journal {
            match applied_kinds.get(&frame.seq) {
                None => lost += 1,
                Some(kind) if *kind != frame.event.kind() => mismatched += 1,
                Some(_) => {}
            }
        }
        let head = journal.last().map(|f| f.seq).unwrap_or(0);
        let unknown = state.applied.iter().filter(|(s, _)| *s > head).count() as u64;
        if lost > 0 {
            problems.push(format!("{lost} journal events never applied"));
        }
        if duplicated > 0 {
            problems.push(format!("{duplicated} events applied twice"));
        }
        if out_of_order > 0 {
            problems.push(format!("{out_of_order} events applied out of order"));
        }
        if mismatched > 0 || unknown > 0 {
            problems.push(format!(
                "{mismatched} events differ from the journal, {unknown} are not in it"
            ));
        }
        let runs = journal_runs(&journal);
        Ok(Verification {
            events: journal.len() as u64,
            lost,
            duplicated,
            out_of_order,
            mismatched: mismatched + unknown,
            runs,
            problems,
        })
    }
}

/// What [`Tracked::verify`] found for one client of one session.
#[derive(Debug, Clone, Default)]
pub struct Verification {
    pub events: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub out_of_order: u64,
    pub mismatched: u64,
    /// Per run id in the journal: how often it was queued, started and ended.
    pub runs: HashMap<String, RunEvents>,
    pub problems: Vec<String>,
}

/// One run's lifecycle events in a journal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunEvents {
    /// `run.queued` (a follow-up accepted behind other runs).
    pub queued: u32,
    /// `run.started`.
    pub started: u32,
    /// `run.completed`, `run.failed` or `run.interrupted`.
    pub ended: u32,
}

/// How a submitted run stands in the journal once the load has stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunShape {
    /// Started once and ended once, or queued once and cancelled before it started.
    WellFormed,
    /// Accepted (queued or started once) and not ended yet: slow, not wrong.
    Unfinished,
    /// Anything else: counted twice, ended without being accepted, …
    Malformed,
}

impl RunEvents {
    pub fn shape(&self) -> RunShape {
        match (self.queued, self.started, self.ended) {
            (0 | 1, 1, 1) | (1, 0, 1) => RunShape::WellFormed,
            (0 | 1, 1, 0) | (1, 0, 0) => RunShape::Unfinished,
            _ => RunShape::Malformed,
        }
    }
}

fn journal_runs(journal: &[EventFrame]) -> HashMap<String, RunEvents> {
    let mut runs: HashMap<String, RunEvents> = HashMap::new();
    for frame in journal.iter().filter(|f| f.stream == "main") {
        match &frame.event {
            Event::RunQueued { run_id, .. } => runs.entry(run_id.clone()).or_default().queued += 1,
            Event::RunStarted { run_id, .. } => {
                runs.entry(run_id.clone()).or_default().started += 1
            }
            Event::RunCompleted { run_id, .. }
            | Event::RunFailed { run_id, .. }
            | Event::RunInterrupted { run_id, .. } => {
                runs.entry(run_id.clone()).or_default().ended += 1
            }
            _ => {}
        }
    }
    runs
}

/// `session.submit` params: a fresh idempotency key, headless (nobody answers permission
/// requests during a load test).
pub fn submit_params(session_id: &str, prompt: &str) -> SessionSubmitParams {
    SessionSubmitParams {
        session_id: session_id.to_string(),
        idempotency_key: uuid::Uuid::new_v4().to_string(),
        prompt: prompt.to_string(),
        settings: serde_json::Value::Null,
        headless: true,
        mode: None,
    }
}

async fn pump(
    session_id: String,
    client: Client,
    mut notes: Notifications,
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
) {
    while let Some(note) = notes.recv().await {
        let at = Instant::now();
        match note {
            Notification::Event(frame) if frame.session_id == session_id => {
                let mut guard = state.lock().await;
                let state = &mut *guard;
                match state.view.offer(frame) {
                    Offer::Ready(frames) => state.apply(frames, at),
                    Offer::Duplicate => state.wire_duplicates += 1,
                    Offer::Gap { .. } => {
                        state.gaps += 1;
                        match catch_up(&client, &session_id, &mut state.view).await {
                            Ok(frames) => state.apply(frames, at),
                            Err(error) => state.errors.push(format!("backfill failed: {error}")),
                        }
                    }
                }
                drop(guard);
                changed.notify_waiters();
            }
            Notification::Closed(_) => break,
            _ => {}
        }
    }
    state.lock().await.closed = true;
    changed.notify_waiters();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(events: Vec<Event>) -> Vec<EventFrame> {
        events
            .into_iter()
            .enumerate()
            .map(|(k, event)| EventFrame {
                session_id: "s".into(),
                seq: k as u64 + 1,
                stream: "main".into(),
                stream_seq: k as u64 + 1,
                ts_ms: 0,
                event,
            })
            .collect()
    }

    fn queued(run: &str) -> Event {
        Event::RunQueued {
            run_id: run.into(),
            idempotency_key: run.into(),
            prompt: String::new(),
            mode: "followup".into(),
            headless: true,
        }
    }

    fn started(run: &str) -> Event {
        Event::RunStarted {
            run_id: run.into(),
            idempotency_key: run.into(),
            model: "scripted".into(),
        }
    }

    fn interrupted(run: &str) -> Event {
        Event::RunInterrupted {
            run_id: run.into(),
            reason: "user".into(),
        }
    }

    #[test]
    fn queued_runs_count_as_accepted_and_a_cancelled_follow_up_is_well_formed() {
        let runs = journal_runs(&frames(vec![
            started("a"),
            queued("b"),
            queued("c"),
            interrupted("a"),
            started("b"),
            interrupted("c"),
            queued("d"),
        ]));
        assert_eq!(runs["a"].shape(), RunShape::WellFormed);
        assert_eq!(
            runs["b"].shape(),
            RunShape::Unfinished,
            "started, not ended"
        );
        assert_eq!(
            runs["c"].shape(),
            RunShape::WellFormed,
            "cancelled while queued"
        );
        assert_eq!(runs["d"].shape(), RunShape::Unfinished, "still queued");
        assert!(!runs.contains_key("e"));
    }

    #[test]
    fn twice_started_or_ended_without_being_accepted_is_malformed() {
        let runs = journal_runs(&frames(vec![
            started("a"),
            started("a"),
            interrupted("b"),
            queued("c"),
            queued("c"),
        ]));
        for run in ["a", "b", "c"] {
            assert_eq!(runs[run].shape(), RunShape::Malformed, "{run}");
        }
    }
}
