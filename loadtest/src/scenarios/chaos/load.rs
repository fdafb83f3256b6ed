//! The load of a trial: a few sessions, each created through one gateway and driven
//! through another (so every gateway forwards to owners and every owner serves forwarded
//! requests), each submitting steadily — a submit every interval while fewer than
//! `max_in_flight` of its runs are unfinished, fast and slow answers alternating so runs
//! are in flight when the fault hits. A failed submit is retried with the same idempotency
//! key and request id until the submit timeout; a connection that closes or stops
//! answering is replaced by one to the next gateway (resumed after the last applied seq,
//! gap backfilled), so each client's exactly-once view goes on across the fault.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lumina_client::ClientError;

use super::super::{Ctx, SLOW_MARKER};
use crate::error::{error_kind, is_transient, HarnessError};
use crate::metrics::{self, Shared};
use crate::track::{submit_params, Tracked};

/// How the load behaves.
#[derive(Debug, Clone)]
pub(crate) struct LoadSettings {
    pub interval: Duration,
    pub max_in_flight: usize,
    /// One attempt may take this long before the connection is replaced.
    pub attempt_timeout: Duration,
    /// A submit is given up after this long, retries included.
    pub submit_timeout: Duration,
}

/// One submit as the client saw it.
#[derive(Debug, Clone)]
pub(crate) struct Submit {
    pub key: String,
    pub run_id: Option<String>,
    pub attempts: u32,
    /// When the successful attempt was sent, and when its ack arrived.
    pub acked: Option<(Instant, Instant)>,
    pub error: Option<String>,
}

/// A session under load.
pub(crate) struct LoadSession {
    pub session_id: String,
    pub client: Arc<Tracked>,
    /// The gateway (URL index) the client is on now.
    gateway: AtomicUsize,
    pub submits: Mutex<Vec<Submit>>,
}

impl LoadSession {
    pub fn submits(&self) -> Vec<Submit> {
        self.submits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Acknowledgements of attempts sent at or after `since`, earliest first.
    pub fn first_ack_since(&self, since: Instant) -> Option<Instant> {
        self.submits()
            .iter()
            .filter_map(|s| s.acked)
            .filter(|(sent, _)| *sent >= since)
            .map(|(_, at)| at)
            .min()
    }

    pub fn acked_count(&self) -> usize {
        self.submits().iter().filter(|s| s.acked.is_some()).count()
    }
}

/// Sessions and their submitting tasks.
pub(crate) struct Load {
    pub sessions: Vec<Arc<LoadSession>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Creates session `j` through gateway `(first + j) % n` and subscribes its client on the
/// next gateway.
pub(crate) async fn open(
    ctx: &Ctx,
    scratch: &Shared,
    urls: &[String],
    first: usize,
    count: usize,
) -> Result<Vec<Arc<LoadSession>>, HarnessError> {
    let n = urls.len();
    let mut sessions = Vec::new();
    for j in 0..count {
        let creator = (first + j) % n;
        let (client, _notes) = ctx
            .connector
            .connect(&urls[creator], scratch)
            .await
            .map_err(|source| HarnessError::Client {
                what: format!("connecting to gateway {creator}"),
                source,
            })?;
        let session =
            Tracked::create_session(&client, ctx.common.project_root.as_deref(), "chaos").await;
        client.close();
        let session_id = session.map_err(|source| HarnessError::Client {
            what: "creating a session".into(),
            source,
        })?;
        let via = (creator + 1) % n;
        let (client, notes) =
            ctx.connector
                .connect(&urls[via], scratch)
                .await
                .map_err(|source| HarnessError::Client {
                    what: format!("connecting to gateway {via}"),
                    source,
                })?;
        let tracked = Tracked::subscribe_keeping_frames(client, notes, &session_id)
            .await
            .map_err(|source| HarnessError::Client {
                what: "subscribing".into(),
                source,
            })?;
        sessions.push(Arc::new(LoadSession {
            session_id,
            client: Arc::new(tracked),
            gateway: AtomicUsize::new(via),
            submits: Mutex::new(Vec::new()),
        }));
    }
    Ok(sessions)
}

impl Load {
    /// Starts submitting on every session.
    pub fn start(
        ctx: &Ctx,
        scratch: &Shared,
        urls: &[String],
        sessions: Vec<Arc<LoadSession>>,
        settings: &LoadSettings,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = sessions
            .iter()
            .map(|s| {
                let worker = Worker {
                    connector: ctx.connector.clone(),
                    prompt: ctx.common.prompt.clone(),
                    metrics: ctx.metrics.clone(),
                    scratch: scratch.clone(),
                    urls: urls.to_vec(),
                    session: s.clone(),
                    settings: settings.clone(),
                    stop: stop.clone(),
                };
                tokio::spawn(worker.run())
            })
            .collect();
        Load {
            sessions,
            stop,
            tasks,
        }
    }

    /// Stops submitting and waits for the submits in progress (bounded by their timeout).
    pub async fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for task in &self.tasks {
            task.abort();
        }
    }
}

struct Worker {
    connector: crate::track::Connector,
    prompt: String,
    metrics: Shared,
    scratch: Shared,
    urls: Vec<String>,
    session: Arc<LoadSession>,
    settings: LoadSettings,
    stop: Arc<AtomicBool>,
}

impl Worker {
    async fn run(self) {
        let mut n = 0usize;
        while !self.stop.load(Ordering::SeqCst) {
            if self.unfinished().await >= self.settings.max_in_flight {
                tokio::time::sleep(self.settings.interval).await;
                continue;
            }
            n += 1;
            let prompt = if n.is_multiple_of(2) {
                format!("{SLOW_MARKER} {}", self.prompt)
            } else {
                self.prompt.clone()
            };
            self.submit(&prompt).await;
            tokio::time::sleep(self.settings.interval).await;
        }
    }

    async fn unfinished(&self) -> usize {
        let mut count = 0;
        for s in self.session.submits() {
            if let Some(run) = &s.run_id {
                if !self.session.client.has_ended(run).await {
                    count += 1;
                }
            }
        }
        count
    }

    /// Moves the client to the next gateway (resume after its last seq, backfill).
    pub async fn reconnect(&self, deadline: Instant) {
        let n = self.urls.len();
        for _ in 0..n {
            let next = (self.session.gateway.load(Ordering::SeqCst) + 1) % n;
            self.session.gateway.store(next, Ordering::SeqCst);
            let until = deadline.min(Instant::now() + self.settings.attempt_timeout);
            let tracked = &self.session.client;
            match tracked
                .reconnect(&self.connector, &self.urls[next], &self.scratch, until)
                .await
            {
                Ok(()) => {
                    self.metrics.count("reconnects", 1);
                    return;
                }
                Err(e) => {
                    self.metrics
                        .count(&format!("reconnect_failed:{}", error_kind(&e)), 1);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            if Instant::now() > deadline {
                return;
            }
        }
    }

    async fn submit(&self, prompt: &str) {
        let params = submit_params(&self.session.session_id, prompt);
        let request_id = uuid::Uuid::new_v4().to_string();
        let first = Instant::now();
        let deadline = first + self.settings.submit_timeout;
        let mut record = Submit {
            key: params.idempotency_key.clone(),
            run_id: None,
            attempts: 0,
            acked: None,
            error: None,
        };
        loop {
            record.attempts += 1;
            let sent = Instant::now();
            let left = deadline.saturating_duration_since(sent);
            let timeout = left.min(self.settings.attempt_timeout);
            let result = match self.session.client.client() {
                Some(c) => {
                    c.with_call_timeout(timeout.max(Duration::from_millis(100)))
                        .session_submit_with_id(request_id.clone(), &params)
                        .await
                }
                None => Err(ClientError::Closed),
            };
            match result {
                Ok(result) => {
                    let at = Instant::now();
                    self.metrics.record(metrics::SUBMIT_ACK, at - first);
                    record.run_id = Some(result.run_id);
                    record.acked = Some((sent, at));
                    break;
                }
                Err(e) if is_transient(&e) && Instant::now() < deadline => {
                    self.metrics
                        .count(&format!("submit_retry:{}", error_kind(&e)), 1);
                    if matches!(e, ClientError::Closed | ClientError::Timeout) {
                        self.reconnect(deadline).await;
                    } else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                Err(e) => {
                    self.metrics
                        .error(&format!("submit_gave_up:{}", error_kind(&e)));
                    record.error = Some(e.to_string());
                    break;
                }
            }
        }
        self.session
            .submits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record);
    }
}

/// Makes sure the session's client is connected and has applied everything up to `head`:
/// a client on a dead or stalled gateway moves on to the next one.
pub(crate) async fn catch_up(
    ctx: &Ctx,
    scratch: &Shared,
    urls: &[String],
    session: &LoadSession,
    head: u64,
    deadline: Instant,
) -> bool {
    let worker = Worker {
        connector: ctx.connector.clone(),
        prompt: String::new(),
        metrics: ctx.metrics.clone(),
        scratch: scratch.clone(),
        urls: urls.to_vec(),
        session: Arc::new(LoadSession {
            session_id: session.session_id.clone(),
            client: session.client.clone(),
            gateway: AtomicUsize::new(session.gateway.load(Ordering::SeqCst)),
            submits: Mutex::new(Vec::new()),
        }),
        settings: LoadSettings {
            interval: Duration::from_millis(100),
            max_in_flight: 1,
            attempt_timeout: Duration::from_secs(5),
            submit_timeout: Duration::from_secs(5),
        },
        stop: Arc::new(AtomicBool::new(true)),
    };
    loop {
        let step = (Instant::now() + Duration::from_secs(3)).min(deadline);
        if session.client.wait_seq(head, step).await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        worker.reconnect(deadline).await;
    }
}
