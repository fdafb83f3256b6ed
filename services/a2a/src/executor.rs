//! What runs a task: the [`Executor`] trait (the backend's agent runtime, or the TCK
//! fixture) and the [`EventSink`] through which it reports progress. The sink applies each
//! event to the stored task (refusing changes to a terminal task), then hands it to every
//! stream of the task and to its push-notification webhooks; an executor that follows an
//! ordered source applies its events as steps ([`EventSink::apply_step`]), exactly once
//! across the processes that apply them.

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::card::AgentSkill;
use crate::error::Result;
use crate::http::Principal;
use crate::service::Shared;
use crate::types::{
    Artifact, Message, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};

/// Why an execution ended without a terminal state of its own.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExecutorError {
    /// The agent refuses the task: `TASK_STATE_REJECTED`.
    #[error("rejected: {0}")]
    Rejected(String),
    /// The agent failed: `TASK_STATE_FAILED`.
    #[error("failed: {0}")]
    Failed(String),
}

/// One message to execute.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// Who sent the message; the task belongs to `principal.owner`.
    pub principal: Principal,
    pub task_id: String,
    pub context_id: String,
    /// The new message (its `taskId` and `contextId` filled in).
    pub message: Message,
    /// The task as stored before this message, when the message continues a task.
    pub task: Option<Task>,
    pub metadata: Option<Value>,
    /// Cancelled by `CancelTask` (and on shutdown).
    pub cancel: CancellationToken,
}

#[async_trait]
pub trait Executor: Send + Sync + 'static {
    /// The skills this executor serves: the capability catalog the card is made from.
    fn skills(&self) -> Vec<AgentSkill>;

    /// Runs one message. Returns when the task is terminal or interrupted (or when its
    /// work continues elsewhere and will report through a sink the executor kept).
    async fn execute(
        &self,
        ctx: RequestContext,
        events: EventSink,
    ) -> std::result::Result<(), ExecutorError>;

    /// The contextId of a message that starts a new task: the client's (`requested`) when
    /// acceptable, else a new one. The default takes any client value.
    async fn new_context(&self, _principal: &Principal, requested: Option<&str>) -> Result<String> {
        Ok(requested
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()))
    }

    /// Cancels a task. The default reports `TASK_STATE_CANCELED`.
    async fn cancel(&self, _task: &Task, _principal: &Principal, events: EventSink) -> Result<()> {
        events.status(TaskState::Canceled, None).await
    }

    /// The events of a stored, unfinished task that no execution of this process follows
    /// (its execution runs on another instance of a cluster, or none does), for
    /// `SubscribeToTask`: read-only (whoever executes records them), ending after a
    /// terminal status. `None` (the default): the subscription waits for an execution in
    /// this process.
    async fn observe(
        &self,
        _task: &Task,
        _principal: &Principal,
    ) -> Result<Option<crate::service::EventStream>> {
        Ok(None)
    }

    /// Brings a stored, unfinished task that no execution follows up to date (after a
    /// restart, or when its work went on elsewhere). The default does nothing.
    async fn refresh(
        &self,
        _task: &Task,
        _principal: &Principal,
        _events: EventSink,
    ) -> Result<()> {
        Ok(())
    }

    /// Advances a stored, interrupted task (input-required) that no execution follows and
    /// whose work can go on without a new message — the runtime executor's delegation
    /// parked while its remote agent was unreachable: it retries the agent and waits a
    /// bounded time for progress. Called by `GetTask` and `SubscribeToTask` (lazy
    /// advancement: nothing polls in the background), after [`Executor::refresh`]; the
    /// task is refreshed again afterwards. The default does nothing.
    async fn advance(&self, _task: &Task, _principal: &Principal) -> Result<()> {
        Ok(())
    }
}

/// Where an executor reports what happens to one task.
#[derive(Clone)]
pub struct EventSink {
    pub(crate) shared: std::sync::Arc<Shared>,
    pub(crate) owner: String,
    pub(crate) task_id: String,
    pub(crate) context_id: String,
    /// The message that creates the task when the first event is not a `message`.
    pub(crate) first_message: Option<Message>,
}

impl EventSink {
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// A new status, with an optional agent message (which also joins the history).
    pub async fn status(&self, state: TaskState, message: Option<Message>) -> Result<()> {
        let message = message.map(|mut m| {
            m.task_id = Some(self.task_id.clone());
            m.context_id = Some(self.context_id.clone());
            m
        });
        self.publish(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            status: TaskStatus::now(state, message),
            metadata: None,
        }))
        .await
    }

    /// An artifact, whole or one chunk of it (`append` adds parts to the artifact with the
    /// same id; `last_chunk` marks its end).
    pub async fn artifact(&self, artifact: Artifact, append: bool, last_chunk: bool) -> Result<()> {
        self.publish(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            artifact,
            append,
            last_chunk,
            metadata: None,
        }))
        .await
    }

    /// Merges `metadata` (an object) into the task's metadata; no event is sent.
    pub async fn set_metadata(&self, metadata: Value) -> Result<()> {
        crate::service::merge_metadata(self, metadata).await
    }

    /// Applies step `seq` of an ordered source the executor follows (the backend's session
    /// journal: the event's seq) — `events`, status and artifact updates, with `metadata`
    /// merged into the task's and its applied seq (`lumina.lastSeq`,
    /// [`crate::store::applied_seq`]) set to `seq` — exactly once, however many processes
    /// apply the same step at the same time: one compare-and-set write, taken only while the
    /// stored task has not applied `seq`. Every process's streams see the events once;
    /// webhooks get them from the writer. Whether this call wrote the step (`false`: it was
    /// applied already, or the task is terminal).
    pub async fn apply_step(
        &self,
        seq: u64,
        events: Vec<StreamResponse>,
        metadata: Value,
    ) -> Result<bool> {
        crate::service::apply_step(self, seq, events, metadata).await
    }

    /// A direct answer instead of a task: only as the first and only event.
    pub async fn message(&self, message: Message) -> Result<()> {
        self.publish(StreamResponse::Message(message)).await
    }

    /// An agent message with one text part, for this task.
    pub fn agent_text(&self, text: &str) -> Message {
        Message::agent(
            vec![crate::types::Part::text(text)],
            Some(&self.task_id),
            Some(&self.context_id),
        )
    }

    pub(crate) async fn publish(&self, event: StreamResponse) -> Result<()> {
        crate::service::publish(self, event).await
    }
}
