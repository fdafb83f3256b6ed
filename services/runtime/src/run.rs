//! One run of the agent loop: compile context → stream the model → run tool calls through
//! permissions → append results → repeat until the model stops, the user interrupts, a budget
//! is hit, or something fails. Every step is journaled; failures are recorded, never hidden.
//!
//! Around the loop: `user_prompt_submit` hooks before the first step (exit 2 fails the run
//! with `blocked_by_hook`), `stop` hooks before the terminal event. A run whose model
//! answered while a steering message was still undelivered takes another step instead of
//! ending, so the message reaches the model in this run. The end of a run and the start of
//! the next queued one happen under the session's dispatch lock ([`execute`] returns it).

use std::sync::Arc;

use lumina_model::{ChatRequest, ModelClient, ModelError, StreamDelta, ToolSpec};
use lumina_protocol::{DeltaFrame, Event, ToolCallInfo, Usage};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::context;
use crate::hooks::{run_hooks, HookEvent, HookScope, HookVerdict};
use crate::session::Session;
use crate::settings::RunSettings;
use crate::tool_call::run_tool;
use crate::{Error, Result};

/// Steps per run before the run fails with `step_limit` (a runaway-loop guard).
const MAX_STEPS: u32 = 200;

/// How a run ended, for the journal.
enum Outcome {
    Completed(String),
    Failed { code: String, message: String },
    Interrupted(String),
}

pub(crate) struct RunContext {
    pub session: Arc<Session>,
    pub run_id: String,
    /// The run's prompt (for `user_prompt_submit` hooks).
    pub prompt: String,
    pub settings: RunSettings,
    pub headless: bool,
    pub cancel: CancellationToken,
}

/// Runs to the end, journals the terminal event and starts the next queued run, which it
/// returns for the caller to execute. Journal errors (e.g. a lost fence) stop the run at
/// once; there is nothing more it may write.
pub(crate) async fn execute(ctx: RunContext) -> Option<RunContext> {
    let journal = ctx.session.journal().clone();
    let mut steps = 0;
    let mut last_text = String::new();
    let mut first = Some(prompt_hooks(&ctx).await);
    loop {
        let result = match first.take() {
            Some(Ok(Some(blocked))) => Ok(blocked),
            Some(Err(err)) => Err(err),
            Some(Ok(None)) | None => run_loop(&ctx, &mut steps, &mut last_text).await,
        };
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(Error::Fenced) => return fenced(&ctx).await,
            Err(err) => Outcome::Failed {
                code: "runtime_error".into(),
                message: err.to_string(),
            },
        };
        if steering_pending(&ctx, &outcome).await {
            continue;
        }
        if !ctx.session.is_stopping() {
            if let Err(Error::Fenced) = stop_hooks(&ctx, &outcome).await {
                return fenced(&ctx).await;
            }
        }
        let turn = ctx.session.dispatch().lock().await;
        // A steering message that came in while the stop hooks ran still belongs here.
        if steering_pending(&ctx, &outcome).await {
            drop(turn);
            continue;
        }
        let usage = ctx.session.run_usage(&ctx.run_id).await;
        let event = match outcome {
            Outcome::Completed(result) => Event::RunCompleted {
                run_id: ctx.run_id.clone(),
                result,
                usage,
            },
            Outcome::Failed { code, message } => Event::RunFailed {
                run_id: ctx.run_id.clone(),
                code,
                message,
            },
            Outcome::Interrupted(reason) => Event::RunInterrupted {
                run_id: ctx.run_id.clone(),
                reason,
            },
        };
        if let Err(err) = journal.append(vec![event]).await {
            tracing::error!(session_id = %journal.session_id(), run_id = %ctx.run_id, error = %err, "could not journal the end of a run");
            ctx.session.run_ended(&ctx.run_id);
            return None;
        }
        let next = ctx.session.start_next_locked(&ctx.run_id).await;
        drop(turn);
        return next;
    }
}

/// The session was fenced: stop without writing and forget the run.
async fn fenced(ctx: &RunContext) -> Option<RunContext> {
    ctx.session.mark_fenced();
    ctx.session.run_ended(&ctx.run_id);
    tracing::warn!(session_id = %ctx.session.id(), run_id = %ctx.run_id, "run stopped: session fenced by a newer owner");
    None
}

/// Whether a run that completed must take another step for an undelivered steering message.
async fn steering_pending(ctx: &RunContext, outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Completed(_))
        && !ctx.cancel.is_cancelled()
        && ctx
            .session
            .journal()
            .with_projection(|p| !p.undelivered_steering.is_empty())
            .await
}

fn hook_scope(ctx: &RunContext) -> HookScope<'_> {
    HookScope {
        journal: ctx.session.journal(),
        project_root: ctx.session.project_root(),
        run_id: Some(&ctx.run_id),
        call_id: None,
        tool: None,
        cancel: Some(&ctx.cancel),
    }
}

/// `user_prompt_submit` hooks; `Some(outcome)` when one blocked the prompt.
async fn prompt_hooks(ctx: &RunContext) -> Result<Option<Outcome>> {
    for problem in &ctx.settings.hook_problems {
        ctx.session
            .journal()
            .append(vec![Event::Warning {
                code: "hook_invalid".into(),
                message: problem.clone(),
                run_id: Some(ctx.run_id.clone()),
            }])
            .await?;
    }
    let verdict = run_hooks(
        &ctx.settings.hooks,
        HookEvent::UserPromptSubmit,
        &hook_scope(ctx),
        json!({ "prompt": ctx.prompt }),
    )
    .await?;
    Ok(match verdict {
        HookVerdict::Continue => None,
        HookVerdict::Blocked(reason) => Some(Outcome::Failed {
            code: context::BLOCKED_BY_HOOK.into(),
            message: format!("the prompt was blocked by a hook: {reason}"),
        }),
    })
}

/// `stop` hooks, with the settings as they are now (hot reload).
async fn stop_hooks(ctx: &RunContext, outcome: &Outcome) -> Result<()> {
    let settings = ctx
        .session
        .reload_settings(&ctx.settings)
        .await
        .unwrap_or_else(|_| ctx.settings.clone());
    let payload = match outcome {
        Outcome::Completed(result) => json!({"status": "completed", "result": result}),
        Outcome::Failed { code, message } => {
            json!({"status": "failed", "code": code, "message": message})
        }
        Outcome::Interrupted(reason) => json!({"status": "interrupted", "reason": reason}),
    };
    // The run may be interrupted already; its stop hooks still run to their timeout.
    let scope = HookScope {
        cancel: None,
        ..hook_scope(ctx)
    };
    run_hooks(&settings.hooks, HookEvent::Stop, &scope, payload).await?;
    Ok(())
}

/// Steps until the model stops. `steps` and `last_text` carry over between calls: a run that
/// continues for a steering message goes on numbering its steps.
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
        ctx.session.journal().append(warnings).await?;
    }
    Ok(())
}

async fn run_loop(ctx: &RunContext, steps: &mut u32, last_text: &mut String) -> Result<Outcome> {
    let journal = ctx.session.journal().clone();
    while *steps < MAX_STEPS {
        *steps += 1;
        let step = *steps;
        if ctx.cancel.is_cancelled() {
            return Ok(Outcome::Interrupted("interrupted by the user".into()));
        }
        // Settings are re-read before every turn (hot reload).
        let settings = match ctx.session.reload_settings(&ctx.settings).await {
            Ok(s) => s,
            Err(err) => {
                return Ok(Outcome::Failed {
                    code: "settings".into(),
                    message: err.to_string(),
                })
            }
        };
        journal
            .append(vec![Event::StepStarted {
                run_id: ctx.run_id.clone(),
                step,
            }])
            .await?;
        if step == 1 {
            report_skill_problems(ctx).await?;
        }
        let (request, through_seq) = compile(ctx, &settings).await?;
        let tools_len = serde_json::to_string(&request.tools)
            .map(|s| s.len())
            .unwrap_or(0);
        let context_tokens =
            context::estimate_tokens(&request.system, &request.messages, tools_len);
        journal
            .append(vec![Event::ModelRequested {
                run_id: ctx.run_id.clone(),
                step,
                model: settings.model_name(),
                api_type: settings.api_type_name(),
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
                    code: "model_not_configured".into(),
                    message: err,
                });
            }
        };
        let response = stream_model(ctx, &client, &request, step).await;
        let response = match response {
            Ok(r) => r,
            Err(ModelError::Cancelled) => {
                interrupt_step(ctx, step, "interrupted by the user").await?;
                return Ok(Outcome::Interrupted("interrupted by the user".into()));
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
                    Err(raw) => Value::String(raw.clone()),
                },
            })
            .collect();
        journal
            .append(vec![
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
            ])
            .await?;
        if !response.text.is_empty() {
            *last_text = response.text.clone();
        }
        if response.tool_calls.is_empty() {
            close_step(ctx, step, response.stop_reason.as_str()).await?;
            return Ok(Outcome::Completed(last_text.clone()));
        }
        for call in &response.tool_calls {
            if ctx.cancel.is_cancelled() {
                interrupt_step(ctx, step, "interrupted by the user").await?;
                return Ok(Outcome::Interrupted("interrupted by the user".into()));
            }
            let interrupted = run_tool(ctx, &settings, step, call).await?;
            if interrupted {
                interrupt_step(ctx, step, "interrupted by the user").await?;
                return Ok(Outcome::Interrupted("interrupted by the user".into()));
            }
        }
        close_step(ctx, step, response.stop_reason.as_str()).await?;
    }
    Ok(Outcome::Failed {
        code: "step_limit".into(),
        message: format!("the run reached the limit of {MAX_STEPS} steps"),
    })
}

async fn close_step(ctx: &RunContext, step: u32, stop_reason: &str) -> Result<()> {
    ctx.session
        .journal()
        .append(vec![Event::StepCompleted {
            run_id: ctx.run_id.clone(),
            step,
            stop_reason: stop_reason.to_string(),
        }])
        .await?;
    Ok(())
}

async fn interrupt_step(ctx: &RunContext, step: u32, reason: &str) -> Result<()> {
    ctx.session
        .journal()
        .append(vec![Event::StepInterrupted {
            run_id: ctx.run_id.clone(),
            step,
            reason: reason.to_string(),
        }])
        .await?;
    Ok(())
}

/// Compiles the request for this step, compacting first when the context passes the
/// threshold. Also returns the last seq the context includes.
async fn compile(ctx: &RunContext, settings: &RunSettings) -> Result<(ChatRequest, u64)> {
    let journal = ctx.session.journal();
    let tools: Vec<ToolSpec> = ctx
        .session
        .tools()
        .descriptors()
        .into_iter()
        .map(|d| ToolSpec {
            name: d.name,
            description: d.description,
            input_schema: d.input_schema,
        })
        .collect();
    let tools_len = serde_json::to_string(&tools).map(|s| s.len()).unwrap_or(0);
    let guidance = ctx.session.guidance();
    let system = context::system_prompt(
        &ctx.session.project_root().display().to_string(),
        &guidance.instructions,
        &guidance.skills,
    );
    let mut events = journal.read(0, usize::MAX).await?;
    let mut history = context::build_history(&events, &guidance.skills);
    let tokens = context::estimate_tokens(&system, &history.messages, tools_len);
    let threshold = (settings.max_tokens as f64 * settings.compaction_threshold) as u64;
    if tokens > threshold {
        match context::compact(&events, &ctx.run_id, 1, tokens) {
            Some(checkpoint) => {
                journal.append(vec![checkpoint]).await?;
                events = journal.read(0, usize::MAX).await?;
                history = context::build_history(&events, &guidance.skills);
            }
            None => {
                journal
                    .append(vec![Event::Warning {
                        code: "context_over_budget".into(),
                        message: format!(
                            "the context (~{tokens} tokens) is over {:.0}% of max_tokens ({}) and nothing older can be compacted",
                            settings.compaction_threshold * 100.0,
                            settings.max_tokens
                        ),
                        run_id: Some(ctx.run_id.clone()),
                    }])
                    .await?;
            }
        }
    }
    let through_seq = events.last().map_or(0, |f| f.seq);
    Ok((
        ChatRequest {
            system,
            messages: history.messages,
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
) -> Result<lumina_model::ChatResponse, ModelError> {
    let journal = ctx.session.journal().clone();
    let session_id = journal.session_id().to_string();
    let run_id = ctx.run_id.clone();
    let mut on_delta = move |delta: StreamDelta| {
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
