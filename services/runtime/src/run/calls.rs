//! The tool calls of one step, in the order the model gave them. A run of consecutive
//! `agent` calls executes concurrently (sub-agents are independent by construction: each
//! has its own context); every other call runs alone, in order. Sub-agent slots for a
//! concurrent group are reserved in call order before any of them starts, so which call
//! hits a limit does not depend on timing. In a goal run, calls beyond the goal's tool-call
//! budget (`allowed[i] == false`) are answered with an error and not run.

use futures::future::join_all;
use lumina_model::ToolCall;

use super::RunContext;
use crate::settings::RunSettings;
use crate::subagent::{self, AGENT_TOOL};
use crate::team::DISPATCH_TOOL;
use crate::tool_call::{run_tool, CallOutcome, Precheck};
use crate::Result;

/// Runs the step's calls; `Interrupted` when the run was interrupted.
pub(crate) async fn run_calls(
    ctx: &RunContext,
    settings: &RunSettings,
    step: u32,
    calls: &[ToolCall],
    allowed: &[bool],
) -> Result<CallOutcome> {
    let mut i = 0;
    while i < calls.len() {
        if ctx.cancel.is_cancelled() {
            return Ok(CallOutcome::Interrupted);
        }
        let is_dispatch = |c: &ToolCall| {
            c.name == DISPATCH_TOOL && ctx.team.as_ref().is_some_and(|t| t.is_leader())
        };
        // A team round: the consecutive `team_dispatch` calls run together.
        if is_dispatch(&calls[i]) {
            let end = calls[i..]
                .iter()
                .position(|c| !is_dispatch(c))
                .map_or(calls.len(), |n| i + n);
            let outcome =
                crate::team::tools::dispatch_group(ctx, settings, step, &calls[i..end]).await?;
            i = end;
            if outcome == CallOutcome::Interrupted {
                return Ok(CallOutcome::Interrupted);
            }
            continue;
        }
        let is_agent = |c: &ToolCall| c.name == AGENT_TOOL && ctx.agent.allows(AGENT_TOOL);
        let group_end = if is_agent(&calls[i]) {
            calls[i..]
                .iter()
                .position(|c| !is_agent(c))
                .map_or(calls.len(), |n| i + n)
        } else {
            i + 1
        };
        let group = &calls[i..group_end];
        let group_allowed = &allowed[i.min(allowed.len())..group_end.min(allowed.len())];
        i = group_end;
        let prechecks: Vec<Precheck> = group
            .iter()
            .enumerate()
            .map(|(k, call)| {
                if !group_allowed.get(k).copied().unwrap_or(true) {
                    Precheck::Refused(
                        "the goal's tool-call budget (max_tool_calls) is spent; this call did not run"
                            .into(),
                    )
                } else if is_agent(call) {
                    Precheck::Agent(subagent::reserve(ctx, settings))
                } else {
                    Precheck::None
                }
            })
            .collect();
        let outcome = if group.len() == 1 {
            let precheck = prechecks.into_iter().next().unwrap_or(Precheck::None);
            run_tool(ctx, settings, step, &group[0], precheck).await?
        } else {
            let results = join_all(
                group
                    .iter()
                    .zip(prechecks)
                    .map(|(call, precheck)| run_tool(ctx, settings, step, call, precheck)),
            )
            .await;
            let mut outcome = CallOutcome::Finished;
            for result in results {
                if result? == CallOutcome::Interrupted {
                    outcome = CallOutcome::Interrupted;
                }
            }
            outcome
        };
        if outcome == CallOutcome::Interrupted {
            return Ok(CallOutcome::Interrupted);
        }
    }
    Ok(CallOutcome::Finished)
}
