//! Crash recovery: when a session is opened, every run, step, tool call and permission request
//! that began and never ended gets an explicit closing event, innermost first.

use lumina_protocol::{Decision, Event};

use crate::journal::SessionJournal;
use crate::Result;

const REASON: &str = "the backend stopped before it ended";

/// Appends the closing events for everything left open. Returns how many runs were closed.
pub async fn close_open_work(journal: &SessionJournal) -> Result<usize> {
    let open = journal.with_projection(|p| p.open_runs.clone()).await;
    if open.is_empty() {
        return Ok(0);
    }
    let mut events = Vec::new();
    for (run_id, run) in &open {
        for request_id in run.open_permissions.keys() {
            events.push(Event::PermissionResolved {
                run_id: run_id.clone(),
                request_id: request_id.clone(),
                decision: Decision::Deny,
                by: "recovery".into(),
                reason: Some(REASON.into()),
            });
        }
        for (call_id, tool) in &run.open_tools {
            events.push(Event::ToolInterrupted {
                run_id: run_id.clone(),
                call_id: call_id.clone(),
                tool: tool.clone(),
                reason: REASON.into(),
            });
        }
        for step in &run.open_steps {
            events.push(Event::StepInterrupted {
                run_id: run_id.clone(),
                step: *step,
                reason: REASON.into(),
            });
        }
        events.push(Event::RunInterrupted {
            run_id: run_id.clone(),
            reason: REASON.into(),
        });
    }
    journal.append(events).await?;
    tracing::info!(session_id = %journal.session_id(), runs = open.len(), "closed interrupted work");
    Ok(open.len())
}
