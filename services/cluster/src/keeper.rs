//! [`LeaseKeeper`]: the leases an instance holds, valid exactly as long as its registry
//! entry, and the report of every lease lost the moment that entry can no longer be relied
//! on.
//!
//! Nothing here talks to Redis per session: the instance's one heartbeat
//! ([`crate::Registration`]) keeps every lease of its incarnation alive. The keeper never
//! trusts a lease past the heartbeat's last *confirmed* deadline ([`Liveness::valid_until`],
//! judged by this process's monotonic clock): when that moment passes without a newer
//! confirmation — Redis unreachable, a slow network, or this process paused past its TTL —
//! every lease is reported lost at once, before any other task of a woken process could
//! rely on one, and [`LeaseKeeper::lease`] already refuses them synchronously. When the
//! entry had lapsed and the heartbeat registered a new incarnation, the old incarnation's
//! leases are reported lost too: other instances may have taken them over.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{debug, instrument, warn};

use crate::error::{ClusterError, Result};
use crate::lease::{Holder, Lease, Leases};
use crate::registry::{Liveness, Registration};

/// Holds an instance's leases and reports lost ones on a channel. A report carries the lost
/// lease itself (its fence), so the receiver can tell it from a newer lease of the same
/// session taken since: a loss noticed late must never stop the new owner's work.
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
    instance_id: String,
    liveness: watch::Receiver<Liveness>,
    held: Mutex<HashMap<String, Lease>>,
    lost: mpsc::UnboundedSender<Lease>,
    /// Heartbeat confirmations seen, for the `leases renewed` metric.
    confirmations: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain map of values: consistent even if a holder panicked.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LeaseKeeper {
    /// Starts the keeper of `registration`'s instance; the receiver yields every lease
    /// lost (already removed from the held set).
    pub fn start(
        leases: Leases,
        registration: &Registration,
    ) -> (LeaseKeeper, mpsc::UnboundedReceiver<Lease>) {
        let (lost, lost_rx) = mpsc::unbounded_channel();
        let state = Arc::new(State {
            leases,
            instance_id: registration.instance_id().to_owned(),
            liveness: registration.liveness(),
            held: Mutex::new(HashMap::new()),
            lost,
            confirmations: AtomicU64::new(0),
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

    /// How many heartbeat confirmations (each renewing every held lease) were seen.
    pub fn renewals(&self) -> u64 {
        self.state.confirmations.load(Ordering::Relaxed)
    }

    /// Who this instance is right now, to acquire leases with.
    pub fn holder(&self) -> Holder {
        Holder {
            instance_id: self.state.instance_id.clone(),
            incarnation: self.state.liveness.borrow().incarnation.clone(),
        }
    }

    /// Starts holding `lease` (replacing any earlier lease of the same session). A lease
    /// of an incarnation that is already gone is reported lost at once.
    pub fn hold(&self, lease: Lease) {
        let current = self.state.liveness.borrow().incarnation == lease.incarnation;
        if !current {
            report_lost(&self.state, &lease, "taken by an incarnation that is gone");
            return;
        }
        debug!(session = %lease.session_key, fence = lease.fence, "holding lease");
        lock(&self.state.held).insert(lease.session_key.clone(), lease);
    }

    /// The held lease of a session if it is still valid by the local deadline.
    pub fn lease(&self, session_key: &str) -> Option<Lease> {
        let live = self.state.liveness.borrow().clone();
        if !live.is_valid() {
            return None;
        }
        lock(&self.state.held)
            .get(session_key)
            .filter(|lease| lease.incarnation == live.incarnation)
            .cloned()
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

    /// Stops holding a lease without releasing it (it stays ours in Redis until this
    /// incarnation's entry lapses, or until released).
    pub fn forget(&self, session_key: &str) -> Option<Lease> {
        lock(&self.state.held).remove(session_key)
    }

    /// Stops holding and deletes the lease if it is still ours, so another instance can
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
        let leases: Vec<Lease> = lock(&self.state.held).drain().map(|(_, l)| l).collect();
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

/// Watches the liveness: reports the leases of a gone incarnation, and every lease when
/// the confirmed deadline passes.
async fn run(state: Arc<State>, cancel: CancellationToken) {
    let mut liveness = state.liveness.clone();
    loop {
        let live = liveness.borrow_and_update().clone();
        if live.valid_until.is_some() {
            state.confirmations.fetch_add(1, Ordering::Relaxed);
        }
        drop_where(
            &state,
            |lease| lease.incarnation != live.incarnation,
            "the registry entry lapsed (new incarnation)",
        );
        let deadline = live.valid_until.filter(|until| *until > Instant::now());
        if deadline.is_none() {
            drop_where(&state, |_| true, "liveness not confirmed before expiry");
        }
        let expiry = async {
            match deadline {
                Some(until) => tokio::time::sleep_until(until).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = liveness.changed() => if changed.is_err() { return },
            () = expiry => {}
        }
    }
}

/// Removes and reports every held lease matching `lost`.
fn drop_where(state: &State, lost: impl Fn(&Lease) -> bool, reason: &'static str) {
    let dropped: Vec<Lease> = {
        let mut held = lock(&state.held);
        let keys: Vec<String> = held
            .iter()
            .filter(|(_, lease)| lost(lease))
            .map(|(key, _)| key.clone())
            .collect();
        keys.iter().filter_map(|key| held.remove(key)).collect()
    };
    for lease in dropped {
        report_lost(state, &lease, reason);
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
    let _ = state.lost.send(lease.clone());
}
