//! The invariants of a trial, checked against PostgreSQL (the journal is the source of
//! truth), not against what any instance says:
//!
//! - no acknowledged run lost: every submit that returned success has its `run.started`
//!   (with the acknowledged run id, which `command_results` records for the key too) and
//!   a terminal event of that run after it;
//! - no duplicate run: at most one `run.started` per idempotency key;
//! - no stale-fence write: fences never decrease along seq, none is above the session's
//!   recorded fence, and every event committed after a sample of `(head_seq, fence)` (a
//!   sampler reads both in one snapshot throughout the trial, so it also sees claims that
//!   wrote no event) carries at least that fence;
//! - every client's exactly-once view equals the journal: the same frames (seq, stream,
//!   stream seq, time, event), in order, none twice, none missing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lumina_client::protocol::{Event, EventFrame};
use tokio_postgres::NoTls;

use crate::error::HarnessError;

/// Reads the journal of one tenant.
#[derive(Debug, Clone)]
pub(crate) struct Journal {
    url: String,
    tenant: String,
}

/// One journal row.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub fence: u64,
    /// The row as a client gets it; `None` when the payload does not decode (the server
    /// skips such rows too).
    pub frame: Option<EventFrame>,
    pub seq: u64,
    pub kind: String,
}

/// `(head_seq, fence)` of a session read in one snapshot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub head_seq: u64,
    pub fence: u64,
}

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl Journal {
    pub fn new(url: &str, tenant: &str) -> Journal {
        Journal {
            url: url.to_string(),
            tenant: tenant.to_string(),
        }
    }

    pub async fn connect(&self) -> Result<tokio_postgres::Client, HarnessError> {
        let connecting = tokio_postgres::connect(&self.url, NoTls);
        let (client, connection) = tokio::time::timeout(Duration::from_secs(5), connecting)
            .await
            .map_err(|_| HarnessError::Timeout("connecting to PostgreSQL".into()))?
            .map_err(|source| HarnessError::Postgres {
                what: "connecting to PostgreSQL",
                source,
            })?;
        tokio::spawn(connection);
        Ok(client)
    }

    /// Every row of a session, by seq.
    pub async fn events(
        &self,
        c: &tokio_postgres::Client,
        session: &str,
    ) -> Result<Vec<Row>, HarnessError> {
        let rows = c
            .query(
                "SELECT e.seq, e.stream, e.stream_seq, e.fence, e.kind, e.payload, e.ts_ms,
                        (SELECT b.bytes FROM blobs b
                          WHERE b.tenant = e.tenant AND b.sha256 = e.blob_sha256)
                   FROM events e
                  WHERE e.tenant = $1 AND e.session_id = $2
                  ORDER BY e.seq",
                &[&self.tenant, &session],
            )
            .await
            .map_err(|source| HarnessError::Postgres {
                what: "reading events",
                source,
            })?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let seq = u(row.get(0));
            let kind: String = row.get(4);
            let payload: Option<serde_json::Value> = row.get(5);
            let blob: Option<Vec<u8>> = row.get(7);
            let payload = payload.or_else(|| blob.and_then(|b| serde_json::from_slice(&b).ok()));
            let frame = payload
                .and_then(|p| Event::from_parts(&kind, &p).ok())
                .map(|event| EventFrame {
                    session_id: session.to_string(),
                    seq,
                    stream: row.get(1),
                    stream_seq: u(row.get(2)),
                    ts_ms: row.get(6),
                    event,
                });
            out.push(Row {
                fence: u(row.get(3)),
                frame,
                seq,
                kind,
            });
        }
        Ok(out)
    }

    /// `idempotency key → run id` of a session's command results.
    pub async fn command_results(
        &self,
        c: &tokio_postgres::Client,
        session: &str,
    ) -> Result<HashMap<String, String>, HarnessError> {
        let rows = c
            .query(
                "SELECT key, result->>'run_id' FROM command_results
                  WHERE tenant = $1 AND session_id = $2",
                &[&self.tenant, &session],
            )
            .await
            .map_err(|source| HarnessError::Postgres {
                what: "reading command results",
                source,
            })?;
        Ok(rows
            .iter()
            .map(|r| {
                let run: Option<String> = r.get(1);
                (r.get(0), run.unwrap_or_default())
            })
            .collect())
    }

    /// The recorded fence of a session.
    pub async fn fence(
        &self,
        c: &tokio_postgres::Client,
        session: &str,
    ) -> Result<u64, HarnessError> {
        let row = c
            .query_opt(
                "SELECT fence FROM session_fences WHERE tenant = $1 AND session_id = $2",
                &[&self.tenant, &session],
            )
            .await
            .map_err(|source| HarnessError::Postgres {
                what: "reading the fence",
                source,
            })?;
        Ok(row.map(|r| u(r.get(0))).unwrap_or(0))
    }

    /// `(head_seq, fence)` of each session, in one snapshot.
    pub async fn sample(
        &self,
        c: &tokio_postgres::Client,
        sessions: &[String],
    ) -> Result<Vec<(String, Sample)>, HarnessError> {
        let rows = c
            .query(
                "SELECT s.session_id, s.head_seq, f.fence
                   FROM sessions s JOIN session_fences f USING (tenant, session_id)
                  WHERE s.tenant = $1 AND s.session_id = ANY($2)",
                &[&self.tenant, &sessions],
            )
            .await
            .map_err(|source| HarnessError::Postgres {
                what: "sampling fences",
                source,
            })?;
        Ok(rows
            .iter()
            .map(|r| {
                (
                    r.get(0),
                    Sample {
                        head_seq: u(r.get(1)),
                        fence: u(r.get(2)),
                    },
                )
            })
            .collect())
    }
}

/// Samples `(head_seq, fence)` of the trial's sessions every 100 ms until dropped
/// (reconnecting while PostgreSQL is down).
pub(crate) struct Sampler {
    pub samples: Arc<Mutex<HashMap<String, Vec<Sample>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    pub fn start(journal: Journal, sessions: Vec<String>) -> Sampler {
        let samples: Arc<Mutex<HashMap<String, Vec<Sample>>>> = Arc::default();
        let shared = samples.clone();
        let task = tokio::spawn(async move {
            let mut client = None;
            loop {
                if client.is_none() {
                    client = journal.connect().await.ok();
                }
                if let Some(c) = &client {
                    match journal.sample(c, &sessions).await {
                        Ok(rows) => {
                            let mut map = shared.lock().unwrap_or_else(|p| p.into_inner());
                            for (session, sample) in rows {
                                map.entry(session).or_default().push(sample);
                            }
                        }
                        Err(_) => client = None,
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Sampler { samples, task }
    }

    pub fn taken(&self) -> HashMap<String, Vec<Sample>> {
        self.samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Per run id of the main stream: seq of `run.started` (each), `run.queued`, terminal.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    pub started: HashMap<String, Vec<u64>>,
    pub queued: HashMap<String, u64>,
    pub terminal: HashMap<String, Vec<u64>>,
    /// `run.started` seqs per idempotency key.
    pub by_key: HashMap<String, Vec<(u64, String)>>,
}

pub(crate) fn runs(rows: &[Row]) -> Runs {
    let mut runs = Runs::default();
    for row in rows {
        let Some(frame) = &row.frame else { continue };
        if frame.stream != "main" {
            continue;
        }
        match &frame.event {
            Event::RunStarted {
                run_id,
                idempotency_key,
                ..
            } => {
                runs.started
                    .entry(run_id.clone())
                    .or_default()
                    .push(row.seq);
                runs.by_key
                    .entry(idempotency_key.clone())
                    .or_default()
                    .push((row.seq, run_id.clone()));
            }
            Event::RunQueued { run_id, .. } => {
                runs.queued.insert(run_id.clone(), row.seq);
            }
            Event::RunCompleted { run_id, .. }
            | Event::RunFailed { run_id, .. }
            | Event::RunInterrupted { run_id, .. } => {
                runs.terminal
                    .entry(run_id.clone())
                    .or_default()
                    .push(row.seq);
            }
            _ => {}
        }
    }
    runs
}

/// Whether every run the journal started or queued has ended (the session is idle).
pub(crate) fn idle(runs: &Runs) -> bool {
    runs.started
        .keys()
        .chain(runs.queued.keys())
        .all(|run| runs.terminal.contains_key(run))
}

/// An acknowledged submit.
#[derive(Debug, Clone)]
pub(crate) struct Acked {
    pub key: String,
    pub run_id: String,
}

/// Checks one session; the violations found.
pub(crate) fn check_session(
    session: &str,
    rows: &[Row],
    recorded_fence: u64,
    results: &HashMap<String, String>,
    samples: &[Sample],
    acked: &[Acked],
    views: &[Vec<EventFrame>],
) -> Vec<String> {
    let mut v = Vec::new();
    let runs = runs(rows);
    for a in acked {
        let started = runs
            .started
            .get(&a.run_id)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        match started {
            [] => v.push(format!(
                "session {session}: acknowledged run {} (key {}) has no run.started{}",
                a.run_id,
                a.key,
                if runs.queued.contains_key(&a.run_id) {
                    " (it was queued and ended before it started)"
                } else {
                    ""
                }
            )),
            [seq] => match runs.terminal.get(&a.run_id).map(Vec::as_slice) {
                Some([end]) if end > seq => {}
                Some(ends) => v.push(format!(
                    "session {session}: run {} started at seq {seq} has terminal events at {ends:?}",
                    a.run_id
                )),
                None => v.push(format!(
                    "session {session}: acknowledged run {} never reached a terminal event",
                    a.run_id
                )),
            },
            many => v.push(format!(
                "session {session}: run {} has {} run.started events",
                a.run_id,
                many.len()
            )),
        }
        match results.get(&a.key) {
            Some(run) if *run == a.run_id => {}
            other => v.push(format!(
                "session {session}: command result of key {} is {other:?}, the submit acknowledged run {}",
                a.key, a.run_id
            )),
        }
    }
    for (key, starts) in &runs.by_key {
        if starts.len() > 1 {
            v.push(format!(
                "session {session}: duplicate run: key {key} has {} run.started events {starts:?}",
                starts.len()
            ));
        }
    }
    let mut last = 0u64;
    for row in rows {
        if row.fence < last {
            v.push(format!(
                "session {session}: stale fence: seq {} ({}) written with fence {} after fence {last}",
                row.seq, row.kind, row.fence
            ));
        }
        last = last.max(row.fence);
    }
    if last > recorded_fence {
        v.push(format!(
            "session {session}: events carry fence {last} above the recorded fence {recorded_fence}"
        ));
    }
    for sample in samples {
        if let Some(row) = rows
            .iter()
            .find(|r| r.seq > sample.head_seq && r.fence < sample.fence)
        {
            v.push(format!(
                "session {session}: stale fence: seq {} ({}) committed with fence {} after fence {} was recorded at head seq {}",
                row.seq, row.kind, row.fence, sample.fence, sample.head_seq
            ));
        }
    }
    let journal: Vec<&EventFrame> = rows.iter().filter_map(|r| r.frame.as_ref()).collect();
    for (k, view) in views.iter().enumerate() {
        if let Some(problem) = compare_view(&journal, view) {
            v.push(format!("session {session}: client {k}: {problem}"));
        }
    }
    v.sort();
    v.dedup();
    v
}

/// How a client's applied frames differ from the journal, if they do.
fn compare_view(journal: &[&EventFrame], view: &[EventFrame]) -> Option<String> {
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for f in view {
        *seen.entry(f.seq).or_default() += 1;
    }
    let twice = seen.values().filter(|n| **n > 1).count();
    let missing = journal
        .iter()
        .filter(|f| !seen.contains_key(&f.seq))
        .count();
    let in_journal: std::collections::HashSet<u64> = journal.iter().map(|f| f.seq).collect();
    let extra = view.iter().filter(|f| !in_journal.contains(&f.seq)).count();
    let differing = journal
        .iter()
        .filter(|f| view.iter().any(|g| g.seq == f.seq && g != **f))
        .count();
    let in_order = view.windows(2).all(|w| w[0].seq < w[1].seq);
    if twice == 0 && missing == 0 && extra == 0 && differing == 0 && in_order {
        return None;
    }
    Some(format!(
        "view differs from the journal: {missing} missing, {twice} applied twice, {differing} \
         different, {extra} not in the journal, in order: {in_order} ({} applied, {} in the journal)",
        view.len(),
        journal.len()
    ))
}

/// Waits until every run of every session has ended in the journal; `false` at the deadline.
pub(crate) async fn wait_idle(journal: &Journal, sessions: &[String], deadline: Instant) -> bool {
    loop {
        let mut all = true;
        match journal.connect().await {
            Ok(c) => {
                for s in sessions {
                    match journal.events(&c, s).await {
                        Ok(rows) if idle(&runs(&rows)) => {}
                        _ => all = false,
                    }
                }
            }
            Err(_) => all = false,
        }
        if all {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, fence: u64, event: Event) -> Row {
        Row {
            fence,
            seq,
            kind: event.kind().to_string(),
            frame: Some(EventFrame {
                session_id: "s".into(),
                seq,
                stream: "main".into(),
                stream_seq: seq,
                ts_ms: 1,
                event,
            }),
        }
    }

    fn started(run: &str, key: &str) -> Event {
        Event::RunStarted {
            run_id: run.into(),
            idempotency_key: key.into(),
            model: "m".into(),
        }
    }

    fn ended(run: &str) -> Event {
        Event::RunInterrupted {
            run_id: run.into(),
            reason: "x".into(),
        }
    }

    #[test]
    fn finds_each_kind_of_violation() {
        let rows = vec![
            row(1, 2, started("r1", "k1")),
            row(2, 2, ended("r1")),
            row(3, 1, started("r2", "k1")),
            row(4, 3, ended("r2")),
        ];
        let results = HashMap::from([("k1".to_string(), "r1".to_string())]);
        let acked = vec![
            Acked {
                key: "k1".into(),
                run_id: "r1".into(),
            },
            Acked {
                key: "k9".into(),
                run_id: "r9".into(),
            },
        ];
        let samples = [Sample {
            head_seq: 3,
            fence: 4,
        }];
        let view: Vec<EventFrame> = rows[..3].iter().filter_map(|r| r.frame.clone()).collect();
        let v = check_session("s", &rows, 3, &results, &samples, &acked, &[view]);
        let text = v.join("\n");
        assert!(text.contains("duplicate run: key k1"), "{text}");
        assert!(text.contains("stale fence: seq 3"), "{text}");
        assert!(text.contains("r9 (key k9) has no run.started"), "{text}");
        assert!(
            text.contains("committed with fence 3 after fence 4"),
            "{text}"
        );
        assert!(text.contains("1 missing"), "{text}");
    }

    #[test]
    fn a_clean_session_has_none() {
        let rows = vec![
            row(1, 1, started("r1", "k1")),
            row(2, 1, ended("r1")),
            row(3, 2, started("r2", "k2")),
            row(4, 2, ended("r2")),
        ];
        let results = HashMap::from([
            ("k1".to_string(), "r1".to_string()),
            ("k2".to_string(), "r2".to_string()),
        ]);
        let acked = vec![Acked {
            key: "k2".into(),
            run_id: "r2".into(),
        }];
        let samples = [Sample {
            head_seq: 2,
            fence: 2,
        }];
        let view: Vec<EventFrame> = rows.iter().filter_map(|r| r.frame.clone()).collect();
        let v = check_session("s", &rows, 2, &results, &samples, &acked, &[view]);
        assert!(v.is_empty(), "{v:?}");
        assert!(idle(&runs(&rows)));
    }
}
