//! How an [`EventSink`] writes the stored task and tells the task's streams: one event
//! ([`publish`]), a metadata merge ([`merge_metadata`]), or one step of an ordered source
//! applied exactly once however many processes apply it ([`apply_step`]).
//!
//! Each of them changes the stored task with a compare-and-set on its applied seq
//! ([`TaskStore::save_applied`](crate::store::TaskStore::save_applied)): loaded, changed,
//! written only if no other process applied a step in between (else loaded and changed
//! again), so none undoes another process's step, and the applied seq never goes back.

use std::sync::atomic::Ordering;

use serde_json::{Map, Value};

use super::{Carried, Channel};
use crate::error::{Error, Result};
use crate::executor::EventSink;
use crate::store::{applied_seq, set_applied_seq};
use crate::types::{StreamResponse, Task, TaskState, TaskStatus};

/// How often a write is tried while other processes keep applying steps in between.
const WRITE_TRIES: usize = 8;

/// Loads the task, lets `change` change it and writes it with a compare-and-set on the
/// applied seq it was loaded at, again from a fresh load while another process gets in
/// between. `None` when `change` declines (returns `false`).
async fn update(
    sink: &EventSink,
    mut change: impl FnMut(&mut Task) -> Result<bool>,
) -> Result<Option<Task>> {
    let store = &sink.shared.store;
    for _ in 0..WRITE_TRIES {
        let Some(record) = store.load(&sink.owner, &sink.task_id).await? else {
            return Err(Error::TaskNotFound(sink.task_id.clone()));
        };
        let mut task = record.task;
        let loaded = applied_seq(&task);
        if !change(&mut task)? {
            return Ok(None);
        }
        if applied_seq(&task) < loaded {
            // A change made from an older view (metadata an execution saved from what it
            // loaded before) keeps the steps applied since.
            set_applied_seq(&mut task, loaded);
        }
        if store.save_applied(&sink.owner, &task, loaded).await? {
            return Ok(Some(task));
        }
        tracing::debug!(task_id = %sink.task_id, "a2a task changed while written; trying again");
    }
    Err(Error::Store(format!(
        "task {} changed under each of {WRITE_TRIES} writes",
        sink.task_id
    )))
}

/// Creates a new task in the store (submitted, with the first message) and announces it.
pub(super) async fn create_if_needed(sink: &EventSink, channel: &Channel) -> Result<bool> {
    if channel.created.load(Ordering::SeqCst) {
        return Ok(false);
    }
    let first = sink
        .first_message
        .clone()
        .ok_or_else(|| Error::Internal("a new task without its message".into()))?;
    let task = Task {
        id: sink.task_id.clone(),
        context_id: sink.context_id.clone(),
        status: TaskStatus::now(TaskState::Submitted, None),
        artifacts: Vec::new(),
        history: vec![first],
        metadata: None,
    };
    sink.shared.store.save(&sink.owner, &task).await?;
    channel.created.store(true, Ordering::SeqCst);
    let event = StreamResponse::Task(task);
    channel.send(0, event.clone());
    push(sink, &event);
    Ok(true)
}

/// An executor event's change to the task: a status (its message joins the history), an
/// artifact (whole, or parts appended), a message (history only).
fn change(task: &mut Task, event: &StreamResponse) -> Result<()> {
    match event {
        StreamResponse::StatusUpdate(update) => {
            if let Some(message) = &update.status.message {
                task.history.push(message.clone());
            }
            task.status = update.status.clone();
        }
        StreamResponse::ArtifactUpdate(update) => {
            let incoming = &update.artifact;
            match task
                .artifacts
                .iter_mut()
                .find(|a| a.artifact_id == incoming.artifact_id)
            {
                Some(existing) if update.append => {
                    existing.parts.extend(incoming.parts.iter().cloned())
                }
                Some(existing) => *existing = incoming.clone(),
                None => task.artifacts.push(incoming.clone()),
            }
        }
        StreamResponse::Message(message) => task.history.push(message.clone()),
        StreamResponse::Task(_) => {
            return Err(Error::InvalidAgentResponse(
                "an executor reports events, not whole tasks".into(),
            ))
        }
    }
    Ok(())
}

/// Merges the object `extra` into the task's metadata.
fn merge(task: &mut Task, extra: &Map<String, Value>) {
    let mut merged = match task.metadata.take() {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    merged.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    task.metadata = Some(Value::Object(merged));
}

/// The channel of the sink's task, locked, with the task created (a first event that is a
/// message is the direct answer instead: sent, and `None`); `None` also when the task has
/// no channel any more (it ended).
async fn open<'a>(
    sink: &EventSink,
    channel: &'a Channel,
    first: Option<&StreamResponse>,
) -> Result<Option<tokio::sync::MutexGuard<'a, ()>>> {
    let guard = channel.lock.lock().await;
    if channel.answered.load(Ordering::SeqCst) {
        return Err(Error::InvalidAgentResponse(
            "an event after the direct message answer".into(),
        ));
    }
    if !channel.created.load(Ordering::SeqCst) {
        if let Some(StreamResponse::Message(message)) = first {
            // A direct answer: no task is created.
            let mut message = message.clone();
            message.task_id = None;
            channel.answered.store(true, Ordering::SeqCst);
            channel.send(0, StreamResponse::Message(message));
            return Ok(None);
        }
        create_if_needed(sink, channel).await?;
    }
    Ok(Some(guard))
}

/// Applies one executor event to the stored task and sends it to the task's streams.
pub(crate) async fn publish(sink: &EventSink, event: StreamResponse) -> Result<()> {
    let shared = &sink.shared;
    let Some(channel) = shared.channel(&sink.task_id, false) else {
        tracing::debug!(task_id = %sink.task_id, "a2a event after the task ended is dropped");
        return Ok(());
    };
    let Some(_guard) = open(sink, &channel, Some(&event)).await? else {
        shared.close(&sink.task_id, &channel);
        return Ok(());
    };
    let written = update(sink, |task| {
        if task.status.state.is_terminal() {
            return Ok(false);
        }
        change(task, &event)?;
        Ok(true)
    })
    .await?;
    let Some(task) = written else {
        tracing::debug!(task_id = %sink.task_id, "a2a event for a terminal task is dropped");
        return Ok(());
    };
    if matches!(event, StreamResponse::Message(_)) {
        // A message after the task exists joins its history only.
        return Ok(());
    }
    channel.send(0, event.clone());
    push(sink, &event);
    if task.status.state.is_terminal() {
        shared.close(&sink.task_id, &channel);
    }
    Ok(())
}

/// Applies step `seq` of the executor's ordered source — `events` (status and artifact
/// updates) and the `metadata` merge, the applied seq set to `seq` — in one write, exactly
/// once however many processes apply it: the store takes it only while its applied seq is
/// below `seq`. The writer sends the events to its streams and webhooks; a process whose
/// store write lost to another's sends them to its own streams only (their subscribers
/// have not seen them: a subscriber skips the steps its snapshot already has), and one that
/// sent them before does nothing. Whether this call wrote the step.
pub(crate) async fn apply_step(
    sink: &EventSink,
    seq: u64,
    events: Vec<StreamResponse>,
    metadata: Value,
) -> Result<bool> {
    let Value::Object(extra) = metadata else {
        return Err(Error::Internal("task metadata must be an object".into()));
    };
    if events.iter().any(|e| {
        !matches!(
            e,
            StreamResponse::StatusUpdate(_) | StreamResponse::ArtifactUpdate(_)
        )
    }) {
        return Err(Error::InvalidAgentResponse(
            "a step has status and artifact updates only".into(),
        ));
    }
    let shared = &sink.shared;
    let Some(channel) = shared.channel(&sink.task_id, false) else {
        tracing::debug!(task_id = %sink.task_id, seq, "a2a step after the task ended is dropped");
        return Ok(false);
    };
    let Some(_guard) = open(sink, &channel, None).await? else {
        return Ok(false);
    };
    if channel.carried.load(Ordering::SeqCst) >= seq {
        return Ok(false);
    }
    let mut elsewhere = false;
    let written = update(sink, |task| {
        if applied_seq(task) >= seq {
            elsewhere = true;
            return Ok(false);
        }
        if task.status.state.is_terminal() {
            return Ok(false);
        }
        for event in &events {
            change(task, event)?;
        }
        merge(task, &extra);
        set_applied_seq(task, seq);
        Ok(true)
    })
    .await?;
    if written.is_none() && !elsewhere {
        tracing::debug!(task_id = %sink.task_id, seq, "a2a step for a terminal task is dropped");
        return Ok(false);
    }
    channel.carried.store(seq, Ordering::SeqCst);
    let mut terminal = false;
    for event in events {
        if let StreamResponse::StatusUpdate(u) = &event {
            terminal |= u.status.state.is_terminal();
        }
        if written.is_some() {
            push(sink, &event);
        }
        channel.send(seq, event);
    }
    if terminal {
        shared.close(&sink.task_id, &channel);
    }
    Ok(written.is_some())
}

fn push(sink: &EventSink, event: &StreamResponse) {
    if let Some(push) = &sink.shared.push {
        push.dispatch(
            sink.shared.store.clone(),
            &sink.owner,
            &sink.task_id,
            event.clone(),
        );
    }
}

/// Merges an object into the stored task's metadata (under the channel's lock when there is
/// one); no event. A terminal task keeps its metadata.
pub(crate) async fn merge_metadata(sink: &EventSink, metadata: Value) -> Result<()> {
    let Value::Object(extra) = metadata else {
        return Err(Error::Internal("task metadata must be an object".into()));
    };
    let channel = sink.shared.channel(&sink.task_id, false);
    let _guard = match &channel {
        Some(c) => open(sink, c, None).await?,
        None => None,
    };
    let written = update(sink, |task| {
        if task.status.state.is_terminal() {
            return Ok(false);
        }
        merge(task, &extra);
        Ok(true)
    })
    .await?;
    if written.is_none() {
        tracing::debug!(task_id = %sink.task_id, "a2a metadata for a terminal task is dropped");
    }
    Ok(())
}

impl Channel {
    /// Sends `event` of step `step` (0: an event that is no step) to the task's streams.
    fn send(&self, step: u64, event: StreamResponse) {
        let _ = self.tx.send(Carried { step, event });
    }
}
