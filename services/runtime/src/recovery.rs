//! Crash recovery: when a session is opened, every run, step, tool call and permission request
//! that began and never ended gets an explicit closing event, innermost first; sub-agents
//! first (on their own streams, then `agent.interrupted` on the main stream, deepest
//! first), then the team tasks that were running (`team.task_ended{status: interrupted}`),
//! then the top-level runs; a goal that was running becomes `paused` (resumable).

use lumina_protocol::{Decision, Event, GoalState, MAIN_STREAM};

use lumina_journal::NewAudit;

use crate::audit::{self, Subject};
use crate::journal::SessionJournal;
use crate::projection::OpenRun;
use crate::Result;

/// The reason of every closing event recovery journals (`run.interrupted.reason`): the A2A
/// executor reads a run closed with it as interrupted by a restart, not canceled.
pub const REASON: &str = "the backend stopped before it ended";

/// Appends the closing events for everything left open. Returns how many runs were closed.
pub async fn close_open_work(journal: &SessionJournal) -> Result<usize> {
    let (open, mut agents, goals) = journal
        .with_projection(|p| {
            let goals: Vec<_> = p
                .goals
                .iter()
                .filter(|g| {
                    matches!(
                        g.summary.state,
                        GoalState::Running | GoalState::AwaitingApproval
                    )
                })
                .map(|g| (g.summary.goal_id.clone(), g.summary.usage))
                .collect();
            let agents: Vec<(String, u32)> = p
                .open_agents
                .iter()
                .map(|(id, d)| (id.clone(), *d))
                .collect();
            (p.open_runs.clone(), agents, goals)
        })
        .await;
    let running_tasks = journal
        .with_projection(|p| {
            p.teams
                .iter()
                .filter(|t| t.active)
                .any(|t| !t.running_tasks().is_empty())
        })
        .await;
    if open.is_empty() && agents.is_empty() && goals.is_empty() && !running_tasks {
        return Ok(0);
    }
    // Children first, each on its own stream (one atomic batch per stream).
    for (run_id, run) in open.iter().filter(|(_, r)| r.stream != MAIN_STREAM) {
        let (mut events, mut audit) = (Vec::new(), Vec::new());
        close_run(run_id, run, &mut events, &mut audit);
        journal.append_audited(&run.stream, events, audit).await?;
    }
    // Then the team tasks whose member runs were just closed (the board streams).
    crate::team::control::close_running_tasks(journal).await?;
    let (mut events, mut audit) = (Vec::new(), Vec::new());
    agents.sort_by_key(|a| std::cmp::Reverse(a.1));
    for (child_id, _) in agents {
        events.push(Event::AgentInterrupted {
            child_id,
            reason: REASON.into(),
        });
    }
    for (run_id, run) in open.iter().filter(|(_, r)| r.stream == MAIN_STREAM) {
        close_run(run_id, run, &mut events, &mut audit);
    }
    for (goal_id, usage) in goals {
        events.push(Event::GoalUpdated {
            goal_id,
            state: GoalState::Paused,
            reason: Some(format!("{REASON}; goal.resume continues it")),
            usage,
            run_id: None,
        });
    }
    if !events.is_empty() {
        journal.append_audited(MAIN_STREAM, events, audit).await?;
    }
    tracing::info!(session_id = %journal.session_id(), runs = open.len(), "closed interrupted work");
    Ok(open.len())
}

/// Adds the closing events of one open run to `events`, innermost first, and the audit
/// records of the permission requests it denies.
fn close_run(run_id: &str, run: &OpenRun, events: &mut Vec<Event>, audit: &mut Vec<NewAudit>) {
    close_inner(run_id, run, REASON, events, audit);
    events.push(Event::RunInterrupted {
        run_id: run_id.to_string(),
        reason: REASON.into(),
    });
}

/// Adds the closing events of what one open run left open (permission requests, tools,
/// steps; not the run itself), innermost first, with `reason`.
pub(crate) fn close_inner(
    run_id: &str,
    run: &OpenRun,
    reason: &str,
    events: &mut Vec<Event>,
    audit: &mut Vec<NewAudit>,
) {
    for (request_id, requested) in &run.open_permissions {
        let resolved = Event::PermissionResolved {
            run_id: run_id.to_string(),
            request_id: request_id.clone(),
            decision: Decision::Deny,
            by: "recovery".into(),
            reason: Some(reason.into()),
        };
        if let Some(subject) = Subject::of_request(&requested.event) {
            audit.extend(audit::record(events.len(), &resolved, &subject, None));
        }
        events.push(resolved);
    }
    for (call_id, tool) in &run.open_tools {
        events.push(Event::ToolInterrupted {
            run_id: run_id.to_string(),
            call_id: call_id.clone(),
            tool: tool.clone(),
            reason: reason.into(),
        });
    }
    for step in &run.open_steps {
        events.push(Event::StepInterrupted {
            run_id: run_id.to_string(),
            step: *step,
            reason: reason.into(),
        });
    }
}
