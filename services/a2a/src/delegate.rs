//! Delegating to a remote A2A agent: read its card, send the message, and follow the
//! remote task until it is terminal or interrupted — over the stream when the card says
//! streaming, else through the blocking `SendMessage` — reporting each step to a
//! [`Steps`] sink (the runtime journals them). Nothing polls in the background: a task
//! still working when the call's time is up is left to a later call with its `task_id`,
//! which advances it with one `GetTask` (or follows its stream again) — the lazy advance of
//! the lume-a2a seed's `observe_delegate`.
//!
//! A remote agent that cannot be reached (card, address, connection, credentials, time
//! limit) is an [`Outcome`] with state input-required and the reason (and the remote task's
//! id when it had one): the caller decides what to do; nothing is ever run locally instead.
//! [`resume`] picks such a task up again: it asks where the task stands and, when the agent
//! restarted under it (a status message marked by [`restart_marker`]), sends the original
//! message on the same task to continue it in place — never a new task.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;

use crate::client::{A2aClient, ClientError, Endpoint, EventStream, Target};
use crate::types::{
    Artifact, Message, Part, PartContent, Role, SendMessageRequest, StreamResponse, Task, TaskState,
};

/// What to send: a new message (optionally continuing `task_id` / `context_id`), or
/// nothing — then `task_id` names a task to check on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Request {
    pub text: Option<String>,
    pub task_id: Option<String>,
    pub context_id: Option<String>,
}

/// The key of a status message's metadata that says why a task is interrupted.
const INTERRUPTED_KEY: &str = "interrupted";
/// Its value when the agent restarted while the task ran (Lumina's crash recovery).
const INTERRUPTED_BY_RESTART: &str = "restart";

/// The metadata of a status message saying the task is input-required because the agent
/// restarted while it ran: a message on the same task continues it. Lumina's executor
/// marks such tasks; [`resume`] recognises them.
pub fn restart_marker() -> serde_json::Value {
    serde_json::json!({ INTERRUPTED_KEY: INTERRUPTED_BY_RESTART })
}

/// Whether `message` carries [`restart_marker`].
pub fn interrupted_by_restart(message: &Message) -> bool {
    message
        .metadata
        .as_ref()
        .and_then(|m| m.get(INTERRUPTED_KEY))
        .and_then(serde_json::Value::as_str)
        == Some(INTERRUPTED_BY_RESTART)
}

/// A step of a delegation, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The card was read (`cached`: without a request).
    Card {
        name: String,
        cached: bool,
        streaming: bool,
    },
    /// The remote task exists (or a direct message answered).
    Sent {
        task_id: Option<String>,
        state: TaskState,
    },
    Status {
        task_id: Option<String>,
        state: TaskState,
        text: String,
    },
    Artifact {
        task_id: Option<String>,
        name: String,
    },
    /// The call stops following the task.
    Ended {
        task_id: Option<String>,
        state: TaskState,
        text: String,
    },
    Unreachable {
        reason: String,
    },
}

/// Where the steps go.
#[async_trait]
pub trait Steps: Send + Sync {
    async fn step(&self, step: Step);
}

/// Steps nobody records.
pub struct NoSteps;

#[async_trait]
impl Steps for NoSteps {
    async fn step(&self, _step: Step) {}
}

/// How a delegation ended for this call.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The remote task's state: terminal, interrupted, or still working (the call's time
    /// was up). Input-required too when the agent was unreachable (`unreachable` says why).
    pub state: TaskState,
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    /// The last status message's text, or the direct message's.
    pub message: Option<String>,
    pub artifacts: Vec<Artifact>,
    pub unreachable: Option<String>,
    /// The task is input-required because the agent restarted while it ran
    /// ([`restart_marker`]): a message on it continues it.
    pub restarted: bool,
}

impl Outcome {
    /// Unreachable; `task_id` / `context_id`: the remote task the call had been following,
    /// if any (it may still run there).
    fn unreachable(reason: String, task_id: Option<String>, context_id: Option<String>) -> Self {
        Self {
            state: TaskState::InputRequired,
            task_id,
            context_id,
            message: None,
            artifacts: Vec::new(),
            unreachable: Some(reason),
            restarted: false,
        }
    }

    /// Unreachable while a remote task was being followed: a retry can pick the task up
    /// ([`resume`]) instead of sending anything new.
    pub fn lost_task(&self) -> Option<&str> {
        self.unreachable.as_ref().and(self.task_id.as_deref())
    }

    /// Whether the delegation failed: unreachable, or the task failed, was rejected or
    /// canceled.
    pub fn is_error(&self) -> bool {
        self.unreachable.is_some()
            || matches!(
                self.state,
                TaskState::Failed | TaskState::Rejected | TaskState::Canceled
            )
    }

    /// The artifacts as text: each under its name, text parts as they are, data as JSON,
    /// URLs as links, raw bytes named but not shown.
    pub fn artifacts_text(&self) -> String {
        let mut out = String::new();
        for artifact in &self.artifacts {
            let name = artifact
                .name
                .clone()
                .unwrap_or_else(|| artifact.artifact_id.clone());
            out.push_str(&format!("## {name}\n"));
            for part in &artifact.parts {
                out.push_str(&part_text(part));
                out.push('\n');
            }
        }
        out
    }

    /// What the remote task produced, as plain text: the one artifact's parts (several:
    /// each under its name), else the last status or direct message. Empty when neither.
    pub fn result_text(&self) -> String {
        match self.artifacts.as_slice() {
            [] => self.message.clone().unwrap_or_default(),
            [only] => only
                .parts
                .iter()
                .map(part_text)
                .collect::<Vec<_>>()
                .join("\n"),
            _ => self.artifacts_text(),
        }
    }

    /// The report a caller (the model) reads: what happened and what it can do next.
    pub fn report(&self, agent: &str, waited: Duration) -> String {
        let task = self.task_id.as_deref().unwrap_or("-");
        let message = self.message.as_deref().unwrap_or("").trim();
        if let Some(reason) = &self.unreachable {
            return format!(
                "input-required: the A2A agent `{agent}` could not be reached: {reason}. \
                 Nothing was run locally; bring the agent up, choose another agent, or try \
                 again later."
            );
        }
        match self.state {
            TaskState::Completed => {
                let mut out = format!("The A2A agent `{agent}` completed task {task}.\n");
                let artifacts = self.artifacts_text();
                if !artifacts.is_empty() {
                    out.push('\n');
                    out.push_str(&artifacts);
                }
                if !message.is_empty() && (artifacts.is_empty() || self.task_id.is_none()) {
                    out.push('\n');
                    out.push_str(message);
                    out.push('\n');
                }
                out
            }
            TaskState::InputRequired | TaskState::AuthRequired => {
                let what = if self.state == TaskState::InputRequired {
                    "input-required"
                } else {
                    "auth-required"
                };
                format!(
                    "{what}: the A2A agent `{agent}` needs more from you on task {task}: \
                     {message}\nAnswer with a2a_delegate{{agent: \"{agent}\", task_id: \
                     \"{task}\", message: \"…\"}}."
                )
            }
            TaskState::Failed | TaskState::Rejected | TaskState::Canceled => {
                let state = self.state.v03_name();
                let mut out = format!("The A2A agent `{agent}` {state} task {task}: {message}");
                let artifacts = self.artifacts_text();
                if !artifacts.is_empty() {
                    out.push_str("\n\n");
                    out.push_str(&artifacts);
                }
                out
            }
            TaskState::Submitted | TaskState::Working | TaskState::Unspecified => format!(
                "The A2A agent `{agent}` is still working on task {task} after {} s{}. \
                 Nothing follows it meanwhile; check on it later with a2a_delegate{{agent: \
                 \"{agent}\", task_id: \"{task}\"}}.",
                waited.as_secs(),
                if message.is_empty() {
                    String::new()
                } else {
                    format!(" ({message})")
                }
            ),
        }
    }
}

fn part_text(part: &Part) -> String {
    match &part.content {
        PartContent::Text(text) => text.clone(),
        PartContent::Data(data) => {
            serde_json::to_string_pretty(data).unwrap_or_else(|_| data.to_string())
        }
        PartContent::Url(url) => match &part.filename {
            Some(name) => format!("[{name}]({url})"),
            None => url.clone(),
        },
        PartContent::Raw(raw) => format!(
            "[file {} ({}), {} bytes of base64, not shown]",
            part.filename.as_deref().unwrap_or("unnamed"),
            part.media_type.as_deref().unwrap_or("unknown type"),
            raw.len()
        ),
    }
}

/// The task as this call saw it.
#[derive(Default)]
struct Tracker {
    task_id: Option<String>,
    context_id: Option<String>,
    state: Option<TaskState>,
    message: Option<String>,
    artifacts: Vec<Artifact>,
    direct: bool,
    restarted: bool,
}

impl Tracker {
    fn done(&self) -> bool {
        self.direct
            || self
                .state
                .is_some_and(|s| s.is_terminal() || s.is_interrupted())
    }

    fn status_text(message: Option<&Message>) -> Option<String> {
        message.map(Message::text).filter(|t| !t.trim().is_empty())
    }

    fn task(&mut self, task: Task) {
        self.task_id = Some(task.id);
        self.context_id = Some(task.context_id);
        self.state = Some(task.status.state);
        self.restarted = task.status.state.is_interrupted()
            && task
                .status
                .message
                .as_ref()
                .is_some_and(interrupted_by_restart);
        if let Some(text) = Self::status_text(task.status.message.as_ref()) {
            self.message = Some(text);
        }
        if !task.artifacts.is_empty() {
            self.artifacts = task.artifacts;
        }
    }

    /// Applies one event and says which step it was.
    fn apply(&mut self, event: StreamResponse) -> Step {
        match event {
            StreamResponse::Task(task) => {
                let first = self.task_id.is_none();
                self.task(task);
                let state = self.state.unwrap_or(TaskState::Unspecified);
                if first {
                    Step::Sent {
                        task_id: self.task_id.clone(),
                        state,
                    }
                } else {
                    Step::Status {
                        task_id: self.task_id.clone(),
                        state,
                        text: self.message.clone().unwrap_or_default(),
                    }
                }
            }
            StreamResponse::Message(message) => {
                self.direct = true;
                self.state = Some(TaskState::Completed);
                if message.task_id.is_some() {
                    self.task_id = message.task_id.clone();
                }
                if message.context_id.is_some() {
                    self.context_id = message.context_id.clone();
                }
                self.message = Some(message.text());
                Step::Sent {
                    task_id: self.task_id.clone(),
                    state: TaskState::Completed,
                }
            }
            StreamResponse::StatusUpdate(update) => {
                self.task_id.get_or_insert(update.task_id);
                self.context_id.get_or_insert(update.context_id);
                self.state = Some(update.status.state);
                self.restarted = update.status.state.is_interrupted()
                    && update
                        .status
                        .message
                        .as_ref()
                        .is_some_and(interrupted_by_restart);
                let text = Self::status_text(update.status.message.as_ref());
                if let Some(text) = &text {
                    self.message = Some(text.clone());
                }
                Step::Status {
                    task_id: self.task_id.clone(),
                    state: update.status.state,
                    text: text.unwrap_or_default(),
                }
            }
            StreamResponse::ArtifactUpdate(update) => {
                self.task_id.get_or_insert(update.task_id);
                let artifact = update.artifact;
                let name = artifact
                    .name
                    .clone()
                    .unwrap_or_else(|| artifact.artifact_id.clone());
                match self
                    .artifacts
                    .iter_mut()
                    .find(|a| a.artifact_id == artifact.artifact_id)
                {
                    Some(existing) if update.append => existing.parts.extend(artifact.parts),
                    Some(existing) => *existing = artifact,
                    None => self.artifacts.push(artifact),
                }
                Step::Artifact {
                    task_id: self.task_id.clone(),
                    name,
                }
            }
        }
    }

    fn outcome(self) -> Outcome {
        Outcome {
            state: self.state.unwrap_or(TaskState::Unspecified),
            task_id: self.task_id,
            context_id: self.context_id,
            message: self.message,
            artifacts: self.artifacts,
            unreachable: None,
            restarted: self.restarted,
        }
    }
}

/// Cancels the remote task `task_id` (a delegation given up: its run was interrupted), so
/// no work goes on for nobody. The remote task's state afterwards.
pub async fn cancel(
    client: &A2aClient,
    target: &Target,
    task_id: &str,
) -> Result<TaskState, ClientError> {
    let (card, _) = client.card(target).await?;
    let endpoint = card.endpoint()?;
    let task = client.cancel_task(target, &endpoint, task_id).await?;
    Ok(task.status.state)
}

/// Delegates `request` to `target` and follows the remote task for at most `limit`.
pub async fn follow(
    client: &A2aClient,
    target: &Target,
    request: Request,
    limit: Duration,
    steps: &dyn Steps,
) -> Outcome {
    let started = Instant::now();
    let remaining = || limit.saturating_sub(started.elapsed());
    // A task the request names is the one a retry can pick up, even when the card fails.
    let known = (request.task_id.clone(), request.context_id.clone());
    let unreachable = |reason: String, task: (Option<String>, Option<String>)| async move {
        steps
            .step(Step::Unreachable {
                reason: reason.clone(),
            })
            .await;
        Outcome::unreachable(reason, task.0, task.1)
    };
    let (card, cached) = match client.card(target).await {
        Ok(card) => card,
        Err(e) => return unreachable(format!("its card: {e}"), known).await,
    };
    let endpoint = match card.endpoint() {
        Ok(endpoint) => endpoint,
        Err(e) => return unreachable(e.to_string(), known).await,
    };
    steps
        .step(Step::Card {
            name: card.name.clone(),
            cached,
            streaming: endpoint.streaming,
        })
        .await;
    let mut tracker = Tracker::default();
    let result = match request.text {
        None => {
            observe(
                client,
                target,
                &endpoint,
                request,
                &mut tracker,
                steps,
                remaining,
            )
            .await
        }
        Some(text) => {
            let message = Message {
                message_id: uuid::Uuid::new_v4().to_string(),
                context_id: request.context_id,
                task_id: request.task_id,
                role: Role::User,
                parts: vec![Part::text(text)],
                metadata: None,
                extensions: Vec::new(),
                reference_task_ids: Vec::new(),
            };
            let send = SendMessageRequest {
                tenant: None,
                message,
                configuration: None,
                metadata: None,
            };
            if endpoint.streaming {
                match client
                    .send_stream(target, &endpoint, &send, remaining())
                    .await
                {
                    Ok(events) => {
                        follow_stream(
                            client,
                            target,
                            &endpoint,
                            events,
                            &mut tracker,
                            steps,
                            remaining,
                        )
                        .await
                    }
                    Err(e) => Err(e),
                }
            } else {
                match client.send(target, &endpoint, &send, remaining()).await {
                    Ok(answer) => {
                        let step = tracker.apply(answer);
                        steps.step(step).await;
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
        }
    };
    if let Err(error) = result {
        // The card may have moved with the agent: read it again next time.
        client.forget_card(target);
        let reason = match &tracker.task_id {
            Some(id) => {
                format!("{error} (its task {id} may still run there: check on it with its task_id)")
            }
            None => error.to_string(),
        };
        let task = match tracker.task_id.clone() {
            Some(id) => (Some(id), tracker.context_id.clone()),
            None => known,
        };
        return unreachable(reason, task).await;
    }
    let outcome = tracker.outcome();
    steps
        .step(Step::Ended {
            task_id: outcome.task_id.clone(),
            state: outcome.state,
            text: outcome.message.clone().unwrap_or_default(),
        })
        .await;
    outcome
}

/// Picks up the remote task `task_id` that a call lost when the agent became unreachable:
/// asks where it stands (following it while it works, for at most `limit`); when the agent
/// restarted under it ([`restart_marker`]) and `text` — the message the task was sent
/// with — is given, sends it again *on the same task*, which continues it in place. Never
/// a new task: the remote agent does not run the work twice.
pub async fn resume(
    client: &A2aClient,
    target: &Target,
    task_id: &str,
    text: Option<String>,
    limit: Duration,
    steps: &dyn Steps,
) -> Outcome {
    let started = Instant::now();
    let check = Request {
        text: None,
        task_id: Some(task_id.to_owned()),
        context_id: None,
    };
    let outcome = follow(client, target, check, limit, steps).await;
    match text {
        Some(text) if outcome.restarted && outcome.unreachable.is_none() => {
            let again = Request {
                text: Some(text),
                task_id: Some(task_id.to_owned()),
                context_id: outcome.context_id.clone(),
            };
            follow(
                client,
                target,
                again,
                limit.saturating_sub(started.elapsed()),
                steps,
            )
            .await
        }
        _ => outcome,
    }
}

/// Checks on an existing task: one `GetTask`; if it is still going and the agent streams,
/// follows it with `SubscribeToTask` for the rest of the time.
async fn observe(
    client: &A2aClient,
    target: &Target,
    endpoint: &Endpoint,
    request: Request,
    tracker: &mut Tracker,
    steps: &dyn Steps,
    remaining: impl Fn() -> Duration,
) -> Result<(), ClientError> {
    let Some(task_id) = request.task_id else {
        return Err(ClientError::BadResponse(
            "neither a message nor a task to check on".into(),
        ));
    };
    let task = client.get_task(target, endpoint, &task_id).await?;
    let step = tracker.apply(StreamResponse::Task(task));
    steps.step(step).await;
    if tracker.done() || !endpoint.streaming || remaining().is_zero() {
        return Ok(());
    }
    let events = client
        .subscribe(target, endpoint, &task_id, remaining())
        .await?;
    follow_stream(client, target, endpoint, events, tracker, steps, remaining).await
}

/// Reads events until the task is terminal or interrupted, the stream ends, or the time
/// is up (then the task is reported as it stands).
async fn follow_stream(
    client: &A2aClient,
    target: &Target,
    endpoint: &Endpoint,
    mut events: EventStream,
    tracker: &mut Tracker,
    steps: &dyn Steps,
    remaining: impl Fn() -> Duration,
) -> Result<(), ClientError> {
    loop {
        let next = match tokio::time::timeout(remaining(), events.next()).await {
            Err(_) => return Ok(()),
            Ok(next) => next,
        };
        match next {
            Some(Ok(event)) => {
                let step = tracker.apply(event);
                steps.step(step).await;
                if tracker.done() {
                    return Ok(());
                }
            }
            Some(Err(error)) => return Err(error),
            None => {
                // The stream closed before a final state: ask once where the task stands.
                if let Some(id) = tracker.task_id.clone() {
                    if !tracker.done() {
                        let task = client.get_task(target, endpoint, &id).await?;
                        let step = tracker.apply(StreamResponse::Task(task));
                        steps.step(step).await;
                    }
                }
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{TaskArtifactUpdateEvent, TaskStatus, TaskStatusUpdateEvent};
    use pretty_assertions::assert_eq;

    fn artifact(id: &str, text: &str) -> Artifact {
        Artifact {
            artifact_id: id.into(),
            name: Some("result".into()),
            description: None,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: Vec::new(),
        }
    }

    #[test]
    fn appended_chunks_make_one_artifact_and_the_state_ends_it() {
        let mut t = Tracker::default();
        let task = Task {
            id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Submitted,
                message: None,
                timestamp: None,
            },
            artifacts: Vec::new(),
            history: Vec::new(),
            metadata: None,
        };
        assert!(matches!(
            t.apply(StreamResponse::Task(task)),
            Step::Sent { .. }
        ));
        for (text, append) in [("chunk-1 ", false), ("chunk-2", true)] {
            t.apply(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: "t".into(),
                context_id: "c".into(),
                artifact: artifact("a", text),
                append,
                last_chunk: append,
                metadata: None,
            }));
        }
        assert!(!t.done());
        t.apply(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Completed,
                message: None,
                timestamp: None,
            },
            metadata: None,
        }));
        assert!(t.done());
        let outcome = t.outcome();
        assert_eq!(outcome.artifacts_text(), "## result\nchunk-1 \nchunk-2\n");
        assert_eq!(
            outcome.report("r", Duration::ZERO),
            "The A2A agent `r` completed task t.\n\n## result\nchunk-1 \nchunk-2\n"
        );
        assert!(!outcome.is_error());
    }

    fn status(state: TaskState, metadata: Option<serde_json::Value>) -> StreamResponse {
        let mut message = Message::agent(vec![Part::text("why")], Some("t"), Some("c"));
        message.metadata = metadata;
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state,
                message: Some(message),
                timestamp: None,
            },
            metadata: None,
        })
    }

    #[test]
    fn only_a_marked_interruption_is_a_restart() {
        // A question from the agent is not a restart: answering it with the original
        // message would be wrong.
        let mut t = Tracker::default();
        t.apply(status(TaskState::InputRequired, None));
        assert!(t.done());
        assert!(!t.outcome().restarted);

        let mut t = Tracker::default();
        t.apply(status(TaskState::InputRequired, Some(restart_marker())));
        let outcome = t.outcome();
        assert!(outcome.restarted);
        assert_eq!(outcome.task_id.as_deref(), Some("t"));
        assert_eq!(outcome.lost_task(), None);

        // Working again after the marked status: no longer a restart.
        let mut t = Tracker::default();
        t.apply(status(TaskState::InputRequired, Some(restart_marker())));
        t.apply(status(TaskState::Working, Some(restart_marker())));
        assert!(!t.outcome().restarted);
    }

    #[test]
    fn an_unreachable_agent_keeps_the_task_it_was_following() {
        let lost = Outcome::unreachable("stream cut".into(), Some("t".into()), Some("c".into()));
        assert_eq!(lost.lost_task(), Some("t"));
        assert!(lost.is_error());
        let never_sent = Outcome::unreachable("refused".into(), None, None);
        assert_eq!(never_sent.lost_task(), None);
    }

    #[test]
    fn unreachable_is_input_required_with_the_reason() {
        let outcome = Outcome::unreachable("cannot reach https://x: refused".into(), None, None);
        assert_eq!(outcome.state, TaskState::InputRequired);
        assert!(outcome.is_error());
        let report = outcome.report("x", Duration::ZERO);
        assert!(report.starts_with("input-required: "), "{report}");
        assert!(report.contains("cannot reach https://x: refused"));
        assert!(report.contains("Nothing was run locally"));
    }
}
