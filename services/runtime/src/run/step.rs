//! The steps of a run: compile the context, stream the model, journal its answer, run its
//! tool calls, repeat. Shared by top-level runs, sub-agents (their own stream, history and
//! tools) and goal runs (a briefing before every turn, budgets, the no-progress verdict).

use lumina_model::{ChatRequest, ModelClient, ModelError, StreamDelta, ToolSpec};
use lumina_protocol::{DeltaFrame, Event, GoalState, RunFailureCode, ToolCallInfo, Usage};
use serde_json::Value;

use super::{calls, Outcome, RunContext};
use crate::context;
use crate::goal::GoalEnd;
use crate::memory;
use crate::settings::RunSettings;
use crate::tool_call::CallOutcome;
use crate::{subagent, Result};

/// Steps per run before the run fails with `step_limit` (a runaway-loop guard).
const MAX_STEPS: u32 = 200;

/// Skill conflicts (one name in several locations) and unreadable skills are reported once
/// per run as warnings, so the user sees which definition won.
async fn report_skill_problems(ctx: &RunContext) -> Result<()> {
    let skills = ctx.session.guidance().skills;
    let mut warnings: Vec<Event> = skills
        .conflicts
        .iter()
        .map(|c| Event::Warning {
            code: "skill_conflict".into(),
            message: format!(
                "skill `{}` is defined more than once: using {}, ignoring {}",
                c.name,
                c.winner.display(),
                c.shadowed
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            run_id: Some(ctx.run_id.clone()),
        })
        .collect();
    warnings.extend(skills.errors.iter().map(|e| Event::Warning {
        code: "skill_error".into(),
        message: e.clone(),
        run_id: Some(ctx.run_id.clone()),
    }));
    if !warnings.is_empty() {
        ctx.append(warnings).await?;
    }
    Ok(())
}

/// Steps until the model stops. `steps` and `last_text` carry over between calls: a run that
/// continues for a steering message goes on numbering its steps.
pub(crate) async fn run_loop(
    ctx: &RunContext,
    steps: &mut u32,
    last_text: &mut String,
) -> Result<Outcome> {
    // A team member has its own turn limit (`max_turns_per_task`).
    let max_steps = ctx
        .team
        .as_ref()
        .and_then(|t| t.max_steps())
        .unwrap_or(MAX_STEPS);
    while *steps < max_steps {
        *steps += 1;
        let step = *steps;
        if ctx.cancel.is_cancelled() {
            return Ok(Outcome::Interrupted(ctx.interrupt_reason()));
        }
        if let Some(spent) = ctx.goal_turns().and_then(|g| g.exhausted()) {
            return Ok(Outcome::Goal(GoalEnd::budget(spent)));
        }
        // Settings are re-read before every turn (hot reload).
        let settings = match ctx.session.reload_settings(&ctx.settings).await {
            Ok(s) => s,
            Err(err) => {
                return Ok(Outcome::Failed {
                    code: RunFailureCode::Settings,
                    message: err.to_string(),
                })
            }
        };
        ctx.append(vec![Event::StepStarted {
            run_id: ctx.run_id.clone(),
            step,
        }])
        .await?;
        if step == 1 && ctx.is_main() {
            report_skill_problems(ctx).await?;
        }
        let (request, through_seq) = compile(ctx, &settings, step).await?;
        let tools_len = serde_json::to_string(&request.tools)
            .map(|s| s.len())
            .unwrap_or(0);
        let context_tokens =
            context::estimate_tokens(&request.system, &request.messages, tools_len);
        ctx.append(vec![Event::ModelRequested {
            run_id: ctx.run_id.clone(),
            step,
            model: settings.model_name(),
            api_type: settings.api_type(),
            message_count: request.messages.len() as u32,
            context_tokens,
            through_seq,
        }])
        .await?;

        let client = match settings.model_client() {
            Ok(c) => c,
            Err(err) => {
                close_step(ctx, step, "error").await?;
                return Ok(Outcome::Failed {
                    code: RunFailureCode::ModelNotConfigured,
                    message: err.to_string(),
                });
            }
        };
        let mut thinking = String::new();
        let response = match stream_model(ctx, &client, &request, step, &mut thinking).await {
            Ok(r) => r,
            Err(ModelError::Cancelled) => {
                interrupt_step(ctx, step, &ctx.interrupt_reason()).await?;
                return Ok(Outcome::Interrupted(ctx.interrupt_reason()));
            }
            Err(err) => {
                close_step(ctx, step, "error").await?;
                return Ok(Outcome::Failed {
                    code: err.code().into(),
                    message: err.to_string(),
                });
            }
        };
        let usage = Usage {
            input_tokens: response.usage.input_tokens,
            output_tokens: response.usage.output_tokens,
            cache_read_tokens: response.usage.cache_read_tokens,
            cache_write_tokens: response.usage.cache_write_tokens,
        };
        let calls: Vec<ToolCallInfo> = response
            .tool_calls
            .iter()
            .map(|c| ToolCallInfo {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: match &c.arguments {
                    Ok(v) => v.clone(),
                    Err(invalid) => Value::String(invalid.raw.clone()),
                },
            })
            .collect();
        // A goal counts the turn, its tokens and its tool calls now, and journals that with
        // the answer: usage is durable even if the backend dies in a tool call.
        let mut stalled = false;
        let mut allowed = vec![true; calls.len()];
        let mut progress = None;
        if let Some(goal) = ctx.goal_turns() {
            stalled = goal.record_turn(
                &response.text,
                usage.input_tokens + usage.output_tokens,
                calls.iter().map(|c| (c.name.as_str(), &c.arguments)),
            );
            allowed = calls.iter().map(|c| goal.take_tool_call(&c.name)).collect();
            progress = Some(goal.updated(GoalState::Running, None, &ctx.run_id));
        }
        // A team member's thinking, when its team shows it (`transcript.show_thinking`).
        let mut answer: Vec<Event> = crate::team::thinking_event(ctx, step, &thinking)
            .into_iter()
            .collect();
        answer.extend([
            Event::MessageAssistant {
                run_id: ctx.run_id.clone(),
                step,
                text: response.text.clone(),
                tool_calls: calls,
            },
            Event::ModelResponded {
                run_id: ctx.run_id.clone(),
                step,
                model: response.model.clone(),
                stop_reason: response.stop_reason.as_str().to_string(),
                provider: response.provider.as_str().to_string(),
            },
            Event::UsageRecorded {
                run_id: ctx.run_id.clone(),
                step,
                usage,
                context_tokens: context_tokens.max(response.usage.input_tokens),
                max_tokens: settings.max_tokens,
            },
        ]);
        answer.extend(progress);
        ctx.append(answer).await?;
        if !response.text.is_empty() {
            *last_text = response.text.clone();
        }
        let stop_reason = response.stop_reason.as_str();
        if response.tool_calls.is_empty() && ctx.goal_turns().is_none() {
            close_step(ctx, step, stop_reason).await?;
            return Ok(Outcome::Completed(last_text.clone()));
        }
        let ran = calls::run_calls(ctx, &settings, step, &response.tool_calls, &allowed).await?;
        if ran == CallOutcome::Interrupted {
            interrupt_step(ctx, step, &ctx.interrupt_reason()).await?;
            return Ok(Outcome::Interrupted(ctx.interrupt_reason()));
        }
        close_step(ctx, step, stop_reason).await?;
        // The leader finished the team's task (`team_complete`): the run ends with it.
        if let Some(summary) = ctx.team.as_ref().and_then(|t| t.completed()) {
            return Ok(Outcome::Completed(summary));
        }
        // A goal turn: the goal's verdict, or on to the next turn.
        if let Some(goal) = ctx.goal_turns() {
            if let Some(done) = goal.completion() {
                return Ok(Outcome::Goal(done));
            }
            if stalled {
                return Ok(Outcome::Goal(GoalEnd::no_progress()));
            }
        }
    }
    let message = if ctx.team.as_ref().is_some_and(|t| !t.is_leader()) {
        format!("the member reached max_turns_per_task = {max_steps} turns on this task")
    } else {
        format!("the run reached the limit of {max_steps} steps")
    };
    Ok(Outcome::Failed {
        code: RunFailureCode::StepLimit,
        message,
    })
}

async fn close_step(ctx: &RunContext, step: u32, stop_reason: &str) -> Result<()> {
    ctx.append(vec![Event::StepCompleted {
        run_id: ctx.run_id.clone(),
        step,
        stop_reason: stop_reason.to_string(),
    }])
    .await?;
    Ok(())
}

async fn interrupt_step(ctx: &RunContext, step: u32, reason: &str) -> Result<()> {
    ctx.append(vec![Event::StepInterrupted {
        run_id: ctx.run_id.clone(),
        step,
        reason: reason.to_string(),
    }])
    .await?;
    Ok(())
}

/// Compiles the request for this step, compacting first when the context passes the
/// threshold. Also returns the last seq the context includes. A sub-agent's history is its
/// own stream only; a goal turn ends with the goal's briefing.
async fn compile(
    ctx: &RunContext,
    settings: &RunSettings,
    step: u32,
) -> Result<(ChatRequest, u64)> {
    let journal = ctx.session.journal();
    if step == 1 && ctx.is_main() {
        crate::mcp::prepare(ctx).await?;
    }
    crate::mcp::refresh_tools(ctx).await?;
    let tools: Vec<ToolSpec> = subagent::offered_tools(ctx, settings)
        .into_iter()
        .map(|d| ToolSpec {
            name: d.name,
            description: d.description,
            input_schema: d.input_schema,
        })
        .collect();
    let tools_len = serde_json::to_string(&tools).map(|s| s.len()).unwrap_or(0);
    let guidance = ctx.session.guidance();
    let root = ctx.session.project_root().display().to_string();
    let mut system = match &ctx.team {
        Some(team) => crate::team::system_prompt(team, &root, &guidance),
        None => context::system_prompt(&root, &guidance.instructions, &guidance.skills),
    };
    if ctx.agent.depth > 0 && ctx.team.is_none() {
        system.push_str(&subagent::system_section(
            &ctx.agent,
            settings.settings.subagent_max_depth,
        ));
    }
    // Earlier evidence for the prompt, once per top-level run.
    if step == 1 && ctx.is_main() {
        let budget = settings.settings.memory_context_tokens;
        if let Some((section, source_ids)) = memory::recall_section(ctx, budget).await {
            system.push_str(&section);
            ctx.append(vec![Event::MemoryRecalled {
                run_id: ctx.run_id.clone(),
                source_ids,
            }])
            .await?;
        }
    }
    let window = if ctx.is_main() {
        settings.history_from_seq
    } else {
        0
    };
    let mut events = journal.read_stream(&ctx.stream).await?;
    context::keep_from(&mut events, window);
    let mut history = context::build_history(&events, &guidance.skills);
    let tokens = context::estimate_tokens(&system, &history.messages, tools_len);
    let threshold = (settings.max_tokens as f64 * settings.compaction_threshold) as u64;
    if tokens > threshold {
        match context::compact(&events, &ctx.run_id, 1, tokens) {
            Some(checkpoint) => {
                ctx.append(vec![checkpoint]).await?;
                events = journal.read_stream(&ctx.stream).await?;
                context::keep_from(&mut events, window);
                history = context::build_history(&events, &guidance.skills);
            }
            None => {
                let message = format!(
                    "the context (~{tokens} tokens) is over {:.0}% of max_tokens ({}) and nothing older can be compacted",
                    settings.compaction_threshold * 100.0,
                    settings.max_tokens
                );
                ctx.warn("context_over_budget", message).await?;
            }
        }
    }
    let mut messages = history.messages;
    if let Some(goal) = ctx.goal_turns() {
        context::push_user_text(&mut messages, goal.briefing());
    }
    if let Some(briefing) = crate::team::leader_briefing(ctx).await {
        context::push_user_text(&mut messages, briefing);
    }
    let through_seq = events.last().map_or(0, |f| f.seq);
    Ok((
        ChatRequest {
            system,
            messages,
            tools,
        },
        through_seq,
    ))
}

async fn stream_model(
    ctx: &RunContext,
    client: &ModelClient,
    request: &ChatRequest,
    step: u32,
    thinking: &mut String,
) -> Result<lumina_model::ChatResponse, ModelError> {
    let journal = ctx.session.journal().clone();
    let session_id = journal.session_id().to_string();
    let run_id = ctx.run_id.clone();
    // Deltas belong to the visible conversation; a sub-agent's text shows only in its
    // journaled messages.
    let live = ctx.is_main();
    let capture = crate::team::captures_thinking(ctx);
    let mut on_delta = move |delta: StreamDelta| {
        if let (true, StreamDelta::Thinking(t)) = (capture, &delta) {
            thinking.push_str(t);
        }
        if !live {
            return;
        }
        let (channel, text) = match delta {
            StreamDelta::Text(t) => ("text", t),
            StreamDelta::Thinking(t) => ("thinking", t),
        };
        journal.send_delta(DeltaFrame {
            session_id: session_id.clone(),
            run_id: run_id.clone(),
            step,
            channel: channel.to_string(),
            text,
        });
    };
    client.stream(request, &ctx.cancel, &mut on_delta).await
}
