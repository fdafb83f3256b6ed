//! The safety net under cluster subscriptions: hints are best effort (Redis pub/sub drops
//! them across a reconnect, the owner's relay skips them when it lags), so every second
//! something must notice a journal that moved without a hint. One task per instance asks
//! PostgreSQL for the heads of every watched session in a few batched statements and wakes
//! only the subscriptions that are behind. (A read per subscription per second cost two
//! statements each: 10,000 observed sessions kept PostgreSQL busy with 20,000 statements a
//! second while nothing happened.)

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lumina_journal::{JournalStore, SessionKey};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How often the heads are checked.
pub const PERIOD: Duration = Duration::from_secs(1);
/// Session ids per statement.
const BATCH: usize = 1000;

/// The subscriptions an instance serves, by watch id.
#[derive(Default)]
pub struct HeadWatch {
    watched: Mutex<HashMap<u64, Watched>>,
    next_id: AtomicU64,
}

struct Watched {
    key: SessionKey,
    last: Arc<AtomicU64>,
    wake: Arc<Notify>,
}

/// One subscription's registration; dropping it ends the watch.
pub struct Watching {
    id: u64,
    watch: Arc<HeadWatch>,
    last: Arc<AtomicU64>,
    wake: Arc<Notify>,
}

impl Watching {
    /// Records the last seq the subscription has delivered.
    pub fn delivered(&self, seq: u64) {
        self.last.store(seq, Ordering::Relaxed);
    }

    /// Resolves when the session's journal was seen past what was delivered (or a check
    /// failed and the subscription should read for itself).
    pub async fn behind(&self) {
        self.wake.notified().await;
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.watch.lock().remove(&self.id);
    }
}

impl HeadWatch {
    pub fn new() -> Arc<HeadWatch> {
        Arc::new(HeadWatch::default())
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Watched>> {
        self.watched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Watches `key` from `after_seq`.
    pub fn watch(self: &Arc<Self>, key: SessionKey, after_seq: u64) -> Watching {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let last = Arc::new(AtomicU64::new(after_seq));
        let wake = Arc::new(Notify::new());
        self.lock().insert(
            id,
            Watched {
                key,
                last: last.clone(),
                wake: wake.clone(),
            },
        );
        Watching {
            id,
            watch: self.clone(),
            last,
            wake,
        }
    }

    /// Subscriptions watched now.
    #[cfg(test)]
    fn watched(&self) -> usize {
        self.lock().len()
    }

    /// Checks every `period` until `shutdown`.
    pub async fn run(
        self: Arc<Self>,
        store: Arc<dyn JournalStore>,
        period: Duration,
        shutdown: CancellationToken,
    ) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            self.check(&store).await;
        }
    }

    /// One check: the heads of every watched session, batched per tenant; wakes the
    /// subscriptions behind their journal.
    pub async fn check(&self, store: &Arc<dyn JournalStore>) {
        self.check_with(|tenant, ids| {
            let store = store.clone();
            async move { store.heads(&tenant, &ids).await }
        })
        .await;
    }

    /// [`HeadWatch::check`] with the batched read given. A failed read wakes its batch,
    /// whose subscriptions then read (and retry) on their own.
    async fn check_with<F, Fut>(&self, heads: F)
    where
        F: Fn(String, Vec<String>) -> Fut,
        Fut: Future<Output = lumina_journal::Result<Vec<(String, u64)>>>,
    {
        let mut by_tenant: HashMap<String, Vec<String>> = HashMap::new();
        for w in self.lock().values() {
            by_tenant
                .entry(w.key.tenant.clone())
                .or_default()
                .push(w.key.session_id.clone());
        }
        for (tenant, mut ids) in by_tenant {
            ids.sort_unstable();
            ids.dedup();
            for chunk in ids.chunks(BATCH) {
                match heads(tenant.clone(), chunk.to_vec()).await {
                    Ok(heads) => {
                        let heads: HashMap<&str, u64> =
                            heads.iter().map(|(id, seq)| (id.as_str(), *seq)).collect();
                        self.wake_where(&tenant, |id, last| {
                            heads.get(id).is_some_and(|&head| head > last)
                        });
                    }
                    Err(err) => {
                        tracing::debug!(%tenant, error = %err, "subscription heads not read; each reads itself");
                        self.wake_where(&tenant, |id, _| chunk.iter().any(|c| c == id));
                    }
                }
            }
        }
    }

    fn wake_where(&self, tenant: &str, behind: impl Fn(&str, u64) -> bool) {
        for w in self.lock().values() {
            if w.key.tenant == tenant && behind(&w.key.session_id, w.last.load(Ordering::Relaxed)) {
                w.wake.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumina_journal::sqlite::SqliteJournal;
    use lumina_journal::{AppendBatch, ExpectedVersion, NewEvent, SessionRecord};

    async fn store_with(
        dir: &std::path::Path,
        sessions: &[(&str, usize)],
    ) -> Arc<dyn JournalStore> {
        let store: Arc<dyn JournalStore> =
            Arc::new(SqliteJournal::open(dir.to_path_buf(), "t").unwrap());
        for (id, events) in sessions {
            let record = SessionRecord {
                tenant: "t".into(),
                session_id: id.to_string(),
                title: String::new(),
                project_root: "/p".into(),
                created_at_ms: 1,
                updated_at_ms: 1,
                archived: false,
                summary: serde_json::Value::Null,
            };
            store.create_session(&record, 1).await.unwrap();
            if *events > 0 {
                let batch = AppendBatch {
                    stream: "main".into(),
                    expected: ExpectedVersion::Any,
                    events: (0..*events)
                        .map(|n| NewEvent {
                            kind: "note".into(),
                            payload: serde_json::json!({ "n": n }),
                        })
                        .collect(),
                    command: None,
                    audit: Vec::new(),
                };
                store
                    .append(&SessionKey::new("t", *id), 1, batch)
                    .await
                    .unwrap();
            }
        }
        store
    }

    /// Whether `watching` was woken (a wake before the call counts: Notify keeps a permit).
    async fn woken(watching: &Watching) -> bool {
        tokio::time::timeout(Duration::from_millis(50), watching.behind())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn only_subscriptions_behind_their_journal_are_woken() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(dir.path(), &[("a", 3), ("b", 2), ("c", 0)]).await;
        let watch = HeadWatch::new();
        let behind = watch.watch(SessionKey::new("t", "a"), 1);
        let current = watch.watch(SessionKey::new("t", "b"), 2);
        let empty = watch.watch(SessionKey::new("t", "c"), 0);
        let unknown = watch.watch(SessionKey::new("t", "gone"), 0);
        let other_tenant = watch.watch(SessionKey::new("u", "a"), 0);
        watch.check(&store).await;
        assert!(woken(&behind).await);
        assert!(!woken(&current).await);
        assert!(!woken(&empty).await);
        assert!(!woken(&unknown).await);
        assert!(!woken(&other_tenant).await);

        // Once the subscription has delivered up to the head, the next check is quiet.
        behind.delivered(3);
        watch.check(&store).await;
        assert!(!woken(&behind).await);
    }

    #[tokio::test]
    async fn a_dropped_subscription_is_no_longer_watched() {
        let watch = HeadWatch::new();
        let first = watch.watch(SessionKey::new("t", "a"), 0);
        let second = watch.watch(SessionKey::new("t", "a"), 0);
        assert_eq!(watch.watched(), 2);
        drop(first);
        assert_eq!(watch.watched(), 1);
        drop(second);
        assert_eq!(watch.watched(), 0);
    }

    /// A batched read that fails wakes its subscriptions to read for themselves.
    #[tokio::test]
    async fn a_failed_check_wakes_its_batch_to_read_for_itself() {
        let watch = HeadWatch::new();
        let a = watch.watch(SessionKey::new("t", "a"), 1);
        let b = watch.watch(SessionKey::new("u", "b"), 1);
        watch
            .check_with(|tenant, _| async move {
                if tenant == "t" {
                    Err(lumina_journal::Error::Unavailable("down".into()))
                } else {
                    Ok(vec![("b".to_string(), 1)])
                }
            })
            .await;
        assert!(woken(&a).await);
        assert!(!woken(&b).await);
    }

    /// Thousands of subscriptions are checked in statements of at most `BATCH` ids.
    #[tokio::test]
    async fn many_subscriptions_take_few_statements() {
        let watch = HeadWatch::new();
        let watching: Vec<Watching> = (0..2500)
            .map(|i| watch.watch(SessionKey::new("t", format!("s{i}")), 0))
            .collect();
        let statements = AtomicU64::new(0);
        watch
            .check_with(|_, ids| {
                statements.fetch_add(1, Ordering::Relaxed);
                assert!(ids.len() <= BATCH);
                async move { Ok(ids.into_iter().map(|id| (id, 0)).collect()) }
            })
            .await;
        assert_eq!(statements.load(Ordering::Relaxed), 3);
        assert!(!woken(&watching[0]).await);
    }
}
