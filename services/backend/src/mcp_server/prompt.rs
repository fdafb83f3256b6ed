//! `lumina_prompt`: submit a prompt (headless, idempotent) and, when asked, follow the
//! session's events until the run ends, collecting its final text and permission denials.

use std::collections::HashMap;
use std::time::Duration;

use lumina_client::protocol::methods::SessionSubmitParams;
use lumina_client::protocol::{Decision, Event, EventFrame};
use lumina_client::{catch_up, Client, Notification, Notifications, Offer, SessionView};
use lumina_mcp_server::{LogLevel, RequestContext};
use serde::Serialize;
use serde_json::Value;

use super::backend::BackendError;

/// Default and largest wait for a run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

pub struct PromptRequest {
    pub session_id: String,
    pub prompt: String,
    /// The idempotency key: a retry with the same key returns the original run.
    pub request_id: String,
    pub wait: bool,
    pub timeout: Duration,
}

/// A permission request the run's mode turned down.
#[derive(Debug, Clone, Serialize)]
pub struct Denial {
    pub tool: String,
    pub by: String,
    pub reason: Option<String>,
}

/// What the tool reports.
#[derive(Debug, Clone, Serialize)]
pub struct PromptOutcome {
    pub session_id: String,
    pub run_id: String,
    /// `completed`, `failed`, `interrupted`, or `queued`/`running` when not waited for (or
    /// the wait timed out).
    pub status: String,
    /// The final assistant text (completed) or the error (failed, interrupted).
    pub text: String,
    pub denials: Vec<Denial>,
    /// False when the request id was seen before and the original run was returned.
    pub created: bool,
}

/// Follows one run's events.
#[derive(Default)]
struct RunTracker {
    run_id: String,
    tools: HashMap<String, String>,
    denials: Vec<Denial>,
    end: Option<(String, String)>,
    steps: u32,
}

impl RunTracker {
    fn apply(&mut self, frame: &EventFrame, ctx: &RequestContext) {
        if frame.event.run_id() != Some(self.run_id.as_str()) {
            return;
        }
        match &frame.event {
            Event::StepStarted { step, .. } => {
                self.steps = *step;
                ctx.progress(f64::from(*step), None, Some("model step"));
            }
            Event::ToolStarted { call_id, tool, .. } => {
                self.tools.insert(call_id.clone(), tool.clone());
                ctx.log(
                    LogLevel::Info,
                    Some("lumina"),
                    format!("tool {tool} started"),
                );
            }
            Event::PermissionRequested {
                request_id, tool, ..
            } => {
                self.tools.insert(request_id.clone(), tool.clone());
            }
            Event::PermissionResolved {
                request_id,
                decision: Decision::Deny,
                by,
                reason,
                ..
            } => self.denials.push(Denial {
                tool: self.tools.get(request_id).cloned().unwrap_or_default(),
                by: by.clone(),
                reason: reason.clone(),
            }),
            Event::RunCompleted { result, .. } => {
                self.end = Some(("completed".into(), result.clone()));
            }
            Event::RunFailed { code, message, .. } => {
                self.end = Some(("failed".into(), format!("{message} ({code})")));
            }
            Event::RunInterrupted { reason, .. } => {
                self.end = Some(("interrupted".into(), reason.clone()));
            }
            _ => {}
        }
    }
}

/// Submits and (when `wait`) waits. `client` must be a connection of its own: its
/// notifications are consumed here.
pub async fn run(
    client: &Client,
    notes: &mut Notifications,
    request: PromptRequest,
    ctx: &RequestContext,
) -> Result<PromptOutcome, BackendError> {
    let session_id = request.session_id.clone();
    let mut view = None;
    if request.wait {
        // Subscribe from the current head before submitting, so no event of the run is missed.
        let info = client.session_info(&session_id).await?;
        client
            .session_resume(&session_id, info.session.head_seq)
            .await?;
        view = Some(SessionView::new(info.session.head_seq));
    }
    let params = SessionSubmitParams {
        session_id: session_id.clone(),
        idempotency_key: request.request_id.clone(),
        prompt: request.prompt,
        settings: Value::Null,
        // Nobody answers permission requests over MCP: `ask` becomes a denial.
        headless: true,
        mode: None,
    };
    let submitted = client.session_submit(&params).await?;
    tracing::info!(session_id = %session_id, run_id = %submitted.run_id, created = submitted.created, "mcp prompt submitted");
    let mut outcome = PromptOutcome {
        session_id: session_id.clone(),
        run_id: submitted.run_id.clone(),
        status: submitted.run.status.to_string(),
        text: submitted
            .run
            .result
            .clone()
            .or(submitted.run.error.clone())
            .unwrap_or_default(),
        denials: Vec::new(),
        created: submitted.created,
    };
    let finished = matches!(
        outcome.status.as_str(),
        "completed" | "failed" | "interrupted"
    );
    let Some(mut view) = view.filter(|_| !finished) else {
        return Ok(outcome);
    };
    let mut tracker = RunTracker {
        run_id: submitted.run_id.clone(),
        ..RunTracker::default()
    };
    let deadline = tokio::time::Instant::now() + request.timeout;
    while tracker.end.is_none() {
        let note = tokio::select! {
            note = notes.recv() => note,
            _ = tokio::time::sleep_until(deadline) => {
                outcome.status = "running".into();
                outcome.text = format!(
                    "the run is still going after {} s; read its progress with lumina_session_read",
                    request.timeout.as_secs()
                );
                outcome.denials = tracker.denials;
                return Ok(outcome);
            }
            _ = ctx.cancellation().cancelled() => {
                // The MCP client gave up on the call: stop the run it started.
                let _ = client.session_interrupt(&session_id, Some(&submitted.run_id)).await;
                return Err(BackendError::Call("cancelled by the client".into()));
            }
        };
        let frames = match note {
            Some(Notification::Event(frame)) if frame.session_id == session_id => {
                match view.offer(frame) {
                    Offer::Ready(frames) => frames,
                    Offer::Duplicate => Vec::new(),
                    Offer::Gap { .. } => catch_up(client, &session_id, &mut view).await?,
                }
            }
            Some(Notification::Closed(reason)) => {
                return Err(BackendError::Unavailable(format!(
                    "lost the backend connection: {reason}"
                )))
            }
            Some(Notification::ProtocolError(error)) => {
                tracing::warn!(%error, "the backend reported a protocol error");
                Vec::new()
            }
            Some(_) => Vec::new(),
            None => {
                return Err(BackendError::Unavailable(
                    "lost the backend connection".into(),
                ))
            }
        };
        for frame in &frames {
            tracker.apply(frame, ctx);
        }
    }
    if let Some((status, text)) = tracker.end.take() {
        outcome.status = status;
        outcome.text = text;
    }
    outcome.denials = tracker.denials;
    Ok(outcome)
}
