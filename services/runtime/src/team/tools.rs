//! The team tools: the leader's `team_contract`, `team_dispatch`, `team_complete`, and
//! everyone's `team_message`; the gate members' `team_verdict`. Bad arguments and refused
//! calls are error tool results naming what to do instead; only journal errors are `Err`.

use futures::future::join_all;
use lumina_model::ToolCall;
use lumina_protocol::team::{
    TeamContractWritten, TeamGateChecked, TeamMessageSent, TeamRoundEnded, TeamRoundStarted,
};
use lumina_protocol::{team_board_stream, Event};
use lumina_tools::{ToolDescriptor, ToolOutput};
use serde_json::{json, Value};

use super::state::TeamRecord;
use super::{
    active_team, follow_ups, gates, member, policy, TeamScope, QA_MEMBER, REVIEWER_MEMBER,
};
use crate::run::RunContext;
use crate::settings::RunSettings;
use crate::tool_call::{run_tool, CallOutcome, Precheck};
use crate::Result;

pub(crate) const CONTRACT_TOOL: &str = "team_contract";
pub(crate) const DISPATCH_TOOL: &str = "team_dispatch";
pub(crate) const MESSAGE_TOOL: &str = "team_message";
pub(crate) const COMPLETE_TOOL: &str = "team_complete";
pub(crate) const VERDICT_TOOL: &str = "team_verdict";

/// A dispatch that passed its checks, to run in `round`.
#[derive(Debug, Clone)]
pub(crate) struct DispatchPlan {
    pub round: u32,
    pub agent: String,
    pub task: String,
    /// The contract's criteria it serves (`gates.task_policy.require_criteria`).
    pub criteria: Vec<u32>,
}

/// The team tools `team` offers its run.
pub(crate) fn descriptors(team: &TeamScope) -> Vec<ToolDescriptor> {
    let mut tools = Vec::new();
    if team.is_leader() {
        tools.push(contract_descriptor());
        tools.push(dispatch_descriptor(team));
    }
    let talks = team
        .definition
        .member(team.me())
        .is_some_and(|m| !m.communicates_with.is_empty());
    if talks {
        tools.push(message_descriptor(team));
    }
    if team.definition.gates.follow_ups {
        tools.push(follow_ups::descriptor(team));
    }
    if team.is_leader() {
        tools.push(complete_descriptor());
    } else if is_gate_member(team.me()) {
        tools.push(verdict_descriptor());
    }
    tools
}

pub(crate) fn is_gate_member(name: &str) -> bool {
    name == QA_MEMBER || name == REVIEWER_MEMBER
}

pub(crate) fn runtime_tool(name: &str, description: String, schema: Value) -> ToolDescriptor {
    ToolDescriptor {
        name: name.into(),
        description,
        input_schema: schema,
        // Team bookkeeping changes nothing in the project; members' own calls ask.
        read_only: true,
        edits_files: false,
    }
}

fn contract_descriptor() -> ToolDescriptor {
    runtime_tool(
        CONTRACT_TOOL,
        "Write the team's contract for this task: the goal and the acceptance criteria the \
         result is checked against. Required before the first team_dispatch when the team \
         requires a contract; calling it again replaces it."
            .into(),
        json!({
            "type": "object",
            "properties": {
                "goal": {"type": "string"},
                "acceptance_criteria": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["goal", "acceptance_criteria"]
        }),
    )
}

fn dispatch_descriptor(team: &TeamScope) -> ToolDescriptor {
    let members: Vec<String> = team
        .definition
        .members
        .iter()
        .filter(|m| m.name != team.definition.entry_agent)
        .map(|m| m.name.clone())
        .collect();
    let mut description = format!(
        "Hand one task to a team member; its final answer comes back as the result. The \
         member sees only this task, its own earlier tasks and messages sent to it, so say \
         everything it needs. Several team_dispatch calls in one message form a round and \
         run in parallel (at most {} at once), one task per member per round. Members: {}.",
        team.definition.loop_config.max_parallel_agents,
        members.join(", ")
    );
    description.push_str(&policy::describe(&team.definition.gates.task_policy));
    let mut schema = json!({
        "type": "object",
        "properties": {
            "agent": {"type": "string", "enum": members},
            "task": {"type": "string"}
        },
        "required": ["agent", "task"]
    });
    if team.definition.gates.task_policy.require_criteria {
        schema["properties"]["criteria"] = json!({
            "type": "array",
            "items": {"type": "integer", "minimum": 1},
            "description": "the numbers (1, 2, …) of the contract's acceptance criteria this task serves"
        });
        schema["required"] = json!(["agent", "task", "criteria"]);
    }
    runtime_tool(DISPATCH_TOOL, description, schema)
}

fn message_descriptor(team: &TeamScope) -> ToolDescriptor {
    let peers = team
        .definition
        .member(team.me())
        .map(|m| m.communicates_with.clone())
        .unwrap_or_default();
    runtime_tool(
        MESSAGE_TOOL,
        format!(
            "Send a message to a team member's mailbox. A member reads it with its next task; \
             the team leader with the result of your task. You may message: {}.",
            peers.join(", ")
        ),
        json!({
            "type": "object",
            "properties": {
                "to": {"type": "string", "enum": peers},
                "text": {"type": "string"}
            },
            "required": ["to", "text"]
        }),
    )
}

fn complete_descriptor() -> ToolDescriptor {
    runtime_tool(
        COMPLETE_TOOL,
        "Finish the team's task with a summary for the user. Refused, with the failing \
         gate's output, while a gate fails (the contract, QA's or the reviewer's verdict, the \
         team's check commands): fix that in a recovery round first."
            .into(),
        json!({
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"]
        }),
    )
}

fn verdict_descriptor() -> ToolDescriptor {
    runtime_tool(
        VERDICT_TOOL,
        "Record your verdict as the team's gate: passed or not, and the evidence (what you \
         checked, what failed and how to reproduce it). The team cannot finish while your \
         latest verdict is a failure."
            .into(),
        json!({
            "type": "object",
            "properties": {
                "passed": {"type": "boolean"},
                "output": {"type": "string"}
            },
            "required": ["passed", "output"]
        }),
    )
}

/// Why a team tool call is refused; the message is its error tool result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("`{0}` (a non-empty string) is required")]
    Required(&'static str),
    #[error("a member cannot dispatch to itself: `{agent}` is you; dispatch to one of: {others}")]
    ToItself { agent: String, others: String },
    #[error("no member `{agent}` in this team; dispatch to one of: {others}")]
    UnknownMember { agent: String, others: String },
    #[error(
        "gates.require_contract: write the contract (team_contract: goal and acceptance \
         criteria) before the first dispatch"
    )]
    NoContract,
    #[error(
        "loop.max_iterations = {max}: the team has run that many rounds; finish with \
         team_complete or report to the user"
    )]
    MaxIterations { max: u32 },
    #[error("loop.stop_policy = stop_on_failure and {reason}; no more rounds: report to the user")]
    StopOnFailure { reason: String },
    #[error("`{agent}` has a task in this round already; put everything for it in one task")]
    Twice { agent: String },
    #[error(transparent)]
    Policy(#[from] policy::PolicyRefusal),
}

pub(crate) fn string_arg<'a>(
    args: &'a Value,
    key: &'static str,
) -> std::result::Result<&'a str, Refusal> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or(Refusal::Required(key))
}

/// Runs a team tool other than `team_dispatch` (whose rounds [`dispatch_group`] runs), or
/// the member task of a checked dispatch.
pub(crate) async fn call(
    ctx: &RunContext,
    settings: &RunSettings,
    call_id: &str,
    name: &str,
    args: &Value,
    plan: Option<DispatchPlan>,
) -> Result<ToolOutput> {
    let Some(team) = ctx.team.as_deref() else {
        return Ok(ToolOutput::error("this run is not part of a team"));
    };
    // Members on other instances write the board too (team_distributed).
    ctx.session.journal().sync_if_shared().await?;
    let Some(record) = active_team(&ctx.session).await else {
        return Ok(ToolOutput::error("the session has left its team"));
    };
    match name {
        DISPATCH_TOOL => match plan {
            Some(plan) => member::run_task(ctx, settings, team, call_id, plan, None).await,
            None => Ok(ToolOutput::error("this dispatch was not checked")),
        },
        CONTRACT_TOOL => contract(ctx, &record, args).await,
        MESSAGE_TOOL => message(ctx, settings, team, args).await,
        VERDICT_TOOL => verdict(ctx, team, &record, args).await,
        COMPLETE_TOOL => gates::complete(ctx, settings, team, &record, args).await,
        follow_ups::FOLLOW_UP_TOOL => follow_ups::call(ctx, team, args).await,
        other => Ok(ToolOutput::error(format!("unknown team tool `{other}`"))),
    }
}

async fn contract(ctx: &RunContext, record: &TeamRecord, args: &Value) -> Result<ToolOutput> {
    let goal = match string_arg(args, "goal") {
        Ok(goal) => goal.to_string(),
        Err(problem) => return Ok(ToolOutput::error(problem.to_string())),
    };
    let criteria: Vec<String> = match args.get("acceptance_criteria") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    if criteria.is_empty() {
        return Ok(ToolOutput::error(
            "`acceptance_criteria` must be a non-empty array of strings: what QA checks",
        ));
    }
    ctx.session
        .journal()
        .append_to(
            &team_board_stream(&record.team_run_id),
            vec![Event::TeamContractWritten(TeamContractWritten {
                team_run_id: record.team_run_id.clone(),
                goal,
                acceptance_criteria: criteria.clone(),
            })],
        )
        .await?;
    Ok(ToolOutput::ok(format!(
        "contract written with {} acceptance criteria",
        criteria.len()
    )))
}

async fn message(
    ctx: &RunContext,
    settings: &RunSettings,
    team: &TeamScope,
    args: &Value,
) -> Result<ToolOutput> {
    let (to, text) = match (string_arg(args, "to"), string_arg(args, "text")) {
        (Ok(to), Ok(text)) => (to.to_string(), text.to_string()),
        (Err(problem), _) | (_, Err(problem)) => return Ok(ToolOutput::error(problem.to_string())),
    };
    let me = team.me().to_string();
    let peers = team
        .definition
        .member(&me)
        .map(|m| m.communicates_with.join(", "))
        .unwrap_or_default();
    if to == me {
        return Ok(ToolOutput::error(format!(
            "`{to}` is you; you may message: {peers}"
        )));
    }
    if team.definition.member(&to).is_none() {
        return Ok(ToolOutput::error(format!(
            "no member `{to}` in this team; you may message: {peers}"
        )));
    }
    if !team.definition.can_message(&me, &to) {
        return Ok(ToolOutput::error(format!(
            "`{me}` may not message `{to}` (communicates_with in agents/{me}/agent.yaml); you may message: {peers}"
        )));
    }
    // The count and the append happen under one lock, so concurrent members cannot both
    // take the last message of a round.
    let _mailbox = team.shared.mailbox.lock().await;
    let Some(record) = active_team(&ctx.session).await else {
        return Ok(ToolOutput::error("the session has left its team"));
    };
    let cap = settings.settings.team_max_messages_per_round as usize;
    if record.messages_in_round(record.round) >= cap {
        return Ok(ToolOutput::error(format!(
            "team_max_messages_per_round = {cap}: the team sent that many messages in round {} \
             already; put the rest in your final answer",
            record.round
        )));
    }
    let msg_id = uuid::Uuid::new_v4().to_string();
    ctx.session
        .journal()
        .append_to(
            &team_board_stream(&record.team_run_id),
            vec![Event::TeamMessageSent(TeamMessageSent {
                team_run_id: record.team_run_id.clone(),
                msg_id: msg_id.clone(),
                round: record.round,
                from: me,
                to: to.clone(),
                text,
                task_id: team.task_id().to_string(),
            })],
        )
        .await?;
    let when = if to == team.definition.entry_agent {
        "with the result of your task"
    } else {
        "with its next task"
    };
    Ok(
        ToolOutput::ok(format!("message sent; `{to}` reads it {when}"))
            .with_metadata(json!({ "msg_id": msg_id })),
    )
}

async fn verdict(
    ctx: &RunContext,
    team: &TeamScope,
    record: &TeamRecord,
    args: &Value,
) -> Result<ToolOutput> {
    let Some(passed) = args.get("passed").and_then(Value::as_bool) else {
        return Ok(ToolOutput::error("`passed` (true or false) is required"));
    };
    let output = match string_arg(args, "output") {
        Ok(output) => output.to_string(),
        Err(problem) => return Ok(ToolOutput::error(problem.to_string())),
    };
    ctx.session
        .journal()
        .append_to(
            &team_board_stream(&record.team_run_id),
            vec![Event::TeamGateChecked(TeamGateChecked {
                team_run_id: record.team_run_id.clone(),
                round: record.round,
                name: team.me().to_string(),
                passed,
                output,
            })],
        )
        .await?;
    Ok(ToolOutput::ok(if passed {
        "verdict recorded: passed"
    } else {
        "verdict recorded: failed; the team goes into a recovery round"
    }))
}

/// Why a `team_dispatch` call may not run now; `None` when it may.
fn refusal(
    team: &TeamScope,
    record: &TeamRecord,
    args: &Value,
    taken: &[String],
) -> std::result::Result<DispatchPlan, Refusal> {
    let definition = &team.definition;
    let others: Vec<&str> = definition
        .members
        .iter()
        .filter(|m| m.name != definition.entry_agent)
        .map(|m| m.name.as_str())
        .collect();
    let agent = string_arg(args, "agent")?.to_string();
    let task = string_arg(args, "task")?.to_string();
    let others = others.join(", ");
    if agent == team.me() {
        return Err(Refusal::ToItself { agent, others });
    }
    if definition.member(&agent).is_none() {
        return Err(Refusal::UnknownMember { agent, others });
    }
    if definition.gates.require_contract && record.contract.is_none() {
        return Err(Refusal::NoContract);
    }
    let criteria = policy::check(&definition.gates.task_policy, record, &task, args)?;
    let max = definition.loop_config.max_iterations;
    if max != 0 && record.round >= max {
        return Err(Refusal::MaxIterations { max });
    }
    if definition.loop_config.stop_policy == lumina_team::StopPolicy::StopOnFailure {
        if let Some(reason) = &record.recovery_reason {
            return Err(Refusal::StopOnFailure {
                reason: reason.clone(),
            });
        }
    }
    if taken.contains(&agent) {
        return Err(Refusal::Twice { agent });
    }
    Ok(DispatchPlan {
        round: record.round + 1,
        agent,
        task,
        criteria,
    })
}

/// Runs a step's consecutive `team_dispatch` calls as one round: checks each, journals the
/// round's start, runs the accepted ones concurrently (bounded by the team's permits),
/// then journals the round's end with what failed.
pub(crate) async fn dispatch_group(
    ctx: &RunContext,
    settings: &RunSettings,
    step: u32,
    group: &[ToolCall],
) -> Result<CallOutcome> {
    let (Some(team), Some(record)) = (ctx.team.as_deref(), active_team(&ctx.session).await) else {
        let refused = group.iter().map(|call| {
            run_tool(
                ctx,
                settings,
                step,
                call,
                Precheck::Refused("the session is not in a team".into()),
            )
        });
        return finish(join_all(refused).await);
    };
    let mut taken = Vec::new();
    let prechecks: Vec<Precheck> = group
        .iter()
        .map(|call| {
            let args = call.arguments.as_ref().cloned().unwrap_or(Value::Null);
            match refusal(team, &record, &args, &taken) {
                Ok(plan) => {
                    taken.push(plan.agent.clone());
                    Precheck::Dispatch(plan)
                }
                Err(reason) => Precheck::Refused(reason.to_string()),
            }
        })
        .collect();
    let round = record.round + 1;
    let board = team_board_stream(&record.team_run_id);
    let journal = ctx.session.journal();
    if !taken.is_empty() {
        journal
            .append_to(
                &board,
                vec![Event::TeamRoundStarted(TeamRoundStarted {
                    team_run_id: record.team_run_id.clone(),
                    round,
                    recovery: record.recovery_reason.is_some(),
                    reason: record.recovery_reason.clone(),
                })],
            )
            .await?;
    }
    let results = join_all(
        group
            .iter()
            .zip(prechecks)
            .map(|(call, precheck)| run_tool(ctx, settings, step, call, precheck)),
    )
    .await;
    // A backend that stops serving the session leaves the round open: the next owner
    // resumes it (`control::resume_round`).
    if !taken.is_empty() && !ctx.session.is_stopping() {
        end_round(ctx, &record.team_run_id, round).await?;
    }
    finish(results)
}

fn finish(results: Vec<Result<CallOutcome>>) -> Result<CallOutcome> {
    let mut outcome = CallOutcome::Finished;
    for result in results {
        if result? == CallOutcome::Interrupted {
            outcome = CallOutcome::Interrupted;
        }
    }
    Ok(outcome)
}

/// Journals the end of `round` with what failed in it.
pub(crate) async fn end_round(ctx: &RunContext, team_run_id: &str, round: u32) -> Result<()> {
    let failures = active_team(&ctx.session)
        .await
        .map(|r| r.round_failures(round))
        .unwrap_or_default();
    ctx.session
        .journal()
        .append_to(
            &team_board_stream(team_run_id),
            vec![Event::TeamRoundEnded(TeamRoundEnded {
                team_run_id: team_run_id.to_string(),
                round,
                passed: failures.is_empty(),
                failures,
            })],
        )
        .await?;
    Ok(())
}
