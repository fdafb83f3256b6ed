//! Ownership lost and taken again (the cluster's leases, here a test `Ownership`): an open
//! session whose lease is no longer held is not used again — the next request re-acquires
//! with a newer fence — and the late report of the old lease's loss stops nothing of the
//! session taken since, whose run completes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lumina_journal::sqlite::SqliteJournal;
use lumina_journal::{Fence, JournalStore, SessionKey};
use lumina_protocol::Event;
use lumina_runtime::{Ownership, Runtime, RuntimeOptions};
use lumina_testkit::{ScriptedModelServer, Turn};

use crate::team::{events, new_session, run_ended, submit, wait_for, World};

/// Leases as the cluster hands them out: each acquire claims the session with a higher
/// fence; `lose` is the keeper dropping the lease (the eviction comes later, if at all).
struct TestLeases {
    store: Arc<SqliteJournal>,
    next: AtomicU64,
    held: Mutex<Option<Fence>>,
}

impl TestLeases {
    fn lose(&self) {
        *self.held.lock().unwrap() = None;
    }
}

#[async_trait::async_trait]
impl Ownership for TestLeases {
    async fn acquire(&self, session_id: &str) -> lumina_runtime::Result<Fence> {
        if let Some(fence) = *self.held.lock().unwrap() {
            return Ok(fence);
        }
        let fence = self.next.fetch_add(1, Ordering::SeqCst);
        match self
            .store
            .claim(&SessionKey::new("local", session_id), fence)
            .await
        {
            Ok(()) | Err(lumina_journal::Error::NotFound(_)) => {}
            Err(err) => return Err(err.into()),
        }
        *self.held.lock().unwrap() = Some(fence);
        Ok(fence)
    }

    fn holds(&self, _session_id: &str, fence: Fence) -> bool {
        *self.held.lock().unwrap() == Some(fence)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_reported_late_stops_nothing_of_the_session_taken_again() {
    let server = ScriptedModelServer::start(vec![Turn::text("answered by the new owner")]).unwrap();
    let world = World::new(&server, "anthropic");
    let store = Arc::new(SqliteJournal::open(world.app_root.sessions_dir(), "local").unwrap());
    let leases = Arc::new(TestLeases {
        store: store.clone(),
        next: AtomicU64::new(10),
        held: Mutex::new(None),
    });
    let runtime = Runtime::new(
        RuntimeOptions {
            app_root: world.app_root.clone(),
            env: world.env.clone(),
            tenant: "local".into(),
            default_project_root: world.project.clone(),
        },
        store,
        lumina_tools::builtin_registry(),
        leases.clone(),
    );
    let old = new_session(&runtime, &world.project).await;
    let old_fence = old.journal().fence();

    // The lease is lost (Redis restarted); the loss is not acted on yet when the next
    // request comes: the open session is not used, the session is taken again.
    leases.lose();
    let new = runtime.session(old.id()).await.unwrap();
    assert!(!Arc::ptr_eq(&old, &new), "the old owner state was reused");
    assert!(old.is_fenced(), "the old owner state still writes");
    assert!(new.journal().fence() > old_fence);

    submit(&new, "k1", "hello").await;
    // Now the old lease's loss is acted on: it must not evict the session taken again.
    assert!(!runtime.evict_fenced_at(new.id(), old_fence).await);
    wait_for(&new, "the run to end", run_ended).await;
    let frames = events(&new).await;
    assert!(
        frames
            .iter()
            .any(|f| matches!(f.event, Event::RunCompleted { .. })),
        "the run on the new lease did not complete: {:?}",
        frames.iter().map(|f| f.event.kind()).collect::<Vec<_>>()
    );
    assert!(Arc::ptr_eq(&new, &runtime.session(new.id()).await.unwrap()));

    // The loss of the lease now held does evict.
    assert!(
        runtime
            .evict_fenced_at(new.id(), new.journal().fence())
            .await
    );
    assert!(new.is_fenced());
}
