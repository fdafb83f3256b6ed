//! The journal throughput benchmark behind `lumina-backend bench journal`: single-event
//! appends, batched appends and a full replay against any [`JournalStore`]. Timing is
//! reported, never asserted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{
    now_ms, AppendBatch, Error, JournalStore, NewEvent, Result, SessionKey, SessionRecord,
    LOCAL_FENCE,
};

/// The tenant the benchmark writes to; the store must serve it. Benchmarks create
/// sessions, so point them at a scratch store rather than a user's journal.
pub const BENCH_TENANT: &str = "bench";

/// Events read per call during the replay phase.
pub const REPLAY_PAGE: usize = 1000;

/// One timed phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseReport {
    /// Events written or read.
    pub events: u64,
    /// Wall-clock time of the phase.
    pub elapsed_ms: f64,
    /// `events / elapsed`.
    pub events_per_s: f64,
}

impl PhaseReport {
    fn new(events: usize, elapsed: Duration) -> Self {
        let secs = elapsed.as_secs_f64();
        Self {
            events: events as u64,
            elapsed_ms: secs * 1000.0,
            events_per_s: if secs > 0.0 {
                events as f64 / secs
            } else {
                0.0
            },
        }
    }
}

/// What [`run`] measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// Events per phase.
    pub events: u64,
    /// Events per append in the batched phase.
    pub batch: u64,
    /// Approximate JSON size of each payload.
    pub payload_bytes: u64,
    /// One append (one transaction) per event.
    pub single_append: PhaseReport,
    /// `batch` events per append.
    pub batched_append: PhaseReport,
    /// Reading the batched session back in pages of [`REPLAY_PAGE`].
    pub replay: PhaseReport,
    /// The sessions the benchmark created (tenant [`BENCH_TENANT`]).
    pub sessions: Vec<String>,
}

/// Appends `events` events one per transaction, then `events` events in batches of `batch`,
/// then replays the batched session, each payload about `payload_bytes` of JSON. Creates
/// two sessions in tenant [`BENCH_TENANT`].
pub async fn run(
    store: Arc<dyn JournalStore>,
    events: usize,
    batch: usize,
    payload_bytes: usize,
) -> Result<BenchReport> {
    let batch = batch.max(1);
    let stamp = format!("{}-{}", now_ms(), std::process::id());
    let payload = json!({ "text": "x".repeat(payload_bytes.saturating_sub(12)) });
    let event = NewEvent {
        kind: "bench".into(),
        payload,
    };

    let single = create(&*store, &format!("bench-single-{stamp}")).await?;
    let started = Instant::now();
    for _ in 0..events {
        store
            .append(
                &single,
                LOCAL_FENCE,
                AppendBatch::any("bench", vec![event.clone()]),
            )
            .await?;
    }
    let single_append = PhaseReport::new(events, started.elapsed());

    let batched = create(&*store, &format!("bench-batched-{stamp}")).await?;
    let started = Instant::now();
    let mut remaining = events;
    while remaining > 0 {
        let n = remaining.min(batch);
        store
            .append(
                &batched,
                LOCAL_FENCE,
                AppendBatch::any("bench", vec![event.clone(); n]),
            )
            .await?;
        remaining -= n;
    }
    let batched_append = PhaseReport::new(events, started.elapsed());

    let started = Instant::now();
    let mut replayed = 0;
    let mut after = 0;
    loop {
        let page = store.read(&batched, after, REPLAY_PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        replayed += page.len();
    }
    let replay = PhaseReport::new(replayed, started.elapsed());
    if replayed != events {
        return Err(Error::Corrupt(format!(
            "replay returned {replayed} events, {events} were appended"
        )));
    }

    Ok(BenchReport {
        events: events as u64,
        batch: batch as u64,
        payload_bytes: payload_bytes as u64,
        single_append,
        batched_append,
        replay,
        sessions: vec![single.session_id, batched.session_id],
    })
}

async fn create(store: &dyn JournalStore, id: &str) -> Result<SessionKey> {
    let now = now_ms();
    let record = SessionRecord {
        tenant: BENCH_TENANT.into(),
        session_id: id.into(),
        title: "journal benchmark".into(),
        project_root: String::new(),
        created_at_ms: now,
        updated_at_ms: now,
        archived: false,
        summary: serde_json::Value::Null,
    };
    store.create_session(&record, LOCAL_FENCE).await?;
    Ok(record.key())
}
