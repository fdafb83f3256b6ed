//! The gates `team_complete` must pass: the contract (`gates.require_contract`), the task
//! policy (`gates.task_policy.require_criteria`: every criterion served, [`super::policy`]),
//! the follow-ups (`gates.follow_ups`: none open, [`super::follow_ups`]), the latest
//! verdicts of the `qa` and `reviewer` members where the team has them, and the
//! `gates.checks` commands, run in the project root now. Results are journaled as
//! `team.gate_checked` (a member's own verdict already is, when it gave one); a failing gate
//! refuses the completion with its output and makes the next round a recovery round.
//! Under `completion_policy: leader` the results are reported and do not refuse.

use lumina_protocol::team::{TeamCompleted, TeamGateChecked};
use lumina_protocol::{team_board_stream, Event};
use lumina_team::CompletionPolicy;
use lumina_tools::ToolOutput;
use serde_json::{json, Value};

use super::state::TeamRecord;
use super::{follow_ups, policy, TeamScope, QA_MEMBER, REVIEWER_MEMBER};
use crate::run::RunContext;
use crate::settings::RunSettings;
use crate::Result;

/// Longest output of a check kept in its gate result.
const CHECK_OUTPUT_CHARS: usize = 4000;

/// One gate's result at completion.
struct Gate {
    name: String,
    passed: bool,
    output: String,
    /// Journaled already (a member's verdict).
    recorded: bool,
}

/// `team_complete{summary}`.
pub(crate) async fn complete(
    ctx: &RunContext,
    settings: &RunSettings,
    team: &TeamScope,
    record: &TeamRecord,
    args: &Value,
) -> Result<ToolOutput> {
    let summary = match args.get("summary").and_then(Value::as_str).map(str::trim) {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => {
            return Ok(ToolOutput::error(
                "`summary` (a non-empty string) is required",
            ))
        }
    };
    let gates = evaluate(ctx, settings, team, record).await;
    let board = team_board_stream(&record.team_run_id);
    let fresh: Vec<Event> = gates
        .iter()
        .filter(|g| !g.recorded)
        .map(|g| {
            Event::TeamGateChecked(TeamGateChecked {
                team_run_id: record.team_run_id.clone(),
                round: record.round,
                name: g.name.clone(),
                passed: g.passed,
                output: g.output.clone(),
            })
        })
        .collect();
    if !fresh.is_empty() {
        ctx.session.journal().append_to(&board, fresh).await?;
    }
    let failing: Vec<&Gate> = gates.iter().filter(|g| !g.passed).collect();
    let blocking =
        team.definition.loop_config.completion_policy == CompletionPolicy::LeaderAndGates;
    if !failing.is_empty() && blocking {
        let mut text = String::from("team_complete refused: ");
        for gate in &failing {
            text.push_str(&format!("gate `{}` failed:\n{}\n", gate.name, gate.output));
        }
        text.push_str("Start a recovery round (team_dispatch) that fixes this, then try again.");
        return Ok(ToolOutput::error(text));
    }
    // Nothing left undone disappears: the deferred (or, under `completion_policy: leader`,
    // still open) follow-ups go with the completion and into the leader's result.
    let unfinished = follow_ups::unfinished(record);
    let listing = follow_ups::listing(&unfinished);
    ctx.session
        .journal()
        .append(vec![Event::TeamCompleted(TeamCompleted {
            team_run_id: record.team_run_id.clone(),
            summary: summary.clone(),
            rounds: record.round,
            follow_ups: unfinished,
        })])
        .await?;
    *team
        .shared
        .completed
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = Some(format!("{summary}{listing}"));
    let report: Vec<Value> = gates
        .iter()
        .map(|g| json!({"name": g.name, "passed": g.passed}))
        .collect();
    Ok(
        ToolOutput::ok(format!("the team's task is complete{listing}"))
            .with_metadata(json!({ "gates": report })),
    )
}

async fn evaluate(
    ctx: &RunContext,
    settings: &RunSettings,
    team: &TeamScope,
    record: &TeamRecord,
) -> Vec<Gate> {
    let definition = &team.definition;
    let mut gates = Vec::new();
    if definition.gates.require_contract {
        gates.push(match &record.contract {
            Some(contract) => Gate {
                name: "contract".into(),
                passed: true,
                output: format!(
                    "{} acceptance criteria: {}",
                    contract.acceptance_criteria.len(),
                    contract.acceptance_criteria.join("; ")
                ),
                recorded: false,
            },
            None => Gate {
                name: "contract".into(),
                passed: false,
                output: "no contract was written (team_contract)".into(),
                recorded: false,
            },
        });
    }
    if let Some((passed, output)) = policy::gate(definition, record) {
        gates.push(Gate {
            name: "task_policy".into(),
            passed,
            output,
            recorded: false,
        });
    }
    if definition.gates.follow_ups {
        let (passed, output) = follow_ups::gate(record);
        gates.push(Gate {
            name: "follow_ups".into(),
            passed,
            output,
            recorded: false,
        });
    }
    for member in [QA_MEMBER, REVIEWER_MEMBER] {
        if definition.member(member).is_none() {
            continue;
        }
        gates.push(match record.gates.get(member) {
            Some(verdict) => Gate {
                name: member.into(),
                passed: verdict.passed,
                output: verdict.output.clone(),
                recorded: true,
            },
            None => Gate {
                name: member.into(),
                passed: false,
                output: format!(
                    "`{member}` has not given a verdict on this task (dispatch a task to it; it answers with team_verdict)"
                ),
                recorded: false,
            },
        });
    }
    for command in &definition.gates.checks {
        let (passed, output) = run_check(ctx, settings, command).await;
        gates.push(Gate {
            name: format!("check:{command}"),
            passed,
            output,
            recorded: false,
        });
    }
    gates
}

/// Runs one check command with the `shell` tool's confinement and limits.
async fn run_check(ctx: &RunContext, settings: &RunSettings, command: &str) -> (bool, String) {
    let Some(shell) = ctx.session.tools().get("shell") else {
        return (false, "no `shell` tool to run the check with".into());
    };
    let tool_ctx = crate::tool_call::tool_context(
        ctx,
        settings,
        format!("team-check-{}", uuid::Uuid::new_v4()),
    );
    let started = std::time::Instant::now();
    let out = shell.call(&tool_ctx, json!({ "command": command })).await;
    tracing::info!(session_id = %ctx.session.id(), command, passed = !out.is_error, elapsed_ms = started.elapsed().as_millis() as u64, "team check ran");
    let mut output: String = out.content.chars().take(CHECK_OUTPUT_CHARS).collect();
    if out.content.chars().count() > CHECK_OUTPUT_CHARS {
        output.push_str("\n…(truncated)");
    }
    (!out.is_error, output)
}
