//! Steps ([`EventSink::apply_step`]) seen from a stream: a subscriber of one process whose
//! snapshot already holds a step another process wrote does not get it again when its own
//! process applies it late; the next step comes once; a terminal step ends the stream.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::card::{AgentSkill, CardOptions};
use crate::store::MemoryTaskStore;
use crate::types::{TaskState, TaskStatusUpdateEvent};

struct Idle;

#[async_trait]
impl Executor for Idle {
    fn skills(&self) -> Vec<AgentSkill> {
        Vec::new()
    }

    async fn execute(&self, _ctx: RequestContext, _events: EventSink) -> Result<(), ExecutorError> {
        Ok(())
    }
}

fn instance(store: Arc<dyn TaskStore>) -> A2aService {
    let options = CardOptions {
        name: "test".into(),
        description: "test".into(),
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
    A2aService::new(
        store,
        Arc::new(Idle),
        CardDocument::build(&options, Vec::new()),
        None,
    )
}

fn principal() -> Principal {
    Principal {
        owner: "alice".into(),
        can_read: true,
        can_write: true,
        identity: serde_json::Value::Null,
    }
}

async fn step(sink: &EventSink, seq: u64, state: TaskState) -> bool {
    let event = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: sink.task_id().to_owned(),
        context_id: sink.context_id().to_owned(),
        status: TaskStatus::now(state, Some(sink.agent_text(&format!("step {seq}")))),
        metadata: None,
    });
    sink.apply_step(seq, vec![event], json!({}))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn next(stream: &mut EventStream) -> Option<StreamResponse> {
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap_or_else(|_| panic!("no event within 5 s"))
}

fn said(event: &StreamResponse) -> String {
    match event {
        StreamResponse::StatusUpdate(u) => u.status.message.as_ref().map(Message::text),
        _ => None,
    }
    .unwrap_or_else(|| panic!("not a status with a message: {event:?}"))
}

#[tokio::test]
async fn a_subscriber_gets_each_step_once_whichever_process_wrote_it() {
    let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::new());
    let (a, b) = (instance(store.clone()), instance(store.clone()));
    let task = Task {
        id: "t".into(),
        context_id: "c".into(),
        status: TaskStatus::now(TaskState::Working, None),
        artifacts: Vec::new(),
        history: Vec::new(),
        metadata: None,
    };
    store
        .save("alice", &task)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (sink_a, sink_b) = (
        a.refresh_sink("alice", &task),
        b.refresh_sink("alice", &task),
    );

    // Process b writes step 1 first; a subscriber of process a joins after that.
    assert!(step(&sink_b, 1, TaskState::Working).await);
    let request = TaskIdRequest {
        id: "t".into(),
        metadata: None,
    };
    let mut stream = a
        .subscribe(&principal(), request)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Some(StreamResponse::Task(snapshot)) = next(&mut stream).await else {
        panic!("the snapshot first");
    };
    assert_eq!(snapshot.history.len(), 1, "the snapshot holds step 1");

    // Process a applies step 1 late (not written again), then step 2 (written), then 3.
    assert!(!step(&sink_a, 1, TaskState::Working).await);
    assert!(step(&sink_a, 2, TaskState::Working).await);
    assert!(!step(&sink_b, 2, TaskState::Working).await);
    assert!(step(&sink_b, 3, TaskState::Completed).await);
    assert!(!step(&sink_a, 3, TaskState::Completed).await);
    let two = next(&mut stream).await.unwrap_or_else(|| panic!("ended"));
    assert_eq!(said(&two), "step 2");
    let three = next(&mut stream).await.unwrap_or_else(|| panic!("ended"));
    assert_eq!(said(&three), "step 3");
    assert!(next(&mut stream).await.is_none(), "a terminal step ends it");

    let stored = a.load("alice", "t").await.unwrap_or_else(|e| panic!("{e}"));
    let history: Vec<String> = stored.history.iter().map(Message::text).collect();
    assert_eq!(history, ["step 1", "step 2", "step 3"]);
    assert_eq!(stored.status.state, TaskState::Completed);
}
