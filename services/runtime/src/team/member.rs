//! One member task: wait for a permit (`loop.max_parallel_agents`), journal the dispatch on
//! the board and the task — with the member's undelivered mail, marked delivered in the same
//! append — on the member's stream, run the step loop there with the member's prompt, tools,
//! model and turn limit, then journal its end on both and hand the result (with the mail the
//! task sent the leader) back as the leader's tool result. A remote member (`a2a`) runs its
//! task on its A2A agent instead of the step loop ([`super::remote`]); everything around it
//! is the same.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use lumina_protocol::team::{TeamMessagesDelivered, TeamTaskDispatched, TeamTaskEnded};
use lumina_protocol::{team_board_stream, team_member_stream, Event, RunFailureCode, TaskStatus};
use lumina_tools::ToolOutput;
use serde_json::{json, Value};

use super::distributed::Placed;
use super::state::TeamRecord;
use super::tools::DispatchPlan;
use super::{active_team, TeamScope};
use crate::run::step::run_loop;
use crate::run::{Outcome, RunContext};
use crate::settings::RunSettings;
use crate::subagent::{AgentScope, AGENT_TOOL};
use crate::{Error, Result};

type TaskFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput>> + Send + 'a>>;

/// Runs `plan` for the leader run `leader`. Boxed with its `Send` bound spelled out: the
/// step loop it runs is the one that called it (async recursion).
pub(crate) fn run_task<'a>(
    leader: &'a RunContext,
    settings: &'a RunSettings,
    team: &'a TeamScope,
    call_id: &'a str,
    plan: DispatchPlan,
    retry_of: Option<String>,
) -> TaskFuture<'a> {
    Box::pin(task(leader, settings, team, call_id, plan, retry_of))
}

/// The tool names the member `name` may use, from what the session offers.
pub(crate) fn member_tools(leader: &RunContext, name: &str, team: &TeamScope) -> Vec<String> {
    let Some(member) = team.definition.member(name) else {
        return Vec::new();
    };
    let session = &leader.session;
    let mut names: Vec<String> = session
        .tools()
        .descriptors()
        .into_iter()
        .map(|d| d.name)
        .chain(
            crate::mcp::tools(leader)
                .iter()
                .map(|t| t.descriptor().name),
        )
        .collect();
    if session.memory().is_some() {
        names.extend(crate::memory::descriptors().into_iter().map(|d| d.name));
    }
    // Members never start sub-agents: work is handed out by the leader only.
    names
        .into_iter()
        .filter(|n| n != AGENT_TOOL && member.allows_tool(n))
        .collect()
}

/// A member's own `model` that the settings cannot use.
#[derive(Debug, thiserror::Error)]
#[error("the model of `{member}` cannot be used: {source}")]
pub(crate) struct MemberModelError {
    member: String,
    #[source]
    source: crate::settings::SettingsError,
}

/// The member's settings: the leader's, with the member's own `model` when it has one.
pub(crate) fn member_settings(
    session: &crate::Session,
    settings: &RunSettings,
    team: &TeamScope,
    name: &str,
) -> std::result::Result<RunSettings, MemberModelError> {
    let Some(model) = team.definition.member(name).and_then(|m| m.model.clone()) else {
        return Ok(settings.clone());
    };
    let mut overrides = settings.overrides.clone();
    overrides.insert("api_model".into(), Value::String(model));
    session
        .reload_with(overrides)
        .map_err(|source| MemberModelError {
            member: name.to_string(),
            source,
        })
}

fn task_text(task: &str, inbox: &[&super::state::MessageRecord]) -> String {
    if inbox.is_empty() {
        return task.to_string();
    }
    let mut text = format!("{task}\n\n# Messages for you (oldest first)\n");
    for message in inbox {
        text.push_str(&format!("- from `{}`: {}\n", message.from, message.text));
    }
    text
}

async fn task(
    leader: &RunContext,
    settings: &RunSettings,
    team: &TeamScope,
    call_id: &str,
    plan: DispatchPlan,
    retry_of: Option<String>,
) -> Result<ToolOutput> {
    let Some(record) = active_team(&leader.session).await else {
        return Ok(ToolOutput::error("the session has left its team"));
    };
    let agent = plan.agent.clone();
    let task_id = uuid::Uuid::new_v4().to_string();
    let stream = team_member_stream(&record.team_run_id, &agent);
    let board = team_board_stream(&record.team_run_id);
    let journal = leader.session.journal();
    // Journaled before it waits for a permit: a restart meanwhile still knows the task.
    journal
        .append_to(
            &board,
            vec![Event::TeamTaskDispatched(TeamTaskDispatched {
                team_run_id: record.team_run_id.clone(),
                round: plan.round,
                task_id: task_id.clone(),
                agent: agent.clone(),
                task: plan.task.clone(),
                call_id: call_id.to_string(),
                retry_of: retry_of.clone(),
                criteria: plan.criteria.clone(),
            })],
        )
        .await?;
    let permit = tokio::select! {
        permit = team.shared.parallel.acquire() => permit.ok(),
        _ = leader.cancel.cancelled() => None,
    };
    let Some(permit) = permit else {
        let reason = "interrupted before the member started".to_string();
        // A backend that stops serving the session leaves the task to the next owner.
        if !leader.session.is_stopping() {
            journal
                .append_to(
                    &board,
                    vec![Event::TeamTaskEnded(TeamTaskEnded {
                        team_run_id: record.team_run_id.clone(),
                        task_id: task_id.clone(),
                        agent: agent.clone(),
                        status: TaskStatus::Interrupted,
                        summary: reason.clone(),
                    })],
                )
                .await?;
        }
        return Ok(ToolOutput::error(reason));
    };
    // Mail sent while it waited counts too.
    let record = active_team(&leader.session).await.unwrap_or(record);
    let inbox = record.undelivered(&agent);
    let (member_settings, unusable) = match member_settings(&leader.session, settings, team, &agent)
    {
        Ok(own) => (own, None),
        Err(problem) => (settings.clone(), Some(problem.to_string())),
    };
    let remote = team
        .definition
        .member(&agent)
        .and_then(|m| m.remote.clone());
    let model = match &remote {
        Some(remote) => format!("a2a:{}", remote.agent()),
        None => member_settings.model_name(),
    };
    let text = task_text(&plan.task, &inbox);
    let mut opening = vec![Event::RunStarted {
        run_id: task_id.clone(),
        idempotency_key: format!("team:{task_id}"),
        model,
    }];
    if !inbox.is_empty() {
        opening.push(Event::TeamMessagesDelivered(TeamMessagesDelivered {
            team_run_id: record.team_run_id.clone(),
            to: agent.clone(),
            msg_ids: inbox.iter().map(|m| m.msg_id.clone()).collect(),
        }));
    }
    opening.push(Event::MessageUser {
        run_id: task_id.clone(),
        text: text.clone(),
        skill: None,
    });
    // One append: the mail is in the member's context exactly when it is marked delivered.
    let opened = journal.append_to(&stream, opening).await?;
    let opening_version = opened.last().map_or(0, |f| f.stream_seq);

    let member = RunContext {
        session: leader.session.clone(),
        run_id: task_id.clone(),
        prompt: plan.task.clone(),
        settings: member_settings,
        headless: leader.headless,
        cancel: leader.cancel.child_token(),
        stream: stream.clone(),
        agent: AgentScope {
            depth: 1,
            tree: Arc::new(Default::default()),
            tools: Some(member_tools(leader, &agent, team)),
            description: None,
        },
        goal: None,
        team: Some(Arc::new(team.member(&agent, &task_id))),
    };
    let outcome = match (unusable, &remote) {
        (_, Some(remote)) => {
            let job = super::remote::RemoteTask {
                name: &agent,
                remote,
                task: &plan.task,
                text,
                call_id,
                resume_of: retry_of.as_deref(),
            };
            match super::remote::run(&member, job).await {
                Ok(outcome) => outcome,
                Err(Error::Fenced) => return Err(Error::Fenced),
                Err(err) => Outcome::Failed {
                    code: RunFailureCode::RuntimeError,
                    message: err.to_string(),
                },
            }
        }
        (Some(problem), None) => Outcome::Failed {
            code: RunFailureCode::Settings,
            message: problem,
        },
        (None, None) => {
            let placed = match leader.session.placement() {
                Some(placement) => {
                    super::distributed::run(
                        &member,
                        placement,
                        &agent,
                        opening_version,
                        &settings.overrides,
                    )
                    .await?
                }
                None => Placed::Here,
            };
            match placed {
                Placed::Here => run_member(&member).await?,
                Placed::Ended {
                    status,
                    summary,
                    lost,
                } => {
                    // Its terminal event is journaled already.
                    let retry = lost && retry_of.is_none() && !leader.cancel.is_cancelled();
                    end_on_board(
                        leader,
                        &record.team_run_id,
                        &task_id,
                        &agent,
                        status,
                        &summary,
                    )
                    .await?;
                    if retry {
                        tracing::info!(session_id = %leader.session.id(), task_id = %task_id, agent = %agent, "dispatching a lost member task once more");
                        drop(permit);
                        return run_task(leader, settings, team, call_id, plan, Some(task_id))
                            .await;
                    }
                    return Ok(
                        leader_result(leader, record, &agent, &task_id, status, &summary).await,
                    );
                }
            }
        }
    };
    let usage = leader.session.run_usage(&task_id).await;
    let (terminal, status, summary) = terminal(&task_id, outcome, usage);
    journal.append_to(&stream, vec![terminal]).await?;
    end_on_board(
        leader,
        &record.team_run_id,
        &task_id,
        &agent,
        status,
        &summary,
    )
    .await?;
    drop(permit);
    Ok(leader_result(leader, record, &agent, &task_id, status, &summary).await)
}

/// Runs a member task's turns here.
pub(crate) async fn run_member(member: &RunContext) -> Result<Outcome> {
    let mut steps = 0;
    let mut last_text = String::new();
    match run_loop(member, &mut steps, &mut last_text).await {
        Ok(outcome) => Ok(outcome),
        Err(Error::Fenced) => Err(Error::Fenced),
        Err(err) => Ok(Outcome::Failed {
            code: RunFailureCode::RuntimeError,
            message: err.to_string(),
        }),
    }
}

/// `team.task_ended` on the board.
async fn end_on_board(
    leader: &RunContext,
    team_run_id: &str,
    task_id: &str,
    agent: &str,
    status: TaskStatus,
    summary: &str,
) -> Result<()> {
    leader
        .session
        .journal()
        .append_to(
            &team_board_stream(team_run_id),
            vec![Event::TeamTaskEnded(TeamTaskEnded {
                team_run_id: team_run_id.to_string(),
                task_id: task_id.to_string(),
                agent: agent.to_string(),
                status,
                summary: summary.to_string(),
            })],
        )
        .await?;
    Ok(())
}

/// The leader's tool result for an ended task.
async fn leader_result(
    leader: &RunContext,
    record: TeamRecord,
    agent: &str,
    task_id: &str,
    status: TaskStatus,
    summary: &str,
) -> ToolOutput {
    let record = active_team(&leader.session).await.unwrap_or(record);
    let text = result_text(&record, agent, task_id, status, summary);
    let output = match status {
        TaskStatus::Completed => ToolOutput::ok(text),
        _ => ToolOutput::error(text),
    };
    output.with_metadata(json!({ "task_id": task_id, "agent": agent, "status": status }))
}

/// A member run's terminal event for its outcome, with the task's status and summary.
pub(crate) fn terminal(
    task_id: &str,
    outcome: Outcome,
    usage: lumina_protocol::Usage,
) -> (Event, TaskStatus, String) {
    let task_id = task_id.to_string();
    match outcome {
        Outcome::Completed(text) => {
            let text = if text.trim().is_empty() {
                "(the member ended without a final message)".to_string()
            } else {
                text
            };
            (
                Event::RunCompleted {
                    run_id: task_id.clone(),
                    result: text.clone(),
                    usage,
                },
                TaskStatus::Completed,
                text,
            )
        }
        Outcome::Interrupted(reason) => (
            Event::RunInterrupted {
                run_id: task_id.clone(),
                reason: reason.clone(),
            },
            TaskStatus::Interrupted,
            reason,
        ),
        Outcome::Failed { code, message } => (
            Event::RunFailed {
                run_id: task_id.clone(),
                code: code.clone(),
                message: message.clone(),
            },
            TaskStatus::Failed,
            format!("{code}: {message}"),
        ),
        Outcome::Goal(end) => (
            Event::RunFailed {
                run_id: task_id.clone(),
                code: RunFailureCode::RuntimeError,
                message: format!("unexpected goal verdict {}", end.state),
            },
            TaskStatus::Failed,
            "unexpected goal verdict".into(),
        ),
    }
}

/// What the leader reads: the member's result and the mail its task (or the interrupted
/// tasks it runs again) sent the leader.
pub(crate) fn result_text(
    record: &TeamRecord,
    agent: &str,
    task_id: &str,
    status: TaskStatus,
    summary: &str,
) -> String {
    let mut chain = vec![task_id.to_string()];
    let mut current = record.task(task_id).and_then(|t| t.retry_of.clone());
    while let Some(previous) = current {
        current = record.task(&previous).and_then(|t| t.retry_of.clone());
        chain.push(previous);
    }
    let mut text = match status {
        TaskStatus::Completed => format!("`{agent}` completed its task:\n{summary}"),
        other => format!("`{agent}`'s task {}: {summary}", other.as_str()),
    };
    let mail: Vec<_> = record
        .messages
        .iter()
        .filter(|m| m.to == record.entry_agent && chain.contains(&m.task_id))
        .collect();
    if !mail.is_empty() {
        text.push_str("\n\nMessages to you from this task:\n");
        for message in mail {
            text.push_str(&format!("- from `{}`: {}\n", message.from, message.text));
        }
    }
    text
}
