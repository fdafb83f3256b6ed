//! A remote member's task (`agent.yaml` `a2a`): the task text (with the mail delivered to
//! it) is sent over A2A through the same client and follow code as `a2a_delegate`
//! ([`crate::delegate`]), each step journaled as `delegate.updated` on the member's stream,
//! and the remote task's result becomes the member's report. Nothing runs locally: an agent
//! that cannot be reached (or is not allowed by the settings) fails the task with the
//! reason, which makes the next round a recovery round like any failed task.
//!
//! After a restart an interrupted task is dispatched once more (docs/teams.md#durability);
//! for a remote member the retry does not send the task again when the interrupted one had
//! already created its remote task (its `delegate.updated` steps name it): it follows that
//! remote task instead, so the remote agent does the work once.

use std::time::{Duration, Instant};

use lumina_a2a::delegate::{self, Request};
use lumina_a2a::types::TaskState;
use lumina_protocol::{Event, RunFailureCode};
use lumina_team::RemoteAgent;

use crate::delegate::{resolve_target, JournalSteps};
use crate::run::{Outcome, RunContext};
use crate::Result;

/// What the member task runs: `text` is the task with the mail delivered to it, `task`
/// the task alone; `resume_of` the interrupted task this one runs again.
pub(super) struct RemoteTask<'a> {
    pub name: &'a str,
    pub remote: &'a RemoteAgent,
    pub task: &'a str,
    pub text: String,
    pub call_id: &'a str,
    pub resume_of: Option<&'a str>,
}

/// Runs a member task on its remote agent; `member` is the task's run (its stream and run
/// id are the task's).
pub(super) async fn run(member: &RunContext, job: RemoteTask<'_>) -> Result<Outcome> {
    let RemoteTask {
        name,
        remote,
        task,
        text,
        call_id,
        resume_of,
    } = job;
    let agent = remote.agent();
    let target = match resolve_target(&member.settings.settings, agent) {
        Ok(target) => target,
        Err(e) => {
            return Ok(failed(format!(
                "input-required: the remote member `{name}` cannot be called: {e}. Nothing \
                 was run locally."
            )))
        }
    };
    let earlier = match resume_of {
        Some(original) => earlier_run(member, original).await?,
        None => Earlier::default(),
    };
    let request = match earlier {
        Earlier {
            remote_task: Some(task_id),
            ..
        } => Request {
            text: None,
            task_id: Some(task_id),
            context_id: None,
        },
        // Sent again: with the mail the interrupted task had delivered (it is marked
        // delivered already), then whatever arrived since.
        Earlier {
            text: Some(first), ..
        } => Request {
            text: Some(format!(
                "{first}{}",
                text.strip_prefix(task).unwrap_or_default()
            )),
            task_id: None,
            context_id: None,
        },
        Earlier { .. } => Request {
            text: Some(text),
            task_id: None,
            context_id: None,
        },
    };
    let limit = Duration::from_millis(member.settings.settings.a2a_delegate_timeout_ms.max(1));
    let steps = JournalSteps::new(member, call_id, &target.name);
    let client = member.session.a2a_client();
    let started = Instant::now();
    let outcome = tokio::select! {
        outcome = delegate::follow(client, &target, request, limit, &steps) => outcome,
        _ = member.cancel.cancelled() => return Ok(Outcome::Interrupted("interrupted".into())),
    };
    let task = outcome.task_id.as_deref().unwrap_or("-");
    let cap = member.settings.output_cap_bytes.max(1024);
    Ok(match outcome.state {
        _ if outcome.unreachable.is_some() => {
            failed(capped(outcome.report(&target.name, started.elapsed()), cap))
        }
        TaskState::Completed => {
            let result = outcome.result_text();
            Outcome::Completed(if result.trim().is_empty() {
                format!("(the remote agent `{agent}` completed task {task} without a result)")
            } else {
                capped(result, cap)
            })
        }
        TaskState::InputRequired | TaskState::AuthRequired => failed(format!(
            "input-required: the remote agent `{agent}` asks for more on its task {task}: {}. \
             A team member cannot answer it: dispatch again with what it needs.",
            outcome.message.as_deref().unwrap_or("").trim()
        )),
        TaskState::Failed | TaskState::Rejected | TaskState::Canceled => {
            failed(capped(outcome.report(&target.name, started.elapsed()), cap))
        }
        TaskState::Submitted | TaskState::Working | TaskState::Unspecified => failed(format!(
            "the remote agent `{agent}` was still working on its task {task} after {} s \
             (a2a_delegate_timeout_ms); its result is not collected",
            started.elapsed().as_secs()
        )),
    })
}

fn failed(message: String) -> Outcome {
    Outcome::Failed {
        code: RunFailureCode::RuntimeError,
        message,
    }
}

fn capped(mut text: String, cap: usize) -> String {
    if text.len() > cap {
        let mut end = cap;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n[… cut: the rest of the remote agent's result is not shown]");
    }
    text
}

/// What an interrupted member task left on the member's stream.
#[derive(Default)]
struct Earlier {
    /// The remote task it created (its `delegate.updated` steps name it).
    remote_task: Option<String>,
    /// The text it was given.
    text: Option<String>,
}

async fn earlier_run(member: &RunContext, original: &str) -> Result<Earlier> {
    let frames = member.session.journal().read_stream(&member.stream).await?;
    let mut earlier = Earlier::default();
    for frame in frames {
        match frame.event {
            Event::DelegateUpdated {
                run_id,
                task_id: Some(task_id),
                ..
            } if run_id == original => earlier.remote_task = Some(task_id),
            Event::MessageUser { run_id, text, .. } if run_id == original => {
                earlier.text = Some(text)
            }
            _ => {}
        }
    }
    Ok(earlier)
}
