//! The store contract as a suite: every implementation runs it unchanged — [`run`] (the
//! operations, the compare-and-set of the applied seq) and [`race`] (two instances of the
//! service applying the same step of a task at once over one store: exactly one writes it).
//! Panics (it is a test suite) on the first broken rule.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::Barrier;

use super::{applied_seq, set_applied_seq, TaskRecord, TaskStore};
use crate::card::{AgentSkill, CardDocument, CardOptions};
use crate::error::Result;
use crate::executor::{EventSink, Executor, ExecutorError, RequestContext};
use crate::service::{A2aService, Carried};
use crate::types::{
    Message, Part, StreamResponse, Task, TaskPushNotificationConfig, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};

fn ok<T>(result: Result<T>) -> T {
    result.unwrap_or_else(|e| panic!("{e}"))
}

fn task(id: &str, context: &str) -> Task {
    Task {
        id: id.into(),
        context_id: context.into(),
        status: TaskStatus::now(TaskState::Submitted, None),
        artifacts: Vec::new(),
        history: Vec::new(),
        metadata: None,
    }
}

/// Panics (it is a test suite) on the first broken rule.
pub async fn run(store: &dyn TaskStore) {
    let a = task("t-a", "ctx-1");
    store
        .save("alice", &a)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let loaded = store
        .load("alice", "t-a")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        loaded.as_ref().map(|r| &r.task),
        Some(&a),
        "a saved task loads"
    );
    let other = store
        .load("bob", "t-a")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(other, None, "another principal's task is absent");

    let first = loaded.map(|r| r.updated_micros).unwrap_or_default();
    let mut b = task("t-b", "ctx-2");
    store
        .save("alice", &b)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    b.status = TaskStatus::now(TaskState::Completed, None);
    store
        .save("alice", &b)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let reloaded = store
        .load("alice", "t-b")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let reloaded = reloaded.unwrap_or_else(|| panic!("t-b vanished"));
    assert_eq!(
        reloaded.task.status.state,
        TaskState::Completed,
        "save replaces"
    );
    assert!(reloaded.updated_micros > first, "update times increase");

    let all = store
        .list("alice", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(all.len(), 2);
    let ctx = store
        .list("alice", Some("ctx-2"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ctx.len(), 1);
    let none = store
        .list("bob", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(none.is_empty());

    let config = TaskPushNotificationConfig {
        tenant: None,
        id: Some("c1".into()),
        task_id: Some("t-a".into()),
        url: "https://example.com/hook".into(),
        token: Some("tok".into()),
        authentication: None,
    };
    store
        .save_push_config("alice", &config)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let configs = store
        .push_configs("alice", "t-a")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(configs, vec![config.clone()]);
    let foreign = store
        .push_configs("bob", "t-a")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(foreign.is_empty());
    let gone = store.delete_push_config("alice", "t-a", "c1").await;
    assert_eq!(gone.ok(), Some(true));
    let again = store.delete_push_config("alice", "t-a", "c1").await;
    assert_eq!(again.ok(), Some(false));

    compare_and_set(store).await;
}

/// [`TaskStore::save_applied`]: replaces only while the stored applied seq is the expected
/// one and the task is not terminal.
async fn compare_and_set(store: &dyn TaskStore) {
    let mut base = task("t-cas", "ctx-3");
    base.status = TaskStatus::now(TaskState::Working, None);
    assert!(
        !ok(store.save_applied("alice", &base, 0).await),
        "an unknown task is not written"
    );
    ok(store.save("alice", &base).await);
    assert_eq!(applied_seq(&base), 0, "no metadata: applied seq 0");

    let mut first = base.clone();
    first.history.push(text("step 1"));
    set_applied_seq(&mut first, 1);
    let mut rival = base.clone();
    rival.history.push(text("step 1 again"));
    set_applied_seq(&mut rival, 1);
    let before = load(store, "t-cas").await.updated_micros;
    assert!(
        ok(store.save_applied("alice", &first, 0).await),
        "the expected applied seq: written"
    );
    assert!(
        !ok(store.save_applied("alice", &rival, 0).await),
        "loaded at the same applied seq, second: refused"
    );
    let stored = load(store, "t-cas").await;
    assert_eq!(stored.task, first, "the first write stands");
    assert_eq!(applied_seq(&stored.task), 1);
    assert!(stored.updated_micros > before, "a write is an update");
    assert!(
        !ok(store.save_applied("bob", &first, 1).await),
        "another principal's task is absent"
    );

    let mut second = first.clone();
    second.history.push(text("step 2"));
    set_applied_seq(&mut second, 2);
    assert!(!ok(store.save_applied("alice", &second, 0).await), "stale");
    assert!(ok(store.save_applied("alice", &second, 1).await));
    assert_eq!(load(store, "t-cas").await.task.history.len(), 2);

    let mut done = second.clone();
    done.status = TaskStatus::now(TaskState::Completed, None);
    ok(store.save("alice", &done).await);
    let mut late = second.clone();
    set_applied_seq(&mut late, 3);
    assert!(
        !ok(store.save_applied("alice", &late, 2).await),
        "a terminal task is final"
    );
    assert_eq!(
        load(store, "t-cas").await.task.status.state,
        TaskState::Completed
    );
}

fn text(text: &str) -> Message {
    Message::agent(vec![Part::text(text)], None, None)
}

async fn load(store: &dyn TaskStore, id: &str) -> TaskRecord {
    ok(store.load("alice", id).await).unwrap_or_else(|| panic!("{id} vanished"))
}

/// How many tasks [`race`] runs the race on.
const ROUNDS: usize = 10;

/// Two instances of the service (two processes of a cluster: a channel each, one store)
/// apply the same steps of a task at the same moment — an execution following the session
/// and a read bringing the task up to date. Both load the task before either writes (the
/// store is gated so), yet each step is written once: one history message, one status,
/// `true` from one of the two; each instance's subscribers see it once; a step applied again
/// changes nothing.
pub async fn race(store: Arc<dyn TaskStore>) {
    for round in 0..ROUNDS {
        let id = format!("race-{round}");
        let mut stored = task(&id, "ctx-race");
        stored.status = TaskStatus::now(TaskState::Working, None);
        ok(store.save("alice", &stored).await);
        let gate = Arc::new(Gate {
            inner: store.clone(),
            task_id: id.clone(),
            barrier: Barrier::new(2),
            armed: AtomicUsize::new(0),
        });
        let a = instance(gate.clone());
        let b = instance(gate.clone());
        let sink_a = a.refresh_sink("alice", &stored);
        let sink_b = b.refresh_sink("alice", &stored);
        let mut seen_a = a.listen(&id).unwrap_or_else(|| panic!("no channel"));
        let mut seen_b = b.listen(&id).unwrap_or_else(|| panic!("no channel"));

        for seq in 1..=2u64 {
            gate.arm();
            let (won_a, won_b) = tokio::join!(step(&sink_a, seq), step(&sink_b, seq));
            let writers = [ok(won_a), ok(won_b)].iter().filter(|w| **w).count();
            assert_eq!(
                writers, 1,
                "round {round}, step {seq}: one instance writes it"
            );
            let now = load(&*store, &id).await.task;
            let said: Vec<String> = now.history.iter().map(Message::text).collect();
            let expected: Vec<String> = (1..=seq).map(|s| format!("step {s}")).collect();
            assert_eq!(said, expected, "round {round}: each step's message once");
            assert_eq!(applied_seq(&now), seq);
            assert_eq!(
                now.status.message.as_ref().map(Message::text),
                expected.last().cloned()
            );
            assert_eq!(
                drain(&mut seen_a),
                vec![seq],
                "round {round}: instance a's streams"
            );
            assert_eq!(
                drain(&mut seen_b),
                vec![seq],
                "round {round}: instance b's streams"
            );
        }
        // Applied again, on either instance: nothing is written or sent.
        assert!(!ok(step(&sink_a, 2).await));
        assert!(!ok(step(&sink_b, 1).await));
        assert_eq!(load(&*store, &id).await.task.history.len(), 2);
        assert!(drain(&mut seen_a).is_empty() && drain(&mut seen_b).is_empty());
    }
}

/// Step `seq`: working, with the agent message "step {seq}".
async fn step(sink: &EventSink, seq: u64) -> Result<bool> {
    let message = sink.agent_text(&format!("step {seq}"));
    let event = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: sink.task_id().to_owned(),
        context_id: sink.context_id().to_owned(),
        status: TaskStatus::now(TaskState::Working, Some(message)),
        metadata: None,
    });
    sink.apply_step(seq, vec![event], json!({ "lumina": { "step": seq } }))
        .await
}

/// The steps a channel carried since the last call.
fn drain(rx: &mut tokio::sync::broadcast::Receiver<Carried>) -> Vec<u64> {
    let mut steps = Vec::new();
    while let Ok(carried) = rx.try_recv() {
        steps.push(carried.step);
    }
    steps
}

fn instance(store: Arc<Gate>) -> A2aService {
    let options = CardOptions {
        name: "conformance".into(),
        description: "conformance".into(),
        version: "0".into(),
        url: "http://127.0.0.1:1/a2a".into(),
        listen: None,
        url_setting: "-".into(),
        input_modes: vec!["text/plain".into()],
        output_modes: vec!["text/plain".into()],
        push_notifications: false,
        bearer_auth: false,
        streaming: true,
    };
    let card = CardDocument::build(&options, Vec::new());
    A2aService::new(store, Arc::new(Idle), card, None)
}

/// An executor that is never asked to run anything here.
struct Idle;

#[async_trait]
impl Executor for Idle {
    fn skills(&self) -> Vec<AgentSkill> {
        Vec::new()
    }

    async fn execute(
        &self,
        _ctx: RequestContext,
        _events: EventSink,
    ) -> std::result::Result<(), ExecutorError> {
        Ok(())
    }
}

/// The store under test, where the next two loads of one task (once armed) wait for each
/// other: both writers have read the task before either writes.
struct Gate {
    inner: Arc<dyn TaskStore>,
    task_id: String,
    barrier: Barrier,
    armed: AtomicUsize,
}

impl Gate {
    fn arm(&self) {
        self.armed.store(2, Ordering::SeqCst);
    }
}

#[async_trait]
impl TaskStore for Gate {
    async fn load(&self, owner: &str, id: &str) -> Result<Option<TaskRecord>> {
        let record = self.inner.load(owner, id).await;
        let gated = id == self.task_id
            && self
                .armed
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if gated {
            self.barrier.wait().await;
        }
        record
    }

    async fn save(&self, owner: &str, task: &Task) -> Result<()> {
        self.inner.save(owner, task).await
    }

    async fn save_applied(&self, owner: &str, task: &Task, expected: u64) -> Result<bool> {
        self.inner.save_applied(owner, task, expected).await
    }

    async fn list(&self, owner: &str, context_id: Option<&str>) -> Result<Vec<TaskRecord>> {
        self.inner.list(owner, context_id).await
    }

    async fn save_push_config(
        &self,
        owner: &str,
        config: &TaskPushNotificationConfig,
    ) -> Result<()> {
        self.inner.save_push_config(owner, config).await
    }

    async fn push_configs(
        &self,
        owner: &str,
        task_id: &str,
    ) -> Result<Vec<TaskPushNotificationConfig>> {
        self.inner.push_configs(owner, task_id).await
    }

    async fn delete_push_config(&self, owner: &str, task_id: &str, id: &str) -> Result<bool> {
        self.inner.delete_push_config(owner, task_id, id).await
    }
}
