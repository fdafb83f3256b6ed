//! One run of the agent loop: compile context → stream the model → run tool calls through
//! permissions → append results → repeat until the model stops, the user interrupts, a budget
//! is hit, or something fails. Every step is journaled; failures are recorded, never hidden.

use std::sync::Arc;

use lumina_model::{ChatRequest, ModelClient, ModelError, StreamDelta, ToolCall, ToolSpec};
use lumina_protocol::{Decision, DeltaFrame, Event, TodoItem, ToolCallInfo, Usage};
use lumina_tools::permission::{args_hash, PermissionEngine, PermissionMode, Verdict};
use lumina_tools::{ToolContext, ToolOutput};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::context;
use crate::session::Session;
use crate::settings::RunSettings;
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
    pub settings: RunSettings,
    pub headless: bool,
    pub cancel: CancellationToken,
}

/// Runs to the end and journals the terminal event. Journal errors (e.g. a lost fence) stop
/// the run at once; there is nothing more it may write.
pub(crate) async fn execute(ctx: RunContext) {
    let journal = ctx.session.journal().clone();
    let outcome = match run_loop(&ctx).await {
        Ok(outcome) => outcome,
        Err(Error::Fenced) => {
            ctx.session.mark_fenced();
            tracing::warn!(session_id = %journal.session_id(), run_id = %ctx.run_id, "run stopped: session fenced by a newer owner");
            return;
        }
        Err(err) => Outcome::Failed {
            code: "runtime_error".into(),
            message: err.to_string(),
        },
    };
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
    }
}

async fn run_loop(ctx: &RunContext) -> Result<Outcome> {
    let journal = ctx.session.journal().clone();
    let mut last_text = String::new();
    for step in 1..=MAX_STEPS {
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
        let request = compile(ctx, &settings).await?;
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
            last_text = response.text.clone();
        }
        if response.tool_calls.is_empty() {
            close_step(ctx, step, response.stop_reason.as_str()).await?;
            return Ok(Outcome::Completed(last_text));
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
/// threshold.
async fn compile(ctx: &RunContext, settings: &RunSettings) -> Result<ChatRequest> {
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
    Ok(ChatRequest {
        system,
        messages: history.messages,
        tools,
    })
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

/// Runs one tool call through permissions. Returns true when the user interrupted it.
async fn run_tool(
    ctx: &RunContext,
    settings: &RunSettings,
    step: u32,
    call: &ToolCall,
) -> Result<bool> {
    let journal = ctx.session.journal();
    let arguments = match &call.arguments {
        Ok(v) => v.clone(),
        Err(raw) => Value::String(raw.clone()),
    };
    journal
        .append(vec![Event::ToolStarted {
            run_id: ctx.run_id.clone(),
            step,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: arguments.clone(),
        }])
        .await?;
    let tool_ctx = ToolContext {
        project_root: ctx.session.project_root().to_path_buf(),
        results_dir: ctx.session.results_dir(),
        session_id: journal.session_id().to_string(),
        call_id: call.id.clone(),
        cancel: ctx.cancel.child_token(),
        shell_timeout_ms: settings.shell_timeout_ms,
        shell_max_timeout_ms: settings.shell_max_timeout_ms,
        output_cap_bytes: settings.output_cap_bytes,
    };
    let output = match (&call.arguments, ctx.session.tools().get(&call.name)) {
        (_, None) => ToolOutput::error(format!(
            "unknown tool `{}`; available tools: {}",
            call.name,
            ctx.session
                .tools()
                .descriptors()
                .iter()
                .map(|d| d.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        (Err(raw), Some(_)) => ToolOutput::error(format!(
            "the arguments are not valid JSON ({} bytes); send a JSON object matching the tool's schema",
            raw.len()
        )),
        (Ok(args), Some(tool)) => {
            match authorize(ctx, settings, &tool_ctx, tool.as_ref(), call, args).await? {
                Authorization::Allowed => {
                    tokio::select! {
                        out = tool.call(&tool_ctx, args.clone()) => out,
                        _ = ctx.cancel.cancelled() => ToolOutput::error("interrupted"),
                    }
                }
                Authorization::Denied(reason) => {
                    ToolOutput::error(format!("permission denied: {reason}"))
                }
                Authorization::Interrupted => ToolOutput::error("interrupted"),
            }
        }
    };
    if ctx.cancel.is_cancelled() {
        journal
            .append(vec![Event::ToolInterrupted {
                run_id: ctx.run_id.clone(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                reason: "interrupted by the user".into(),
            }])
            .await?;
        return Ok(true);
    }
    let mut events = vec![Event::ToolCompleted {
        run_id: ctx.run_id.clone(),
        call_id: call.id.clone(),
        tool: call.name.clone(),
        is_error: output.is_error,
        output: output.content.clone(),
        metadata: output.metadata.clone(),
    }];
    if !output.is_error {
        if let Some(todos) = output.metadata.get("todos") {
            if let Ok(todos) = serde_json::from_value::<Vec<TodoItem>>(todos.clone()) {
                events.push(Event::TaskUpdated { todos });
            }
        }
    }
    journal.append(events).await?;
    Ok(false)
}

enum Authorization {
    Allowed,
    Denied(String),
    Interrupted,
}

async fn authorize(
    ctx: &RunContext,
    settings: &RunSettings,
    tool_ctx: &ToolContext,
    tool: &dyn lumina_tools::Tool,
    call: &ToolCall,
    args: &Value,
) -> Result<Authorization> {
    let journal = ctx.session.journal();
    let descriptor = tool.descriptor();
    let grants = journal.with_projection(|p| p.session_grants.clone()).await;
    let engine: &PermissionEngine = &settings.permissions;
    let mode: PermissionMode = settings.permission_mode;
    let hash = args_hash(&call.name, args);
    let resolved = |decision: Decision, by: &str, reason: Option<String>, request_id: String| {
        Event::PermissionResolved {
            run_id: ctx.run_id.clone(),
            request_id,
            decision,
            by: by.to_string(),
            reason,
        }
    };
    match engine.decide(mode, &descriptor, args, &grants) {
        Verdict::Allow { by } => {
            // Decisions on tools that change things are journaled; reads are not.
            if !descriptor.read_only && by != "mode" {
                journal
                    .append(vec![resolved(
                        Decision::AllowOnce,
                        by,
                        None,
                        call.id.clone(),
                    )])
                    .await?;
            }
            Ok(Authorization::Allowed)
        }
        Verdict::Deny { by, reason } => {
            journal
                .append(vec![resolved(
                    Decision::Deny,
                    by,
                    Some(reason.clone()),
                    call.id.clone(),
                )])
                .await?;
            Ok(Authorization::Denied(reason))
        }
        Verdict::Ask => {
            let request_id = uuid::Uuid::new_v4().to_string();
            let preview = tool.preview(tool_ctx, args).await;
            if ctx.headless {
                let reason = format!(
                    "`{}` needs approval and nobody can answer in headless mode; allow it with --permission-mode or a permissions.allow rule",
                    call.name
                );
                journal
                    .append(vec![
                        Event::PermissionRequested {
                            run_id: ctx.run_id.clone(),
                            request_id: request_id.clone(),
                            call_id: call.id.clone(),
                            tool: call.name.clone(),
                            arguments: args.clone(),
                            args_hash: hash,
                            preview,
                        },
                        resolved(Decision::Deny, "headless", Some(reason.clone()), request_id),
                    ])
                    .await?;
                return Ok(Authorization::Denied(reason));
            }
            let answer = ctx.session.register_permission(&request_id);
            journal
                .append(vec![Event::PermissionRequested {
                    run_id: ctx.run_id.clone(),
                    request_id: request_id.clone(),
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    arguments: args.clone(),
                    args_hash: hash,
                    preview,
                }])
                .await?;
            let answer = tokio::select! {
                a = answer => a.ok(),
                _ = ctx.cancel.cancelled() => None,
            };
            ctx.session.forget_permission(&request_id);
            match answer {
                None => {
                    journal
                        .append(vec![resolved(
                            Decision::Deny,
                            "interrupt",
                            Some("the run was interrupted".into()),
                            request_id,
                        )])
                        .await?;
                    Ok(Authorization::Interrupted)
                }
                Some((decision, reason)) => {
                    journal
                        .append(vec![resolved(decision, "user", reason.clone(), request_id)])
                        .await?;
                    if decision == Decision::Deny {
                        Ok(Authorization::Denied(
                            reason.unwrap_or_else(|| "the user denied this call".into()),
                        ))
                    } else {
                        Ok(Authorization::Allowed)
                    }
                }
            }
        }
    }
}
