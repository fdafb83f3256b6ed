//! `a2a_delegate{agent, message?, task_id?, context_id?}`: hands a task to a remote A2A
//! agent (docs/a2a.md#delegation) and returns its artifacts as the tool result. Run by the
//! runtime (like `agent`) because it journals each step of the remote task as
//! `delegate.updated` on the run's stream.
//!
//! `agent` names a peer of the `a2a_peers` setting, or a URL under one of the
//! `a2a_allowed_urls` prefixes. Calls to configured peers carry their bearer token and this
//! deployment's peer signature (`peer`); calls to bare URLs carry neither. The call follows
//! the remote task for at most `a2a_delegate_timeout_ms` ([`lumina_a2a::delegate`]); a
//! task still working then is checked on by a later call with its `task_id` (no background
//! poller). An agent that cannot be reached makes the result `input-required` with the
//! reason — the task is never run locally instead.
//!
//! An agent that goes away *while* the call follows its task (killed mid-task) does not end
//! the call: the call is **parked** — `delegate.updated` step `waiting` with the reason,
//! the run waiting on it — until someone retries (`delegate.retry`, which the A2A executor
//! calls when the run's A2A task is read). A retry asks the agent where the task stands and,
//! when it restarted under the task, sends the original message on the same task
//! ([`lumina_a2a::delegate::resume`]); still unreachable → parked again. The parked state is
//! the journal's (the `waiting` step, the open tool call) and the owner's memory (the call
//! waiting to be woken): if this process dies, recovery closes the call like any open one,
//! and `delegate.retry` answers from the journal that it ended ([`history::unparked`]).
//!
//! A check on a remote task (`task_id`, no `message`) goes the way of a retry: when the agent
//! restarted under the task, the message this session last sent on it is sent again on the
//! same task ([`history::last_message`]) — so a conversation continued after this backend
//! restarted picks the task up where it was, never as a new one.
//!
//! Delegation sends project data to another agent, so for permissions it is a write: asked
//! unless a rule allows it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use lumina_a2a::delegate::{self, Outcome, Request, Step, Steps};
use lumina_a2a::{A2aClient, Target};
use lumina_config::Settings;
use lumina_protocol::methods::{DelegateRetryResult, DelegateRetryState};
use lumina_protocol::{DelegateStep, Event};
use lumina_tools::{ToolDescriptor, ToolOutput};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::run::RunContext;

pub(crate) mod history;

pub const DELEGATE_TOOL: &str = "a2a_delegate";

/// Characters of a status line or reason kept in a `delegate.updated` event.
const DETAIL_CHARS: usize = 500;

/// Whether the settings give the tool anyone to call.
pub(crate) fn offered(settings: &Settings) -> bool {
    !settings.a2a_peers.is_empty() || !settings.a2a_allowed_urls.is_empty()
}

/// The tool as the model sees it: the configured peers are named in its description.
pub(crate) fn descriptor(settings: &Settings) -> ToolDescriptor {
    let peers: Vec<&str> = settings.a2a_peers.keys().map(String::as_str).collect();
    let mut description = String::from(
        "Delegate a self-contained task to a remote A2A agent and get its result (artifacts) \
         back. The remote agent does not see this conversation: `message` must say \
         everything it needs. If it asks for input, answer with the same `task_id`; if it \
         is still working when this call returns, call again later with `task_id` and no \
         message to check on it.",
    );
    if !peers.is_empty() {
        description.push_str(&format!(" Configured agents: {}.", peers.join(", ")));
    }
    if !settings.a2a_allowed_urls.is_empty() {
        description.push_str(&format!(
            " Agents may also be named by a URL under: {}.",
            settings.a2a_allowed_urls.join(", ")
        ));
    }
    ToolDescriptor {
        name: DELEGATE_TOOL.into(),
        description,
        input_schema: json!({
            "type": "object",
            "properties": {
                "agent": {"type": "string", "description": "A configured agent's name, or an allowed agent URL."},
                "message": {"type": "string", "description": "The task (or the answer the agent asked for)."},
                "task_id": {"type": "string", "description": "The remote task to continue or check on."},
                "context_id": {"type": "string", "description": "The remote context to continue in (optional)."}
            },
            "required": ["agent"],
            "additionalProperties": false
        }),
        read_only: false,
        edits_files: false,
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    agent: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    context_id: Option<String>,
}

/// Why a call names no one it may call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("`{0}` is neither a configured A2A agent (a2a_peers: {1}) nor a URL allowed by a2a_allowed_urls")]
    Unknown(String, String),
    #[error("{0}")]
    PeerSettings(String),
}

/// The remote agent `agent` names under `settings`, with its credentials.
pub fn resolve_target(settings: &Settings, agent: &str) -> Result<Target, TargetError> {
    if let Some(peer) = settings.a2a_peers.get(agent) {
        let signer = match peer.sign {
            true => lumina_peer::Signer::from_settings(&settings.peer)
                .map_err(|e| TargetError::PeerSettings(e.to_string()))?
                .map(Arc::new),
            false => None,
        };
        return Ok(Target {
            name: agent.to_owned(),
            url: peer.url.clone(),
            bearer: peer.token.clone(),
            signer,
            audience: Some(peer.audience(agent).to_owned()),
        });
    }
    let is_url = agent.starts_with("https://") || agent.starts_with("http://");
    if is_url
        && settings
            .a2a_allowed_urls
            .iter()
            .any(|prefix| !prefix.is_empty() && agent.starts_with(prefix.as_str()))
    {
        // A bare URL gets no credentials: a signature is not bound to its audience.
        return Ok(Target {
            name: agent.to_owned(),
            url: agent.to_owned(),
            bearer: None,
            signer: None,
            audience: None,
        });
    }
    let known: Vec<&str> = settings.a2a_peers.keys().map(String::as_str).collect();
    Err(TargetError::Unknown(
        agent.to_owned(),
        if known.is_empty() {
            "none".into()
        } else {
            known.join(", ")
        },
    ))
}

/// The permission dialog's preview: where the data goes.
pub(crate) fn preview(settings: &Settings, args: &Value) -> Option<String> {
    let agent = args.get("agent").and_then(Value::as_str)?;
    let url = match resolve_target(settings, agent) {
        Ok(target) => target.url,
        Err(_) => "not allowed".into(),
    };
    let message = args
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty());
    let task = args.get("task_id").and_then(Value::as_str);
    match (message, task) {
        (None, Some(task)) => Some(format!(
            "check on task {task} of A2A agent {agent} ({url}); if the agent restarted under \
             it, the message this session last sent on it is sent again, on the same task"
        )),
        (message, _) => Some(format!(
            "send to A2A agent {agent} ({url}):\n{}",
            message.unwrap_or("")
        )),
    }
}

fn capped(text: &str) -> String {
    let mut out: String = text.chars().take(DETAIL_CHARS).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// Journals each step on the run's stream, and remembers the remote task's id (to cancel
/// it when the run is interrupted).
pub(crate) struct JournalSteps<'a> {
    ctx: &'a RunContext,
    call_id: &'a str,
    agent: &'a str,
    task_id: std::sync::Mutex<Option<String>>,
}

impl<'a> JournalSteps<'a> {
    pub(crate) fn new(ctx: &'a RunContext, call_id: &'a str, agent: &'a str) -> Self {
        JournalSteps {
            ctx,
            call_id,
            agent,
            task_id: std::sync::Mutex::new(None),
        }
    }

    /// Journals that the call is parked: `agent` became unreachable while it ran `task_id`.
    async fn waiting(&self, task_id: &str, reason: &str) {
        self.journal(
            DelegateStep::Waiting,
            Some(task_id.to_owned()),
            Some(lumina_a2a::types::TaskState::InputRequired),
            format!("`{}` is unreachable: {reason}", self.agent),
        )
        .await;
    }

    async fn journal(
        &self,
        kind: DelegateStep,
        task_id: Option<String>,
        state: Option<lumina_a2a::types::TaskState>,
        detail: String,
    ) {
        let event = Event::DelegateUpdated {
            run_id: self.ctx.run_id.clone(),
            call_id: self.call_id.to_owned(),
            agent: self.agent.to_owned(),
            step: kind,
            task_id,
            state: state.map(|s| s.wire_name().to_owned()),
            detail: capped(&detail),
        };
        if let Err(err) = self.ctx.append(vec![event]).await {
            tracing::warn!(error = %err, "delegate.updated not journaled");
        }
    }

    /// The remote task's id once the remote named it.
    fn task_id(&self) -> Option<String> {
        self.task_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl Steps for JournalSteps<'_> {
    async fn step(&self, step: Step) {
        let (kind, task_id, state, detail) = match step {
            Step::Card {
                name,
                cached,
                streaming,
            } => (
                DelegateStep::Card,
                None,
                None,
                format!(
                    "{name}{}{}",
                    if cached { " (cached card)" } else { "" },
                    if streaming { ", streaming" } else { "" }
                ),
            ),
            Step::Sent { task_id, state } => {
                (DelegateStep::Sent, task_id, Some(state), String::new())
            }
            Step::Status {
                task_id,
                state,
                text,
            } => (DelegateStep::Status, task_id, Some(state), text),
            Step::Artifact { task_id, name } => (DelegateStep::Artifact, task_id, None, name),
            Step::Ended {
                task_id,
                state,
                text,
            } => (DelegateStep::Ended, task_id, Some(state), text),
            Step::Unreachable { reason } => (
                DelegateStep::Unreachable,
                None,
                Some(lumina_a2a::types::TaskState::InputRequired),
                reason,
            ),
        };
        if let Some(id) = &task_id {
            *self
                .task_id
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(id.clone());
        }
        self.journal(kind, task_id, state, detail).await;
    }
}

/// Wakes a parked call: it answers on the inner sender once its retry knows more.
pub(crate) type Wake = oneshot::Sender<oneshot::Sender<DelegateRetryResult>>;

/// How long `delegate.retry` waits for the retry's verdict (the call goes on after that).
pub const RETRY_ANSWER_WAIT: Duration = Duration::from_secs(15);

/// Wakes a parked call and waits (bounded) for its verdict; `None` when the call is gone.
pub(crate) async fn wake(wake: Wake) -> Option<DelegateRetryResult> {
    let (answer, verdict) = oneshot::channel();
    wake.send(answer).ok()?;
    match tokio::time::timeout(RETRY_ANSWER_WAIT, verdict).await {
        Ok(Ok(result)) => Some(result),
        // The call ended without a verdict (its run was interrupted).
        Ok(Err(_)) => Some(DelegateRetryResult {
            state: DelegateRetryState::Ended,
            detail: "the call ended".into(),
        }),
        Err(_) => Some(DelegateRetryResult {
            state: DelegateRetryState::Working,
            detail: format!(
                "no verdict within {} s; the call goes on",
                RETRY_ANSWER_WAIT.as_secs()
            ),
        }),
    }
}

/// Removes the call's registration when it stops waiting (woken, interrupted, dropped).
struct Parked<'a> {
    ctx: &'a RunContext,
    call_id: &'a str,
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.ctx.session.lock().parked.remove(self.call_id);
    }
}

/// Why a parked call stopped waiting.
enum Woken {
    Retry(oneshot::Sender<DelegateRetryResult>),
    Interrupted,
}

/// Parks the call until a retry (or the run's interruption): registered first, then
/// journaled (`waiting`), so a retry prompted by the journal always finds it; then the
/// retry that found the agent still unreachable (`answer`) hears so.
async fn park(
    ctx: &RunContext,
    steps: &JournalSteps<'_>,
    call_id: &str,
    lost: &Outcome,
    answer: Option<oneshot::Sender<DelegateRetryResult>>,
) -> Woken {
    let (wake, woken) = oneshot::channel();
    ctx.session.lock().parked.insert(call_id.to_owned(), wake);
    let _parked = Parked { ctx, call_id };
    let reason = lost.unreachable.clone().unwrap_or_default();
    steps
        .waiting(lost.task_id.as_deref().unwrap_or("-"), &reason)
        .await;
    if let Some(answer) = answer {
        let _ = answer.send(DelegateRetryResult {
            state: DelegateRetryState::Waiting,
            detail: reason,
        });
    }
    tokio::select! {
        woken = woken => match woken {
            Ok(answer) => Woken::Retry(answer),
            Err(_) => Woken::Interrupted,
        },
        _ = ctx.cancel.cancelled() => Woken::Interrupted,
    }
}

/// Delegates `request` to `target` on behalf of a run; the outcome as a tool result.
/// `resend`: for a check on a task (`task_id`, no message), the message the task was last
/// sent, sent again on it when the agent restarted under it.
pub(crate) async fn run(
    ctx: &RunContext,
    client: &A2aClient,
    target: &Target,
    request: Request,
    resend: Option<String>,
    call_id: &str,
) -> ToolOutput {
    let limit = Duration::from_millis(ctx.settings.settings.a2a_delegate_timeout_ms.max(1));
    let steps = JournalSteps::new(ctx, call_id, &target.name);
    let started = Instant::now();
    let text = request.text.clone().or(resend);
    let check = request
        .text
        .is_none()
        .then(|| request.task_id.clone())
        .flatten();
    let first = async {
        match check {
            Some(task_id) => {
                delegate::resume(client, target, &task_id, text.clone(), limit, &steps).await
            }
            None => delegate::follow(client, target, request, limit, &steps).await,
        }
    };
    let mut outcome = tokio::select! {
        outcome = first => outcome,
        _ = ctx.cancel.cancelled() => return interrupted(client, target, &steps).await,
    };
    // The agent went away under its task: wait for a retry rather than give up on the task
    // (or send it again).
    let mut answer: Option<oneshot::Sender<DelegateRetryResult>> = None;
    while let Some(task_id) = outcome.lost_task().map(str::to_owned) {
        match park(ctx, &steps, call_id, &outcome, answer.take()).await {
            Woken::Retry(next) => answer = Some(next),
            Woken::Interrupted => return interrupted(client, target, &steps).await,
        }
        outcome = tokio::select! {
            outcome = delegate::resume(client, target, &task_id, text.clone(), limit, &steps) => outcome,
            _ = ctx.cancel.cancelled() => return interrupted(client, target, &steps).await,
        };
    }
    if let Some(answer) = answer {
        let _ = answer.send(DelegateRetryResult {
            state: DelegateRetryState::Ended,
            detail: outcome.state.wire_name().to_owned(),
        });
    }
    let mut report = outcome.report(&target.name, started.elapsed());
    let cap = ctx.settings.output_cap_bytes.max(1024);
    if report.len() > cap {
        let mut end = cap;
        while !report.is_char_boundary(end) {
            end -= 1;
        }
        report.truncate(end);
        report.push_str("\n[… cut: the rest of the remote agent's artifacts is not shown]");
    }
    let metadata = json!({
        "agent": target.name,
        "url": target.url,
        "task_id": outcome.task_id,
        "context_id": outcome.context_id,
        "state": outcome.state.wire_name(),
        "unreachable": outcome.unreachable,
    });
    let output = if outcome.is_error() {
        ToolOutput::error(report)
    } else {
        ToolOutput::ok(report)
    };
    output.with_metadata(metadata)
}

/// How long an interrupted delegation waits for the remote to cancel its task.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// The run was interrupted while it followed the remote task: cancel that task (nobody will
/// collect its result), journal how the remote answered, and say so in the tool result.
async fn interrupted(client: &A2aClient, target: &Target, steps: &JournalSteps<'_>) -> ToolOutput {
    let Some(task_id) = steps.task_id() else {
        return ToolOutput::error("interrupted (no remote task was created yet)");
    };
    let cancel = tokio::time::timeout(CANCEL_WAIT, delegate::cancel(client, target, &task_id));
    let (state, text) = match cancel.await {
        Ok(Ok(state)) => (state, "canceled: the run was interrupted".to_owned()),
        Ok(Err(e)) => (
            lumina_a2a::types::TaskState::Unspecified,
            format!("could not cancel the remote task: {e}"),
        ),
        Err(_) => (
            lumina_a2a::types::TaskState::Unspecified,
            format!(
                "could not cancel the remote task: no answer in {} s",
                CANCEL_WAIT.as_secs()
            ),
        ),
    };
    steps
        .step(Step::Ended {
            task_id: Some(task_id.clone()),
            state,
            text: text.clone(),
        })
        .await;
    ToolOutput::error(format!(
        "interrupted; remote task {task_id} of `{}`: {text} (state {})",
        target.name,
        state.wire_name()
    ))
}

/// Runs an `a2a_delegate` call. Errors are tool results.
pub(crate) async fn call(ctx: &RunContext, call_id: &str, args: &Value) -> ToolOutput {
    let args: Args = match serde_json::from_value(args.clone()) {
        Ok(args) => args,
        Err(e) => return ToolOutput::error(format!("invalid arguments: {e}")),
    };
    let message = args.message.filter(|m| !m.trim().is_empty());
    let task_id = args.task_id.filter(|t| !t.trim().is_empty());
    if message.is_none() && task_id.is_none() {
        return ToolOutput::error("give a `message`, or a `task_id` to check on");
    }
    let target = match resolve_target(&ctx.settings.settings, args.agent.trim()) {
        Ok(target) => target,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    // A check on a task: what to send again if the agent restarted under it.
    let resend = match (&message, &task_id) {
        (None, Some(task)) => {
            match history::last_message(ctx.session.journal(), args.agent.trim(), task).await {
                Ok(found) => found,
                Err(err) => {
                    tracing::warn!(error = %err, "a2a_delegate: the task's last message could not be read");
                    None
                }
            }
        }
        _ => None,
    };
    let request = Request {
        text: message,
        task_id,
        context_id: args.context_id.filter(|c| !c.trim().is_empty()),
    };
    run(
        ctx,
        ctx.session.a2a_client(),
        &target,
        request,
        resend,
        call_id,
    )
    .await
}
