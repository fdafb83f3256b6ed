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
//! | `delegate.updated` step `waiting` | `TASK_STATE_INPUT_REQUIRED` (a delegation parked: its agent is unreachable) |
//! | a later `delegate.updated` of that call from the agent | `TASK_STATE_WORKING` |
//! | `mcp.sign_in_required` / `mcp.sign_in_ended` | `TASK_STATE_AUTH_REQUIRED` while a sign-in is open, then `TASK_STATE_WORKING` ([`super::sign_in`]) |
//! | `run.completed` | artifact `result` (the final text), then `TASK_STATE_COMPLETED` |
//! | `run.failed` | `TASK_STATE_FAILED` |
//! | `run.interrupted` by crash recovery | `TASK_STATE_INPUT_REQUIRED`, marked as a restart (a message continues the task) |
//! | `run.interrupted` otherwise | `TASK_STATE_CANCELED` |
//!
//! The task's metadata `lumina` holds `sessionId`, `runId`, `lastSeq` (the last journal
//! event applied), `pendingRequest` (the permission request waiting for an answer) and
//! `parkedCall` (the parked `a2a_delegate` call) and `signIns` (the MCP sign-ins still
//! open), so a task nobody follows (after a restart) catches up from the journal on the next
//! read, and a read of a parked task retries its agent ([`Executor::advance`] →
//! `delegate.retry`). An execution keeps following its run through auth-required: the
//! sign-in happens out of band and the run goes on by itself.
//!
//! Each journal event is applied exactly once, however many instances apply it: the
//! execution following the run and, in the cluster, another instance bringing the task up
//! to date on a read may meet on the same event. Its A2A events and the new progress are one
//! step ([`EventSink::apply_step`]): one compare-and-set write on `lastSeq` in the task
//! store (`TaskStore::save_applied`: one statement with a row condition in SQLite and in
//! PostgreSQL), taken only while the stored task has not applied the event; the instance
//! that loses writes nothing and notifies no webhook, and its own streams still see the
//! event once (a subscriber skips what its snapshot already holds).

use std::sync::Arc;

use async_trait::async_trait;
use lumina_a2a::http::Principal;
use lumina_a2a::types::{Message, PartContent, Task, TaskState};
use lumina_a2a::{AgentSkill, Error, EventSink, Executor, ExecutorError, RequestContext};
use lumina_protocol::methods::{
    Identity, PermissionRespondParams, SessionCreateParams, SessionEventsParams,
    SessionEventsResult, SessionInterruptParams, SessionRef, SessionResult, SessionResumeParams,
    SessionSubmitParams, SessionSubmitResult,
};
use lumina_protocol::{Decision, ErrorCode, ErrorObject, EventFrame, Method};
use lumina_runtime::Outbound;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use super::sign_in::OpenSignIns;
use crate::profile::Profile;

mod advance;
mod translate;

use translate::{translate, Change, Flow};

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
    /// The `a2a_delegate` call the run is parked on (its agent unreachable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parked_call: Option<String>,
    #[serde(default, skip_serializing_if = "OpenSignIns::is_empty")]
    sign_ins: OpenSignIns,
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

/// How often, and how far apart, an execution whose session stream ended tries to follow
/// it again (the owner went away: in the cluster another instance takes the session over
/// within a lease TTL and its journal has the rest).
const RESUBSCRIBE_TRIES: u32 = 30;
const RESUBSCRIBE_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

impl RuntimeExecutor {
    /// Applies one journal event of the run to the task as one step
    /// ([`EventSink::apply_step`]): its A2A events and the progress, `lastSeq` the event's
    /// seq, in one compare-and-set write, so the event is applied once however many
    /// instances apply it at the same time (another instance's read brings the task up to
    /// date while this one executes).
    async fn apply(
        &self,
        frame: &EventFrame,
        progress: &mut Progress,
        events: &EventSink,
    ) -> Result<Flow, Error> {
        let Some(change) = translate(frame, progress, events.task_id(), events.context_id()) else {
            return Ok(Flow::Continue);
        };
        match &change {
            Change::Parked(call_id, _) => progress.parked_call = Some(call_id.clone()),
            Change::Resumed => progress.parked_call = None,
            Change::Restarted(_) => {
                progress.parked_call = None;
                progress.pending_request = None;
            }
            // Recorded with the status: the answer may come at once.
            Change::Waiting(request_id, _) => progress.pending_request = Some(request_id.clone()),
            Change::Status(..) | Change::Completed(_) => {}
        }
        let flow = if change.stops() {
            Flow::Stop
        } else {
            Flow::Continue
        };
        progress.last_seq = frame.seq;
        let step = change.events(events.task_id(), events.context_id());
        events
            .apply_step(frame.seq, step, json!({ "lumina": progress }))
            .await?;
        Ok(flow)
    }

    /// The session's events after `progress.last_seq`, through the profile (in the
    /// cluster: from whichever instance owns the session).
    async fn follow(
        &self,
        identity: &Identity,
        progress: &Progress,
    ) -> Result<tokio::sync::mpsc::Receiver<Outbound>, Error> {
        let (_, rx) = self
            .profile
            .subscribe(
                identity,
                &SessionResumeParams {
                    session_id: progress.session_id.clone(),
                    after_seq: progress.last_seq,
                },
            )
            .await
            .map_err(|e| map_error(Method::SessionResume, e))?;
        Ok(rx)
    }
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
            // A message on a task whose delegation is parked: retry the agent now.
            Some(progress) if progress.parked_call.is_some() => {
                self.retry(&identity, &progress).await.map_err(failed)?;
                progress
            }
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
            Some(progress) if !progress.sign_ins.is_empty() => {
                // A message while the run waits for an MCP sign-in: nothing to answer
                // (the sign-in happens in a browser); the task stays auth-required and
                // this execution follows the run on.
                let (state, message) = progress
                    .sign_ins
                    .status(events.task_id(), events.context_id());
                events.status(state, Some(message)).await.map_err(failed)?;
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
                            // A message continuing a task (e.g. one a restart interrupted)
                            // starts a run of its own: the task id alone would find the
                            // task's first run again.
                            idempotency_key: match &ctx.task {
                                None => ctx.task_id.clone(),
                                Some(_) => format!("{}/{}", ctx.task_id, ctx.message.message_id),
                            },
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
                    parked_call: None,
                    sign_ins: OpenSignIns::default(),
                };
                progress.save(&events).await.map_err(failed)?;
                progress
            }
        };
        let mut rx = self.follow(&identity, &progress).await.map_err(failed)?;
        loop {
            let outbound = tokio::select! {
                outbound = rx.recv() => outbound,
                _ = ctx.cancel.cancelled() => return Ok(()),
            };
            let Some(outbound) = outbound else {
                // The stream ended without the run's end: follow again from the last
                // applied event. When that does not work out, the task stays as stored and
                // is brought up to date from the journal when it is next read.
                match self.follow_again(&identity, &progress, &ctx).await {
                    Some(again) => {
                        rx = again;
                        continue;
                    }
                    None => return Ok(()),
                }
            };
            let Outbound::Event(frame) = outbound else {
                continue;
            };
            if frame.seq <= progress.last_seq {
                continue;
            }
            if let Flow::Stop = self
                .apply(&frame, &mut progress, &events)
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
                if let Flow::Stop = self.apply(frame, &mut progress, &events).await? {
                    return Ok(());
                }
                progress.last_seq = frame.seq;
            }
            if !page.more || page.events.is_empty() {
                break;
            }
        }
        // The events read that changed nothing, recorded as a step of their own: it never
        // takes `lastSeq` back below what another instance applied meanwhile.
        events
            .apply_step(progress.last_seq, Vec::new(), json!({ "lumina": progress }))
            .await?;
        Ok(())
    }

    async fn advance(&self, task: &Task, principal: &Principal) -> Result<(), Error> {
        let identity = identity(principal)?;
        self.advance_parked(task, &identity).await
    }

    async fn observe(
        &self,
        task: &Task,
        principal: &Principal,
    ) -> Result<Option<lumina_a2a::EventStream>, Error> {
        use futures::StreamExt;
        let identity = identity(principal)?;
        let opening = Opening {
            profile: self.profile.clone(),
            tasks: self.tasks.clone(),
            identity,
            owner: principal.owner.clone(),
            task_id: task.id.clone(),
            progress: Progress::of(task),
        };
        let (task_id, context_id) = (task.id.clone(), task.context_id.clone());
        let stream = futures::stream::once(opening.open())
            .filter_map(futures::future::ready)
            .flat_map(move |(progress, rx)| {
                let state = Observed {
                    rx,
                    progress,
                    task_id: task_id.clone(),
                    context_id: context_id.clone(),
                    done: false,
                };
                futures::stream::unfold(state, |mut s| async move {
                    if s.done {
                        return None;
                    }
                    loop {
                        let Outbound::Event(frame) = s.rx.recv().await? else {
                            continue;
                        };
                        if frame.seq <= s.progress.last_seq {
                            continue;
                        }
                        s.progress.last_seq = frame.seq;
                        let Some(change) =
                            translate(&frame, &mut s.progress, &s.task_id, &s.context_id)
                        else {
                            continue;
                        };
                        match &change {
                            Change::Parked(call_id, _) => {
                                s.progress.parked_call = Some(call_id.clone());
                            }
                            Change::Resumed | Change::Restarted(_) => s.progress.parked_call = None,
                            _ => {}
                        }
                        s.done = change.terminal();
                        let events = change.events(&s.task_id, &s.context_id);
                        return Some((futures::stream::iter(events), s));
                    }
                })
                .flatten()
            });
        Ok(Some(Box::pin(stream)))
    }
}

/// What [`Executor::observe`] follows: the session's events after the task's progress.
struct Observed {
    rx: tokio::sync::mpsc::Receiver<Outbound>,
    progress: Progress,
    task_id: String,
    context_id: String,
    done: bool,
}

/// How long an observer waits for the executing instance to record the task's run (a
/// task answered with `returnImmediately` exists before its run is submitted).
const OBSERVE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The start of an observation, done when the stream is first polled.
struct Opening {
    profile: Arc<dyn Profile>,
    tasks: Arc<dyn lumina_a2a::TaskStore>,
    identity: Identity,
    owner: String,
    task_id: String,
    progress: Option<Progress>,
}

impl Opening {
    async fn open(self) -> Option<(Progress, tokio::sync::mpsc::Receiver<Outbound>)> {
        let deadline = tokio::time::Instant::now() + OBSERVE_WAIT;
        let mut progress = self.progress;
        while progress.is_none() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            progress = match self.tasks.load(&self.owner, &self.task_id).await {
                Ok(Some(record)) if record.task.status.state.is_terminal() => return None,
                Ok(Some(record)) => Progress::of(&record.task),
                _ => None,
            };
        }
        let progress = progress?;
        let subscribed = self
            .profile
            .subscribe(
                &self.identity,
                &SessionResumeParams {
                    session_id: progress.session_id.clone(),
                    after_seq: progress.last_seq,
                },
            )
            .await;
        match subscribed {
            Ok((_, rx)) => Some((progress, rx)),
            Err(err) => {
                tracing::warn!(task_id = %self.task_id, error = %err.message, "a2a task cannot be observed");
                None
            }
        }
    }
}

impl RuntimeExecutor {
    /// A new subscription after the last one ended, or `None` when none comes within
    /// [`RESUBSCRIBE_TRIES`] or the execution is cancelled (shutdown).
    async fn follow_again(
        &self,
        identity: &Identity,
        progress: &Progress,
        ctx: &RequestContext,
    ) -> Option<tokio::sync::mpsc::Receiver<Outbound>> {
        for _ in 0..RESUBSCRIBE_TRIES {
            tokio::select! {
                _ = tokio::time::sleep(RESUBSCRIBE_PAUSE) => {}
                _ = ctx.cancel.cancelled() => return None,
            }
            match self.follow(identity, progress).await {
                Ok(rx) => return Some(rx),
                Err(err) => {
                    tracing::debug!(session_id = %progress.session_id, error = %err, "a2a execution cannot follow its session yet");
                }
            }
        }
        tracing::warn!(session_id = %progress.session_id, "a2a execution lost its session stream; the task catches up when read");
        None
    }
}
