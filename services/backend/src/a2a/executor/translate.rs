//! One journal event of a task's run → what it does to the task (the table in
//! [`super`]'s documentation).

use lumina_a2a::types::{
    Artifact, Message, Part, StreamResponse, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use lumina_protocol::{DelegateStep, Event, EventFrame};
use serde_json::json;

use super::Progress;

/// Whether following should stop after this event.
pub(super) enum Flow {
    Continue,
    Stop,
}

/// What one journal event of the run does to the task.
pub(super) enum Change {
    /// A new status, with an optional agent message.
    Status(TaskState, Option<Message>),
    /// The run waits for an approval (`requestId`): input-required.
    Waiting(String, Message),
    /// The run's final answer: an artifact, then completed.
    Completed(Artifact),
    /// A delegation is parked (call id): its agent is unreachable; input-required.
    Parked(String, Message),
    /// The parked delegation reached its agent again: working.
    Resumed,
    /// Crash recovery closed the run: input-required, marked as a restart.
    Restarted(Message),
}

impl Change {
    /// Whether an execution stops following after it (terminal, or waiting for input).
    pub(super) fn stops(&self) -> bool {
        match self {
            Change::Status(state, _) => state.is_terminal(),
            Change::Waiting(..)
            | Change::Completed(_)
            | Change::Parked(..)
            | Change::Restarted(_) => true,
            Change::Resumed => false,
        }
    }

    /// Whether the task is terminal after it.
    pub(super) fn terminal(&self) -> bool {
        match self {
            Change::Status(state, _) => state.is_terminal(),
            Change::Waiting(..) | Change::Parked(..) | Change::Resumed | Change::Restarted(_) => {
                false
            }
            Change::Completed(_) => true,
        }
    }

    /// The change as the A2A events a subscriber sees.
    pub(super) fn events(self, task_id: &str, context_id: &str) -> Vec<StreamResponse> {
        let status = |state, message| {
            StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task_id.to_owned(),
                context_id: context_id.to_owned(),
                status: TaskStatus::now(state, message),
                metadata: None,
            })
        };
        match self {
            Change::Status(state, message) => vec![status(state, message)],
            Change::Waiting(_, message)
            | Change::Parked(_, message)
            | Change::Restarted(message) => {
                vec![status(TaskState::InputRequired, Some(message))]
            }
            Change::Resumed => vec![status(TaskState::Working, None)],
            Change::Completed(artifact) => vec![
                StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                    task_id: task_id.to_owned(),
                    context_id: context_id.to_owned(),
                    artifact,
                    append: false,
                    last_chunk: true,
                    metadata: None,
                }),
                status(TaskState::Completed, None),
            ],
        }
    }
}

/// The change one journal event of the task's run makes to task `task_id`, if any
/// (`progress` keeps the run's open MCP sign-ins and the delegation call it is parked on).
pub(super) fn translate(
    frame: &EventFrame,
    progress: &mut Progress,
    task_id: &str,
    context_id: &str,
) -> Option<Change> {
    let run = progress.run_id.as_str();
    let parked = progress.parked_call.as_deref();
    if let Some((state, message)) = progress
        .sign_ins
        .apply(&frame.event, run, task_id, context_id)
    {
        return Some(Change::Status(state, Some(message)));
    }
    let text = |text: &str| Message::agent(vec![Part::text(text)], Some(task_id), Some(context_id));
    let change = match &frame.event {
        Event::RunStarted { run_id, .. } if run_id == run => {
            Change::Status(TaskState::Working, None)
        }
        Event::MessageAssistant {
            run_id, text: said, ..
        } if run_id == run && !said.is_empty() => {
            Change::Status(TaskState::Working, Some(text(said)))
        }
        Event::PermissionRequested {
            run_id,
            request_id,
            tool,
            preview,
            ..
        } if run_id == run => {
            let mut body = format!(
                "approval needed: the agent wants to run `{tool}`. Reply \"approve\", \"always\" or \"deny\" (or a data part {{\"decision\": \"allow_once\"|\"allow_session\"|\"deny\"}})."
            );
            if let Some(preview) = preview {
                body.push_str("\n\n");
                body.push_str(preview);
            }
            let mut message = text(&body);
            message.metadata = Some(json!({"requestId": request_id, "tool": tool}));
            Change::Waiting(request_id.clone(), message)
        }
        Event::RunCompleted { run_id, result, .. } if run_id == run => {
            Change::Completed(Artifact {
                artifact_id: format!("{run}-result"),
                name: Some("result".into()),
                description: Some("the run's final answer".into()),
                parts: vec![Part::text(result.clone())],
                metadata: None,
                extensions: Vec::new(),
            })
        }
        Event::RunFailed {
            run_id, message, ..
        } if run_id == run => Change::Status(TaskState::Failed, Some(text(message))),
        Event::RunInterrupted { run_id, reason }
            if run_id == run && reason == lumina_runtime::recovery::REASON =>
        {
            let mut message = text(&format!(
                "interrupted by a restart of this agent ({reason}); send a message on this \
                 task to continue it"
            ));
            message.metadata = Some(lumina_a2a::delegate::restart_marker());
            Change::Restarted(message)
        }
        Event::RunInterrupted { run_id, reason } if run_id == run => {
            Change::Status(TaskState::Canceled, Some(text(reason)))
        }
        Event::DelegateUpdated {
            run_id,
            call_id,
            agent,
            step: DelegateStep::Waiting,
            task_id: remote,
            detail,
            ..
        } if run_id == run => {
            let mut message = text(&format!(
                "waiting for the A2A agent `{agent}` (its task {}): {detail}. Nothing was run \
                 locally; reading this task (GetTask) or a message on it retries the agent",
                remote.as_deref().unwrap_or("-")
            ));
            message.metadata = Some(json!({"parkedCall": call_id, "agent": agent}));
            Change::Parked(call_id.clone(), message)
        }
        Event::DelegateUpdated {
            run_id,
            call_id,
            step:
                DelegateStep::Sent | DelegateStep::Status | DelegateStep::Artifact | DelegateStep::Ended,
            ..
        } if run_id == run && parked == Some(call_id.as_str()) => Change::Resumed,
        _ => return None,
    };
    Some(change)
}
