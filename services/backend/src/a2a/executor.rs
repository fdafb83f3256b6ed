//! The production A2A executor: a contextId is a Lumina session, a task is one run of it
//! (submitted with the task id as the idempotency key). It goes through the same session
//! operations as the WebSocket (`Profile::call` / `Profile::subscribe`, so the cluster's
//! owner routing applies) and maps the run's journaled events to A2A events as they are
//! journaled:
//!
//! | journal event | A2A |
//! |---|---|
//! | `run.started` | `TASK_STATE_WORKING` |
//! | `message.assistant` (with text) | `TASK_STATE_WORKING` with the text as an agent message |
//! | `permission.requested` | `TASK_STATE_INPUT_REQUIRED` (the next message answers it) |
//! | `run.completed` | artifact `result` (the final text), then `TASK_STATE_COMPLETED` |
//! | `run.failed` | `TASK_STATE_FAILED` |
//! | `run.interrupted` | `TASK_STATE_CANCELED` |
//!
//! The task's metadata `lumina` holds `sessionId`, `runId`, `lastSeq` (the last journal
//! event applied) and `pendingRequest` (the permission request waiting for an answer), so a
//! task nobody follows (after a restart) catches up from the journal on the next read.

use std::sync::Arc;

use async_trait::async_trait;
use lumina_a2a::http::Principal;
use lumina_a2a::types::{Artifact, Message, Part, PartContent, Task, TaskState};
use lumina_a2a::{AgentSkill, Error, EventSink, Executor, ExecutorError, RequestContext};
use lumina_protocol::methods::{
    Identity, PermissionRespondParams, SessionCreateParams, SessionEventsParams,
    SessionEventsResult, SessionInterruptParams, SessionRef, SessionResult, SessionResumeParams,
    SessionSubmitParams, SessionSubmitResult,
};
use lumina_protocol::{Decision, ErrorCode, ErrorObject, Event, EventFrame, Method};
use lumina_runtime::Outbound;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::profile::Profile;

pub struct RuntimeExecutor {
    profile: Arc<dyn Profile>,
    /// The service's task store: a peer deployment may only continue contexts of its own
    /// tasks.
    tasks: Arc<dyn lumina_a2a::TaskStore>,
}

impl RuntimeExecutor {
    pub fn new(profile: Arc<dyn Profile>, tasks: Arc<dyn lumina_a2a::TaskStore>) -> Self {
        Self { profile, tasks }
    }

    /// Whether `principal` may name `session_id` as its context: the profile's users any
    /// of their sessions; a peer deployment (`peer:<node>`) only contexts its own tasks
    /// were in, never the user's other sessions.
    async fn may_use_context(
        &self,
        principal: &Principal,
        identity: &Identity,
        session_id: &str,
    ) -> bool {
        if !identity.sub.starts_with("peer:") {
            return true;
        }
        self.tasks
            .list(&principal.owner, Some(session_id))
            .await
            .is_ok_and(|tasks| !tasks.is_empty())
    }

    async fn call<T: DeserializeOwned>(
        &self,
        identity: &Identity,
        method: Method,
        params: impl Serialize,
    ) -> Result<T, Error> {
        let params = serde_json::to_value(params).map_err(|e| Error::Internal(e.to_string()))?;
        let value = self
            .profile
            .call(identity, method, params)
            .await
            .map_err(|e| map_error(method, e))?;
        serde_json::from_value(value).map_err(|e| Error::Internal(format!("{method:?}: {e}")))
    }
}

fn map_error(method: Method, error: ErrorObject) -> Error {
    match error.code {
        ErrorCode::NotFound => Error::TaskNotFound(error.message),
        ErrorCode::InvalidParams | ErrorCode::Conflict => Error::InvalidParams(error.message),
        ErrorCode::Forbidden | ErrorCode::Unauthorized => {
            Error::InvalidRequest("the credentials do not allow this".into())
        }
        _ => Error::Internal(format!("{method:?}: {}", error.message)),
    }
}

fn identity(principal: &Principal) -> Result<Identity, Error> {
    serde_json::from_value(principal.identity.clone())
        .map_err(|_| Error::Internal("the caller has no Lumina identity".into()))
}

fn failed(error: Error) -> ExecutorError {
    ExecutorError::Failed(error.to_string())
}

/// What the executor remembers in the task's metadata (`lumina`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Progress {
    session_id: String,
    run_id: String,
    last_seq: u64,
    #[serde(default)]
    pending_request: Option<String>,
}

impl Progress {
    fn of(task: &Task) -> Option<Self> {
        let value = task.metadata.as_ref()?.get("lumina")?.clone();
        serde_json::from_value(value).ok()
    }

    async fn save(&self, events: &EventSink) -> Result<(), Error> {
        events.set_metadata(json!({ "lumina": self })).await
    }
}

/// The message as a prompt: text parts, then data parts as JSON.
fn prompt(message: &Message) -> String {
    message
        .parts
        .iter()
        .filter_map(|p| match &p.content {
            PartContent::Text(t) => Some(t.clone()),
            PartContent::Data(d) => Some(d.to_string()),
            PartContent::Url(u) => Some(u.clone()),
            PartContent::Raw(_) => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The answer to a permission request: a data part `{"decision": "allow_once" |
/// "allow_session" | "deny"}`, or a text that starts with approve / yes / allow (once),
/// always (session); anything else denies.
fn decision(message: &Message) -> Decision {
    for part in &message.parts {
        if let PartContent::Data(d) = &part.content {
            if let Some(Ok(decision)) = d
                .get("decision")
                .map(|v| serde_json::from_value::<Decision>(v.clone()))
            {
                return decision;
            }
        }
    }
    let text = message.text().trim().to_ascii_lowercase();
    if text.starts_with("always") {
        Decision::AllowSession
    } else if ["approve", "yes", "allow", "ok"]
        .iter()
        .any(|w| text.starts_with(w))
    {
        Decision::AllowOnce
    } else {
        Decision::Deny
    }
}

/// Whether following should stop after this event.
enum Flow {
    Continue,
    Stop,
}

/// Applies one journal event of the run to the task.
async fn apply(
    frame: &EventFrame,
    progress: &mut Progress,
    events: &EventSink,
) -> Result<Flow, Error> {
    let run = progress.run_id.as_str();
    let flow = match &frame.event {
        Event::RunStarted { run_id, .. } if run_id == run => {
            events.status(TaskState::Working, None).await?;
            Flow::Continue
        }
        Event::MessageAssistant { run_id, text, .. } if run_id == run && !text.is_empty() => {
            let message = events.agent_text(text);
            events.status(TaskState::Working, Some(message)).await?;
            Flow::Continue
        }
        Event::PermissionRequested {
            run_id,
            request_id,
            tool,
            preview,
            ..
        } if run_id == run => {
            progress.pending_request = Some(request_id.clone());
            progress.last_seq = frame.seq;
            progress.save(events).await?;
            let mut text = format!(
                "approval needed: the agent wants to run `{tool}`. Reply \"approve\", \"always\" or \"deny\" (or a data part {{\"decision\": \"allow_once\"|\"allow_session\"|\"deny\"}})."
            );
            if let Some(preview) = preview {
                text.push_str("\n\n");
                text.push_str(preview);
            }
            let mut message = events.agent_text(&text);
            message.metadata = Some(json!({"requestId": request_id, "tool": tool}));
            events
                .status(TaskState::InputRequired, Some(message))
                .await?;
            Flow::Stop
        }
        Event::RunCompleted { run_id, result, .. } if run_id == run => {
            let artifact = Artifact {
                artifact_id: format!("{run}-result"),
                name: Some("result".into()),
                description: Some("the run's final answer".into()),
                parts: vec![Part::text(result.clone())],
                metadata: None,
                extensions: Vec::new(),
            };
            events.artifact(artifact, false, true).await?;
            events.status(TaskState::Completed, None).await?;
            Flow::Stop
        }
        Event::RunFailed {
            run_id, message, ..
        } if run_id == run => {
            let message = events.agent_text(message);
            events.status(TaskState::Failed, Some(message)).await?;
            Flow::Stop
        }
        Event::RunInterrupted { run_id, reason } if run_id == run => {
            let message = events.agent_text(reason);
            events.status(TaskState::Canceled, Some(message)).await?;
            Flow::Stop
        }
        _ => Flow::Continue,
    };
    Ok(flow)
}

#[async_trait]
impl Executor for RuntimeExecutor {
    fn skills(&self) -> Vec<AgentSkill> {
        super::catalog()
    }

    async fn new_context(
        &self,
        principal: &Principal,
        requested: Option<&str>,
    ) -> Result<String, Error> {
        let identity = identity(principal)?;
        match requested.filter(|c| !c.is_empty()) {
            Some(session_id) => {
                let refused = || {
                    Error::InvalidParams(format!(
                        "contextId {session_id} is not one of your sessions (omit it to start one)"
                    ))
                };
                if !self.may_use_context(principal, &identity, session_id).await {
                    return Err(refused());
                }
                let _: Value = self
                    .call(
                        &identity,
                        Method::SessionInfo,
                        SessionRef {
                            session_id: session_id.to_owned(),
                        },
                    )
                    .await
                    .map_err(|_| refused())?;
                Ok(session_id.to_owned())
            }
            None => {
                let created: SessionResult = self
                    .call(
                        &identity,
                        Method::SessionCreate,
                        SessionCreateParams {
                            project_root: None,
                            title: Some("A2A".into()),
                        },
                    )
                    .await?;
                Ok(created.session.id)
            }
        }
    }

    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), ExecutorError> {
        let identity = identity(&ctx.principal).map_err(failed)?;
        let pending = ctx.task.as_ref().and_then(Progress::of);
        let mut progress = match pending {
            Some(mut progress) if progress.pending_request.is_some() => {
                let request_id = progress.pending_request.take().unwrap_or_default();
                let _: Value = self
                    .call(
                        &identity,
                        Method::PermissionRespond,
                        PermissionRespondParams {
                            session_id: progress.session_id.clone(),
                            request_id,
                            decision: decision(&ctx.message),
                            reason: Some("answered over A2A".into()),
                        },
                    )
                    .await
                    .map_err(failed)?;
                progress.save(&events).await.map_err(failed)?;
                progress
            }
            _ => {
                let head: SessionEventsResult = self
                    .call(
                        &identity,
                        Method::SessionEvents,
                        SessionEventsParams {
                            session_id: ctx.context_id.clone(),
                            after_seq: 0,
                            limit: Some(1),
                        },
                    )
                    .await
                    .map_err(failed)?;
                let submitted: SessionSubmitResult = self
                    .call(
                        &identity,
                        Method::SessionSubmit,
                        SessionSubmitParams {
                            session_id: ctx.context_id.clone(),
                            idempotency_key: ctx.task_id.clone(),
                            prompt: prompt(&ctx.message),
                            settings: Value::Null,
                            headless: false,
                            mode: None,
                        },
                    )
                    .await
                    .map_err(failed)?;
                let progress = Progress {
                    session_id: ctx.context_id.clone(),
                    run_id: submitted.run_id,
                    last_seq: head.head_seq,
                    pending_request: None,
                };
                progress.save(&events).await.map_err(failed)?;
                progress
            }
        };
        let (_, mut rx) = self
            .profile
            .subscribe(
                &identity,
                &SessionResumeParams {
                    session_id: progress.session_id.clone(),
                    after_seq: progress.last_seq,
                },
            )
            .await
            .map_err(|e| failed(map_error(Method::SessionResume, e)))?;
        loop {
            let outbound = tokio::select! {
                outbound = rx.recv() => outbound,
                _ = ctx.cancel.cancelled() => return Ok(()),
            };
            let Some(outbound) = outbound else {
                return Err(ExecutorError::Failed(
                    "the session's event stream ended".into(),
                ));
            };
            let Outbound::Event(frame) = outbound else {
                continue;
            };
            if frame.seq <= progress.last_seq {
                continue;
            }
            if let Flow::Stop = apply(&frame, &mut progress, &events)
                .await
                .map_err(failed)?
            {
                return Ok(());
            }
        }
    }

    async fn cancel(
        &self,
        task: &Task,
        principal: &Principal,
        events: EventSink,
    ) -> Result<(), Error> {
        if let Some(progress) = Progress::of(task) {
            let identity = identity(principal)?;
            let _: Value = self
                .call(
                    &identity,
                    Method::SessionInterrupt,
                    SessionInterruptParams {
                        session_id: progress.session_id,
                        run_id: Some(progress.run_id),
                    },
                )
                .await?;
        }
        events.status(TaskState::Canceled, None).await
    }

    async fn refresh(
        &self,
        task: &Task,
        principal: &Principal,
        events: EventSink,
    ) -> Result<(), Error> {
        let Some(mut progress) = Progress::of(task) else {
            return Ok(());
        };
        // A task waiting for an approval is followed too: its run may have ended meanwhile
        // (interrupted at shutdown, or closed by crash recovery).
        let identity = identity(principal)?;
        loop {
            let page: SessionEventsResult = self
                .call(
                    &identity,
                    Method::SessionEvents,
                    SessionEventsParams {
                        session_id: progress.session_id.clone(),
                        after_seq: progress.last_seq,
                        limit: Some(500),
                    },
                )
                .await?;
            for frame in &page.events {
                if let Flow::Stop = apply(frame, &mut progress, &events).await? {
                    return Ok(());
                }
                progress.last_seq = frame.seq;
            }
            if !page.more || page.events.is_empty() {
                break;
            }
        }
        progress.save(&events).await
    }
}
