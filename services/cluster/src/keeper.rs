//! [`LeaseKeeper`]: renews every lease an instance holds and says at once when one is lost.
//!
//! The keeper never trusts a lease longer than its last *confirmed* renewal allows: each
//! lease is valid locally until `sent_at + ttl - margin`, where `sent_at` is when the last
//! successful acquire or renew was sent (Redis started its TTL after that). When that moment
//! passes without a confirmation — Redis unreachable, a slow network, or this process paused
//! past its TTL — the lease is reported lost, even if no renewal ever failed. A renewal that
//! answers "not yours" is reported at once; a renewal that errors is retried quickly until
//! the local deadline, because the lease may well still be ours and nobody else can take it
//! before it expires anyway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{debug, instrument, warn};

use crate::error::{ClusterError, Result};
use crate::lease::{Lease, Leases};

/// Renews held leases every TTL/3 and reports lost ones (by session key) on a channel.
/// Cheap to clone; the background task stops when the last clone is dropped.
#[derive(Clone)]
pub struct LeaseKeeper {
    state: Arc<State>,
    _stop: Arc<DropGuard>,
}

impl std::fmt::Debug for LeaseKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseKeeper")
            .field("held", &lock(&self.state.held).len())
            .finish_non_exhaustive()
    }
}

struct State {
    leases: Leases,
    held: Mutex<HashMap<String, Held>>,
    lost: mpsc::UnboundedSender<String>,
    changed: Notify,
    /// Safety margin subtracted from every local deadline (clock-rate differences and the
    /// time the runtime needs to stop writing).
    margin: Duration,
    /// Successful renewals, for the `leases renewed` metric.
    renewals: std::sync::atomic::AtomicU64,
}

#[derive(Clone)]
struct Held {
    lease: Lease,
    valid_until: Instant,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain map of values: consistent even if a holder panicked.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LeaseKeeper {
    /// How many renewals succeeded since start.
    pub fn renewals(&self) -> u64 {
        self.state
            .renewals
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Starts the keeper task; the receiver yields the session key of every lease lost.
    pub fn start(leases: Leases) -> (LeaseKeeper, mpsc::UnboundedReceiver<String>) {
        let (lost, lost_rx) = mpsc::unbounded_channel();
        let margin = leases.ttl() / 10;
        let state = Arc::new(State {
            leases,
            held: Mutex::new(HashMap::new()),
            lost,
            changed: Notify::new(),
            margin,
            renewals: std::sync::atomic::AtomicU64::new(0),
        });
        let cancel = CancellationToken::new();
        tokio::spawn(run(state.clone(), cancel.clone()));
        (
            LeaseKeeper {
                state,
                _stop: Arc::new(cancel.drop_guard()),
            },
            lost_rx,
        )
    }

    /// Starts renewing `lease` (replacing any earlier lease of the same session).
    pub fn hold(&self, lease: Lease) {
        let valid_until = lease.acquired_at + self.state.leases.ttl() - self.state.margin;
        debug!(session = %lease.session_key, fence = lease.fence, "holding lease");
        lock(&self.state.held).insert(lease.session_key.clone(), Held { lease, valid_until });
        self.state.changed.notify_one();
    }

    /// The held lease of a session if it is still valid by the local deadline.
    pub fn lease(&self, session_key: &str) -> Option<Lease> {
        let held = lock(&self.state.held);
        held.get(session_key)
            .filter(|h| Instant::now() < h.valid_until)
            .map(|h| h.lease.clone())
    }

    /// The fence to write with, or [`ClusterError::LeaseLost`] when the lease is not held
    /// (or no longer provably valid).
    pub fn fence(&self, session_key: &str) -> Result<u64> {
        self.lease(session_key)
            .map(|lease| lease.fence)
            .ok_or_else(|| ClusterError::LeaseLost(session_key.to_owned()))
    }

    /// Session keys of all held leases.
    pub fn held(&self) -> Vec<String> {
        let mut keys: Vec<String> = lock(&self.state.held).keys().cloned().collect();
        keys.sort();
        keys
    }

    /// Stops renewing a lease without releasing it (it lapses after its TTL).
    pub fn forget(&self, session_key: &str) -> Option<Lease> {
        lock(&self.state.held).remove(session_key).map(|h| h.lease)
    }

    /// Stops renewing and deletes the lease if it is still ours, so another instance can
    /// take over at once. `false` when it was not held or already taken over.
    #[instrument(skip_all, fields(session = %session_key))]
    pub async fn release(&self, session_key: &str) -> Result<bool> {
        let Some(lease) = self.forget(session_key) else {
            return Ok(false);
        };
        self.state.leases.release(&lease).await
    }

    /// Releases every held lease (drain); returns how many were still ours.
    pub async fn release_all(&self) -> Result<usize> {
        let leases: Vec<Lease> = lock(&self.state.held)
            .drain()
            .map(|(_, h)| h.lease)
            .collect();
        let mut released = 0;
        let mut first_error = None;
        for lease in leases {
            match self.state.leases.release(&lease).await {
                Ok(true) => released += 1,
                Ok(false) => {}
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(released),
        }
    }
}

async fn run(state: Arc<State>, cancel: CancellationToken) {
    let interval = state.leases.ttl() / 3;
    let retry = (state.leases.ttl() / 10).max(Duration::from_millis(10));
    let mut next_round = Instant::now() + interval;
    loop {
        let earliest = lock(&state.held).values().map(|h| h.valid_until).min();
        let wake = earliest.map_or(next_round, |e| e.min(next_round));
        tokio::select! {
            () = cancel.cancelled() => return,
            () = state.changed.notified() => continue,
            () = tokio::time::sleep_until(wake) => {}
        }
        expire_overdue(&state);
        if Instant::now() >= next_round {
            let all_confirmed = renew_round(&state).await;
            next_round = Instant::now() + if all_confirmed { interval } else { retry };
        }
    }
}

/// Reports every lease whose local deadline has passed.
fn expire_overdue(state: &State) {
    let now = Instant::now();
    let overdue: Vec<Held> = {
        let mut held = lock(&state.held);
        let keys: Vec<String> = held
            .iter()
            .filter(|(_, h)| h.valid_until <= now)
            .map(|(k, _)| k.clone())
            .collect();
        keys.iter().filter_map(|k| held.remove(k)).collect()
    };
    for h in overdue {
        report_lost(state, &h.lease, "renewal not confirmed before expiry");
    }
}

/// Renews every held lease concurrently, handling each result as it arrives so a lost
/// lease is reported without waiting for the slowest renewal. Returns whether every
/// renewal got an answer.
async fn renew_round(state: &State) -> bool {
    let snapshot: Vec<Held> = lock(&state.held).values().cloned().collect();
    let mut pending: FuturesUnordered<_> = snapshot
        .into_iter()
        .map(|h| async move {
            let sent_at = Instant::now();
            // Never wait past the local deadline: an answer after it could not make the
            // lease valid again in between.
            let outcome =
                tokio::time::timeout_at(h.valid_until, state.leases.renew(&h.lease)).await;
            (h, sent_at, outcome)
        })
        .collect();
    let mut all_confirmed = true;
    while let Some((h, sent_at, outcome)) = pending.next().await {
        match outcome {
            Ok(Ok(true)) => {
                state
                    .renewals
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut held = lock(&state.held);
                if let Some(current) = held.get_mut(&h.lease.session_key) {
                    if current.lease == h.lease {
                        current.valid_until = sent_at + state.leases.ttl() - state.margin;
                    }
                }
            }
            Ok(Ok(false)) => {
                if take_if_current(state, &h.lease) {
                    report_lost(state, &h.lease, "lease taken over or expired");
                }
            }
            Ok(Err(err)) => {
                all_confirmed = false;
                warn!(
                    session = %h.lease.session_key,
                    fence = h.lease.fence,
                    error = %err,
                    "lease renewal failed, retrying until expiry"
                );
            }
            Err(_) => {
                if take_if_current(state, &h.lease) {
                    report_lost(state, &h.lease, "renewal not confirmed before expiry");
                }
            }
        }
    }
    all_confirmed
}

/// Removes the lease from the held set unless it was released or replaced meanwhile.
fn take_if_current(state: &State, lease: &Lease) -> bool {
    let mut held = lock(&state.held);
    if held
        .get(&lease.session_key)
        .is_some_and(|h| h.lease == *lease)
    {
        held.remove(&lease.session_key);
        true
    } else {
        false
    }
}

fn report_lost(state: &State, lease: &Lease, reason: &'static str) {
    warn!(
        session = %lease.session_key,
        fence = lease.fence,
        instance_id = %lease.instance_id,
        reason,
        "lease lost"
    );
    // Nobody listening means nobody to stop; the lease is gone from the held set either way.
    let _ = state.lost.send(lease.session_key.clone());
}
