//! Running one sub-agent: journal its start on the main stream, run the agent loop on its
//! own stream with its own history, close its run there, and hand its final text back as
//! the parent's tool result.

use std::future::Future;
use std::pin::Pin;

use lumina_protocol::{agent_stream, Event, RunFailureCode};
use lumina_tools::ToolOutput;
use serde_json::{json, Value};

use super::{offered_tools, parse_args, AgentScope, Slot};
use crate::goal::GOAL_COMPLETE_TOOL;
use crate::run::step::run_loop;
use crate::run::{Outcome, RunContext};
use crate::settings::RunSettings;
use crate::{Error, Result};

type ChildFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput>> + Send + 'a>>;

/// Runs the sub-agent of `parent`'s `agent` call `call_id`. Errors are tool results;
/// only journal errors (a lost fence) are `Err`. Boxed with its `Send` bound spelled out:
/// the loop it runs may start sub-agents of its own (async recursion).
pub(crate) fn run_child<'a>(
    parent: &'a RunContext,
    settings: &'a RunSettings,
    call_id: &'a str,
    args: &'a Value,
    slot: Slot,
) -> ChildFuture<'a> {
    Box::pin(child(parent, settings, call_id, args, slot))
}

async fn child(
    parent: &RunContext,
    settings: &RunSettings,
    call_id: &str,
    args: &Value,
    mut slot: Slot,
) -> Result<ToolOutput> {
    let args = match parse_args(args) {
        Ok(args) => args,
        Err(problem) => return Ok(ToolOutput::error(problem.to_string())),
    };
    let parent_tools: Vec<String> = offered_tools(parent, settings)
        .into_iter()
        .map(|d| d.name)
        .filter(|name| name != GOAL_COMPLETE_TOOL)
        .collect();
    let tools = match &args.tools {
        Some(names) => {
            let unknown: Vec<&str> = names
                .iter()
                .filter(|n| !parent_tools.contains(n))
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() {
                return Ok(ToolOutput::error(format!(
                    "unknown tools for the sub-agent: {}; you can give it any of: {}",
                    unknown.join(", "),
                    parent_tools.join(", ")
                )));
            }
            Some(names.clone())
        }
        // Everything the parent may use (its own subset, if it has one).
        None => parent.agent.tools.clone(),
    };
    slot.commit();
    let child_id = uuid::Uuid::new_v4().to_string();
    let child = RunContext {
        session: parent.session.clone(),
        run_id: child_id.clone(),
        prompt: args.prompt.clone(),
        settings: settings.clone(),
        headless: parent.headless,
        cancel: parent.cancel.child_token(),
        stream: agent_stream(&child_id),
        agent: AgentScope {
            depth: parent.agent.depth + 1,
            tree: parent.agent.tree.clone(),
            tools,
            description: args.description.clone(),
        },
        // Its permission waits still show on the goal; its turns are not the goal's.
        goal: parent.goal.clone(),
        team: None,
    };
    let journal = parent.session.journal();
    journal
        .append(vec![Event::AgentStarted {
            parent_run_id: parent.run_id.clone(),
            child_id: child_id.clone(),
            call_id: call_id.to_string(),
            depth: child.agent.depth,
            prompt: args.prompt.clone(),
            description: args.description.clone(),
            tools: offered_tools(&child, settings)
                .into_iter()
                .map(|d| d.name)
                .collect(),
        }])
        .await?;
    child
        .append(vec![
            Event::RunStarted {
                run_id: child_id.clone(),
                idempotency_key: format!("agent:{call_id}"),
                model: settings.model_name(),
            },
            Event::MessageUser {
                run_id: child_id.clone(),
                text: args.prompt.clone(),
                skill: None,
            },
        ])
        .await?;
    let mut steps = 0;
    let mut last_text = String::new();
    let outcome = match run_loop(&child, &mut steps, &mut last_text).await {
        Ok(outcome) => outcome,
        Err(Error::Fenced) => return Err(Error::Fenced),
        Err(err) => Outcome::Failed {
            code: RunFailureCode::RuntimeError,
            message: err.to_string(),
        },
    };
    let usage = parent.session.run_usage(&child_id).await;
    let (terminal, reported, output) = match outcome {
        Outcome::Completed(text) => {
            let result = if text.trim().is_empty() {
                "(the sub-agent ended without a final message)".to_string()
            } else {
                text.clone()
            };
            (
                Event::RunCompleted {
                    run_id: child_id.clone(),
                    result: text,
                    usage,
                },
                Event::AgentCompleted {
                    child_id: child_id.clone(),
                    result: result.clone(),
                    is_error: false,
                },
                ToolOutput::ok(result),
            )
        }
        Outcome::Interrupted(reason) => (
            Event::RunInterrupted {
                run_id: child_id.clone(),
                reason: reason.clone(),
            },
            Event::AgentInterrupted {
                child_id: child_id.clone(),
                reason: reason.clone(),
            },
            ToolOutput::error(format!("the sub-agent was interrupted: {reason}")),
        ),
        Outcome::Failed { code, message } => failed(&child_id, code, message),
        // Sub-agents take no goal turns; kept total for safety.
        Outcome::Goal(end) => failed(
            &child_id,
            RunFailureCode::RuntimeError,
            format!("unexpected goal verdict {}", end.state),
        ),
    };
    child.append(vec![terminal]).await?;
    journal.append(vec![reported]).await?;
    Ok(output.with_metadata(json!({ "child_id": child_id })))
}

fn failed(child_id: &str, code: RunFailureCode, message: String) -> (Event, Event, ToolOutput) {
    let result = format!("the sub-agent failed ({code}): {message}");
    (
        Event::RunFailed {
            run_id: child_id.to_string(),
            code,
            message,
        },
        Event::AgentCompleted {
            child_id: child_id.to_string(),
            result: result.clone(),
            is_error: true,
        },
        ToolOutput::error(result),
    )
}
