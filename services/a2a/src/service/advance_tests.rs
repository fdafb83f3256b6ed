//! `GetTask` advances an interrupted task nobody follows (`Executor::advance`), and only such
//! a task: not a terminal one, not one whose execution runs, not on `CancelTask`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;

use super::*;
use crate::card::{AgentSkill, CardOptions};
use crate::store::MemoryTaskStore;
use crate::types::Role;

/// Interrupted at once (input-required); `advance` reaches the agent, and the refresh that
/// follows it records the task completed (as the runtime's journal would tell it).
#[derive(Default)]
struct Parks {
    advanced: AtomicUsize,
    reached: AtomicBool,
}

#[async_trait]
impl Executor for Parks {
    fn skills(&self) -> Vec<AgentSkill> {
        Vec::new()
    }

    async fn execute(&self, _ctx: RequestContext, events: EventSink) -> Result<(), ExecutorError> {
        let message = events.agent_text("the agent is unreachable");
        events
            .status(TaskState::InputRequired, Some(message))
            .await
            .map_err(|e| ExecutorError::Failed(e.to_string()))
    }

    async fn refresh(&self, _task: &Task, _principal: &Principal, events: EventSink) -> Result<()> {
        if self.reached.load(Ordering::SeqCst) {
            let message = events.agent_text("reached it");
            events.status(TaskState::Completed, Some(message)).await?;
        }
        Ok(())
    }

    async fn advance(&self, _task: &Task, _principal: &Principal) -> Result<()> {
        self.advanced.fetch_add(1, Ordering::SeqCst);
        self.reached.store(true, Ordering::SeqCst);
        Ok(())
    }
}

fn principal() -> Principal {
    Principal {
        owner: "t/u".into(),
        can_read: true,
        can_write: true,
        identity: serde_json::Value::Null,
    }
}

fn service(executor: Arc<Parks>) -> A2aService {
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
    let card = CardDocument::build(&options, Vec::new());
    A2aService::new(Arc::new(MemoryTaskStore::new()), executor, card, None)
}

fn message(text: &str) -> SendMessageRequest {
    SendMessageRequest {
        tenant: None,
        message: Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            context_id: None,
            task_id: None,
            role: Role::User,
            parts: vec![crate::types::Part::text(text)],
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        },
        configuration: None,
        metadata: None,
    }
}

#[tokio::test]
async fn get_task_advances_an_interrupted_task_once_and_cancel_does_not() {
    let executor = Arc::new(Parks::default());
    let service = service(executor.clone());
    let p = principal();

    // Cancel reads the task without advancing it.
    let StreamResponse::Task(first) = service.send(&p, message("a")).await.unwrap() else {
        panic!("no task");
    };
    assert_eq!(first.status.state, TaskState::InputRequired);
    let canceled = service
        .cancel(
            &p,
            TaskIdRequest {
                id: first.id.clone(),
                metadata: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(canceled.status.state, TaskState::Canceled);
    assert_eq!(executor.advanced.load(Ordering::SeqCst), 0);

    // GetTask advances it; a terminal task is not advanced again.
    let StreamResponse::Task(second) = service.send(&p, message("b")).await.unwrap() else {
        panic!("no task");
    };
    let get = || GetTaskRequest {
        id: second.id.clone(),
        history_length: None,
    };
    let got = service.get_task(&p, get()).await.unwrap();
    assert_eq!(got.status.state, TaskState::Completed);
    assert_eq!(
        got.status.message.as_ref().map(Message::text).as_deref(),
        Some("reached it")
    );
    assert_eq!(executor.advanced.load(Ordering::SeqCst), 1);
    service.get_task(&p, get()).await.unwrap();
    assert_eq!(executor.advanced.load(Ordering::SeqCst), 1);
}
