//! The A2A operations over a [`TaskStore`] and an [`Executor`], independent of the
//! transport: send (blocking, non-blocking, streaming), get, cancel, subscribe; list and
//! push-notification configs are in [`crate::ops`].
//!
//! Every task that is not terminal may have a channel: a broadcast of its events, fed by
//! the executor's [`EventSink`] under the channel's lock (apply to the store, then send:
//! `service/write.rs`), so a subscriber that takes the snapshot and subscribes under the
//! same lock misses and repeats nothing. The channel closes after a terminal event.
//!
//! An executor that applies an ordered source (the backend's session journal) applies each
//! of its events as a step ([`EventSink::apply_step`]): written to the store exactly once
//! however many processes apply it, and carried once by each process's channel; the
//! channel's messages name their step, so a subscriber skips the steps its snapshot
//! already holds (another process wrote them first).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::Stream;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::card::CardDocument;
use crate::error::{Error, Result};
use crate::executor::{EventSink, Executor, ExecutorError, RequestContext};
use crate::http::Principal;
use crate::push::PushSender;
use crate::store::{applied_seq, TaskStore};
use crate::types::{
    GetTaskRequest, Message, PartContent, SendMessageRequest, StreamResponse, Task, TaskIdRequest,
    TaskState, TaskStatus,
};

/// Events a slow stream may fall behind by before it skips some.
const CHANNEL_CAPACITY: usize = 1024;

pub type EventStream = Pin<Box<dyn Stream<Item = StreamResponse> + Send>>;

mod write;
pub(crate) use write::{apply_step, merge_metadata, publish};

/// What a channel carries: an event, and the step of the executor's ordered source it
/// belongs to (0: an event that is no step).
#[derive(Debug, Clone)]
pub(crate) struct Carried {
    pub(crate) step: u64,
    pub(crate) event: StreamResponse,
}

pub(crate) struct Channel {
    tx: broadcast::Sender<Carried>,
    lock: tokio::sync::Mutex<()>,
    /// The last step this channel carried.
    carried: AtomicU64,
    /// The task exists in the store (false until a new task's first non-message event).
    created: AtomicBool,
    /// The executor answered with a direct message: there is no task.
    answered: AtomicBool,
    /// Cancels the running execution, if any.
    running: Mutex<Option<CancellationToken>>,
}

pub(crate) struct Shared {
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) executor: Arc<dyn Executor>,
    pub(crate) push: Option<PushSender>,
    pub(crate) card: CardDocument,
    pub(crate) extended_card: Option<CardDocument>,
    channels: Mutex<HashMap<String, Arc<Channel>>>,
    shutdown: CancellationToken,
}

/// The A2A service: cheap to clone.
#[derive(Clone)]
pub struct A2aService {
    pub(crate) shared: Arc<Shared>,
}

impl A2aService {
    pub fn new(
        store: Arc<dyn TaskStore>,
        executor: Arc<dyn Executor>,
        card: CardDocument,
        push: Option<PushSender>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                store,
                executor,
                push,
                card,
                extended_card: None,
                channels: Mutex::new(HashMap::new()),
                shutdown: CancellationToken::new(),
            }),
        }
    }

    pub fn card(&self) -> &CardDocument {
        &self.shared.card
    }

    pub fn extended_card(&self) -> Result<&CardDocument> {
        self.shared
            .extended_card
            .as_ref()
            .ok_or(Error::ExtendedAgentCardNotConfigured)
    }

    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.shared.store
    }

    /// Cancels every running execution (their tasks stay as stored).
    pub fn shutdown(&self) {
        self.shared.shutdown.cancel();
    }

    /// `SendMessage`: the task once terminal or interrupted (or at once with
    /// `returnImmediately`), or the agent's direct message.
    pub async fn send(
        &self,
        principal: &Principal,
        request: SendMessageRequest,
    ) -> Result<StreamResponse> {
        let config = request.configuration.clone().unwrap_or_default();
        let history_length = check_history_length(config.history_length)?;
        let owner = principal.owner.as_str();
        let mut started = self.start(principal, request).await?;
        if let Some(task) = &started.snapshot {
            if config.return_immediately {
                return Ok(StreamResponse::Task(trim_history(
                    task.clone(),
                    history_length,
                )));
            }
        }
        let mut done = false;
        loop {
            let event = tokio::select! {
                biased;
                event = started.rx.recv() => event.map(|c| c.event),
                _ = &mut started.done, if !done => { done = true; continue; }
            };
            match event {
                Ok(StreamResponse::Message(m)) if started.snapshot.is_none() => {
                    return Ok(StreamResponse::Message(m));
                }
                Ok(StreamResponse::Task(t)) => {
                    started.snapshot = Some(t.clone());
                    if config.return_immediately {
                        return Ok(StreamResponse::Task(trim_history(t, history_length)));
                    }
                }
                Ok(StreamResponse::StatusUpdate(u)) => {
                    if u.status.state.is_terminal() || u.status.state.is_interrupted() {
                        break;
                    }
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => break,
            }
            if done && started.rx.is_empty() {
                break;
            }
        }
        let task = self.load(owner, &started.task_id).await?;
        Ok(StreamResponse::Task(trim_history(task, history_length)))
    }

    /// `SendStreamingMessage`: the task (or one message) first, then its events until it is
    /// terminal or interrupted.
    pub async fn send_stream(
        &self,
        principal: &Principal,
        request: SendMessageRequest,
    ) -> Result<EventStream> {
        let started = self.start(principal, request).await?;
        let after = started.snapshot.as_ref().map_or(0, applied_seq);
        let first = started.snapshot.clone().map(StreamResponse::Task);
        Ok(event_stream(
            first,
            started.rx,
            Some(started.done),
            true,
            after,
        ))
    }

    /// `GetTask`.
    pub async fn get_task(&self, principal: &Principal, request: GetTaskRequest) -> Result<Task> {
        let history_length = check_history_length(request.history_length)?;
        let task = self.refreshed(principal, &request.id, Advance::Yes).await?;
        Ok(trim_history(task, history_length))
    }

    /// `CancelTask`: the task as canceled.
    pub async fn cancel(&self, principal: &Principal, request: TaskIdRequest) -> Result<Task> {
        let owner = principal.owner.as_str();
        let task = self.refreshed(principal, &request.id, Advance::No).await?;
        if task.status.state.is_terminal() {
            return Err(Error::TaskNotCancelable(format!(
                "task {} is {}",
                task.id,
                task.status.state.wire_name()
            )));
        }
        let channel = self.shared.channel(&task.id, true);
        if let Some(channel) = &channel {
            if let Ok(running) = channel.running.lock() {
                if let Some(token) = running.as_ref() {
                    token.cancel();
                }
            }
        }
        let sink = self.sink(owner, &task, None);
        self.shared
            .executor
            .cancel(&task, principal, sink.clone())
            .await?;
        let after = self.load(owner, &task.id).await?;
        if !after.status.state.is_terminal() {
            sink.status(TaskState::Canceled, None).await?;
        }
        let after = self.load(owner, &task.id).await?;
        if after.status.state != TaskState::Canceled {
            return Err(Error::TaskNotCancelable(format!(
                "task {} ended as {} first",
                after.id,
                after.status.state.wire_name()
            )));
        }
        Ok(after)
    }

    /// `SubscribeToTask`: the current task first, then its events until it is terminal.
    pub async fn subscribe(
        &self,
        principal: &Principal,
        request: TaskIdRequest,
    ) -> Result<EventStream> {
        let owner = principal.owner.as_str();
        let task = self.refreshed(principal, &request.id, Advance::Yes).await?;
        if task.status.state.is_terminal() {
            return Err(Error::UnsupportedOperation(format!(
                "task {} is {}: there is nothing to subscribe to",
                task.id,
                task.status.state.wire_name()
            )));
        }
        // Executed elsewhere (another instance) or nowhere: the executor may follow the
        // work itself; nothing of this process would feed the channel.
        if !self.is_running(&task.id) {
            if let Some(events) = self.shared.executor.observe(&task, principal).await? {
                use futures::StreamExt;
                let first = futures::stream::iter([StreamResponse::Task(task)]);
                return Ok(Box::pin(first.chain(events)));
            }
        }
        let channel = self
            .shared
            .channel(&task.id, true)
            .ok_or_else(|| Error::Internal("no channel".into()))?;
        let (snapshot, rx) = {
            let _guard = channel.lock.lock().await;
            let snapshot = self.load(owner, &task.id).await?;
            (snapshot, channel.tx.subscribe())
        };
        if snapshot.status.state.is_terminal() {
            return Ok(Box::pin(futures::stream::iter([StreamResponse::Task(
                snapshot,
            )])));
        }
        let after = applied_seq(&snapshot);
        Ok(event_stream(
            Some(StreamResponse::Task(snapshot)),
            rx,
            None,
            false,
            after,
        ))
    }

    /// The task, after the executor brought a task nobody is following up to date (lazy
    /// advancement: e.g. after a restart, from the session journal) and, with
    /// [`Advance::Yes`], advanced an interrupted one that can go on by itself
    /// ([`Executor::advance`]).
    async fn refreshed(&self, principal: &Principal, id: &str, advance: Advance) -> Result<Task> {
        let task = self.load(&principal.owner, id).await?;
        if task.status.state.is_terminal() || self.is_running(id) {
            return Ok(task);
        }
        let task = self.refresh_once(principal, task).await?;
        if advance == Advance::No || !task.status.state.is_interrupted() || self.is_running(id) {
            return Ok(task);
        }
        if let Err(err) = self.shared.executor.advance(&task, principal).await {
            tracing::warn!(task_id = %id, error = %err, "a2a task advance failed");
        }
        if self.is_running(id) {
            return self.load(&principal.owner, id).await;
        }
        self.refresh_once(principal, task).await
    }

    /// One [`Executor::refresh`] of `task`, then the task as stored.
    async fn refresh_once(&self, principal: &Principal, task: Task) -> Result<Task> {
        let sink = self.refresh_sink(&principal.owner, &task);
        if let Err(err) = self.shared.executor.refresh(&task, principal, sink).await {
            tracing::warn!(task_id = %task.id, error = %err, "a2a task refresh failed");
        }
        self.load(&principal.owner, &task.id).await
    }

    /// The sink through which a stored task is brought up to date (its channel exists).
    pub(crate) fn refresh_sink(&self, owner: &str, task: &Task) -> EventSink {
        if let Some(channel) = self.shared.channel(&task.id, true) {
            channel.created.store(true, Ordering::SeqCst);
        }
        self.sink(owner, task, None)
    }

    /// What the channel of task `id` carries from now on, if it has one.
    pub(crate) fn listen(&self, id: &str) -> Option<broadcast::Receiver<Carried>> {
        Some(self.shared.channel(id, false)?.tx.subscribe())
    }

    fn is_running(&self, id: &str) -> bool {
        self.shared
            .channel(id, false)
            .is_some_and(|c| c.running.lock().map(|r| r.is_some()).unwrap_or(false))
    }

    pub(crate) async fn load(&self, owner: &str, id: &str) -> Result<Task> {
        self.shared
            .store
            .load(owner, id)
            .await?
            .map(|r| r.task)
            .ok_or_else(|| Error::TaskNotFound(id.to_owned()))
    }

    fn sink(&self, owner: &str, task: &Task, first: Option<Message>) -> EventSink {
        EventSink {
            shared: self.shared.clone(),
            owner: owner.to_owned(),
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            first_message: first,
        }
    }

    /// Checks the message, creates or continues its task and starts the executor.
    async fn start(&self, principal: &Principal, request: SendMessageRequest) -> Result<Started> {
        let owner = principal.owner.as_str();
        let mut message = request.message;
        self.check_message(&message)?;
        let (task_id, context_id, existing) = match message.task_id.clone() {
            Some(task_id) => {
                let task = self.refreshed(principal, &task_id, Advance::No).await?;
                if task.status.state.is_terminal() {
                    return Err(Error::UnsupportedOperation(format!(
                        "task {task_id} is {}: it takes no more messages",
                        task.status.state.wire_name()
                    )));
                }
                if let Some(context) = &message.context_id {
                    if *context != task.context_id {
                        return Err(Error::InvalidParams(format!(
                            "contextId {context} does not match task {task_id}"
                        )));
                    }
                }
                (task_id, task.context_id.clone(), Some(task))
            }
            None => {
                let context = self
                    .shared
                    .executor
                    .new_context(principal, message.context_id.as_deref())
                    .await?;
                (uuid::Uuid::new_v4().to_string(), context, None)
            }
        };
        message.task_id = Some(task_id.clone());
        message.context_id = Some(context_id.clone());

        if let Some(mut config) = request
            .configuration
            .as_ref()
            .and_then(|c| c.task_push_notification_config.clone())
        {
            config.task_id = Some(task_id.clone());
            crate::ops::save_push_config(self, owner, config).await?;
        }

        let cancel = self.shared.shutdown.child_token();
        let (channel, snapshot, rx) = match &existing {
            Some(task) => {
                let channel = self
                    .shared
                    .channel(&task_id, true)
                    .ok_or_else(|| Error::Internal("no channel".into()))?;
                let _guard = channel.lock.lock().await;
                {
                    let running = channel
                        .running
                        .lock()
                        .map_err(|_| Error::Internal("channel lock poisoned".into()))?;
                    if running.is_some() && !task.status.state.is_interrupted() {
                        return Err(Error::UnsupportedOperation(format!(
                            "task {task_id} is still {}",
                            task.status.state.wire_name()
                        )));
                    }
                }
                let mut task = task.clone();
                task.history.push(message.clone());
                task.status = TaskStatus::now(TaskState::Working, None);
                self.shared.store.save(owner, &task).await?;
                let rx = channel.tx.subscribe();
                (channel.clone(), Some(task), rx)
            }
            None => {
                let channel = self
                    .shared
                    .new_channel(&task_id)
                    .ok_or_else(|| Error::Internal("channel map poisoned".into()))?;
                let rx = channel.tx.subscribe();
                (channel, None, rx)
            }
        };
        if let Ok(mut running) = channel.running.lock() {
            *running = Some(cancel.clone());
        }

        let sink = EventSink {
            shared: self.shared.clone(),
            owner: owner.to_owned(),
            task_id: task_id.clone(),
            context_id: context_id.clone(),
            first_message: Some(message.clone()),
        };
        let ctx = RequestContext {
            principal: principal.clone(),
            task_id: task_id.clone(),
            context_id,
            message,
            task: existing,
            metadata: request.metadata,
            cancel,
        };
        let executor = self.shared.executor.clone();
        let done = tokio::spawn(async move {
            let outcome = executor.execute(ctx, sink.clone()).await;
            finish(&sink, channel, outcome).await;
        });
        Ok(Started {
            task_id,
            snapshot,
            rx,
            done,
        })
    }

    fn check_message(&self, message: &Message) -> Result<()> {
        if message.message_id.is_empty() {
            return Err(Error::InvalidParams("message.messageId is empty".into()));
        }
        if message.parts.is_empty() {
            return Err(Error::InvalidParams("message.parts is empty".into()));
        }
        for part in &message.parts {
            let media_type = match (&part.media_type, &part.content) {
                (Some(m), _) => m.as_str(),
                (None, PartContent::Text(_)) => "text/plain",
                (None, PartContent::Data(_)) => "application/json",
                (None, _) => continue,
            };
            if !self.shared.card.accepts(media_type) {
                return Err(Error::ContentTypeNotSupported(format!(
                    "{media_type} is not one of {:?}",
                    self.shared.card.card.default_input_modes
                )));
            }
        }
        Ok(())
    }
}

/// Whether a read may advance an interrupted task ([`Executor::advance`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Advance {
    Yes,
    No,
}

struct Started {
    task_id: String,
    /// The task before the executor ran (a continuation); `None` for a new task.
    snapshot: Option<Task>,
    rx: broadcast::Receiver<Carried>,
    done: JoinHandle<()>,
}

impl Shared {
    /// The channel of a task; created when `create` and absent.
    pub(crate) fn channel(&self, task_id: &str, create: bool) -> Option<Arc<Channel>> {
        let mut channels = self.channels.lock().ok()?;
        if let Some(c) = channels.get(task_id) {
            return Some(c.clone());
        }
        if !create {
            return None;
        }
        let channel = Arc::new(Channel {
            tx: broadcast::channel(CHANNEL_CAPACITY).0,
            lock: tokio::sync::Mutex::new(()),
            carried: AtomicU64::new(0),
            created: AtomicBool::new(true),
            answered: AtomicBool::new(false),
            running: Mutex::new(None),
        });
        channels.insert(task_id.to_owned(), channel.clone());
        Some(channel)
    }

    fn new_channel(&self, task_id: &str) -> Option<Arc<Channel>> {
        let channel = Arc::new(Channel {
            tx: broadcast::channel(CHANNEL_CAPACITY).0,
            lock: tokio::sync::Mutex::new(()),
            carried: AtomicU64::new(0),
            created: AtomicBool::new(false),
            answered: AtomicBool::new(false),
            running: Mutex::new(None),
        });
        self.channels
            .lock()
            .ok()?
            .insert(task_id.to_owned(), channel.clone());
        Some(channel)
    }

    fn close(&self, task_id: &str, channel: &Arc<Channel>) {
        if let Ok(mut channels) = self.channels.lock() {
            if channels
                .get(task_id)
                .is_some_and(|c| Arc::ptr_eq(c, channel))
            {
                channels.remove(task_id);
            }
        }
    }
}

/// After the executor returns: its error becomes the task's state; a new task that
/// produced no event at all is created as submitted.
async fn finish(sink: &EventSink, channel: Arc<Channel>, outcome: Result<(), ExecutorError>) {
    let result = match outcome {
        Err(ExecutorError::Rejected(reason)) => {
            let message = sink.agent_text(&reason);
            sink.status(TaskState::Rejected, Some(message)).await
        }
        Err(ExecutorError::Failed(reason)) => {
            let message = sink.agent_text(&reason);
            sink.status(TaskState::Failed, Some(message)).await
        }
        Ok(())
            if !channel.created.load(Ordering::SeqCst)
                && !channel.answered.load(Ordering::SeqCst) =>
        {
            write::create_if_needed(sink, &channel).await.map(|_| ())
        }
        Ok(()) => Ok(()),
    };
    if let Err(err) = result {
        tracing::warn!(task_id = %sink.task_id, error = %err, "a2a execution could not record its end");
    }
    if let Ok(mut running) = channel.running.lock() {
        *running = None;
    }
}

/// Events from `first` on, until a terminal status (or an interrupted one when
/// `stop_on_interrupt`), the end of the channel, or the end of the execution; the events of
/// steps up to `after` (what the snapshot `first` already holds) are skipped.
fn event_stream(
    first: Option<StreamResponse>,
    rx: broadcast::Receiver<Carried>,
    done: Option<JoinHandle<()>>,
    stop_on_interrupt: bool,
    after: u64,
) -> EventStream {
    struct State {
        first: Option<StreamResponse>,
        rx: broadcast::Receiver<Carried>,
        done: Option<JoinHandle<()>>,
        finished: bool,
    }
    let state = State {
        first,
        rx,
        done,
        finished: false,
    };
    Box::pin(futures::stream::unfold(state, move |mut s| async move {
        if s.finished {
            return None;
        }
        if let Some(first) = s.first.take() {
            if matches!(first, StreamResponse::Message(_)) {
                s.finished = true;
            }
            return Some((first, s));
        }
        loop {
            let event = match s.done.as_mut() {
                Some(done) => tokio::select! {
                    biased;
                    event = s.rx.recv() => event,
                    _ = done => {
                        s.done = None;
                        continue;
                    }
                },
                None if s.rx.is_empty() && stop_on_interrupt => {
                    // The execution ended and everything it sent has been read.
                    return None;
                }
                None => s.rx.recv().await,
            };
            match event {
                Ok(Carried { step, .. }) if step != 0 && step <= after => {}
                Ok(Carried { event, .. }) => {
                    s.finished = match &event {
                        StreamResponse::Message(_) => true,
                        StreamResponse::StatusUpdate(u) => {
                            u.status.state.is_terminal()
                                || (stop_on_interrupt && u.status.state.is_interrupted())
                        }
                        _ => false,
                    };
                    return Some((event, s));
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(skipped = n, "a2a stream fell behind");
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }))
}

pub(crate) fn check_history_length(length: Option<i32>) -> Result<Option<usize>> {
    match length {
        None => Ok(None),
        Some(n) if n < 0 => Err(Error::InvalidParams(format!(
            "historyLength must not be negative (got {n})"
        ))),
        Some(n) => Ok(Some(n as usize)),
    }
}

/// Keeps the `length` most recent messages (all when `None`).
pub(crate) fn trim_history(mut task: Task, length: Option<usize>) -> Task {
    if let Some(n) = length {
        let skip = task.history.len().saturating_sub(n);
        task.history.drain(..skip);
    }
    task
}

#[cfg(test)]
mod advance_tests;
#[cfg(test)]
mod step_tests;
