//! One tool call of a run: `pre_tool_use` hooks, the permission engine (asking the user
//! when needed), the tool itself, its result, then `post_tool_use` hooks (after
//! `tool.completed`, only for calls that ran), and the journal events for each — on the
//! run's stream.
//!
//! Besides the registry's tools a run may offer two the runtime runs itself: `agent`
//! (a sub-agent, `crate::subagent`) and, in goal runs, `goal_complete` (`crate::goal`).
//! The memory tools (`memory_search`, `memory_remember`, `crate::memory`) are runtime
//! tools too, offered when a memory store is configured; so is `a2a_delegate`
//! (`crate::delegate`), offered when the settings name A2A peers. All go through hooks and the permission engine like any tool (read-only: deny rules
//! apply, nobody is asked).

use std::sync::Arc;

use lumina_model::ToolCall;
use lumina_protocol::{Decision, Event, GoalState, TodoItem};
use lumina_tools::permission::{args_hash, PermissionEngine, PermissionMode, Verdict};
use lumina_tools::{Tool, ToolContext, ToolDescriptor, ToolOutput};
use serde_json::{json, Value};

use crate::audit::{self, Subject};
use crate::goal::{goal_complete_descriptor, GOAL_COMPLETE_TOOL};
use crate::hooks::{run_hooks, HookEvent, HookScope, HookVerdict};
use crate::memory;
use crate::run::RunContext;
use crate::settings::RunSettings;
use crate::subagent::{self, LimitReached, Slot, AGENT_TOOL};
use crate::Result;

/// What was decided about a call before it started.
pub(crate) enum Precheck {
    None,
    /// An `agent` call's sub-agent slot, or the limit that refused it.
    Agent(std::result::Result<Slot, LimitReached>),
    /// The call must not run (e.g. the goal's tool-call budget is spent).
    Refused(String),
    /// A `team_dispatch` that passed the team's checks, with its round.
    Dispatch(crate::team::tools::DispatchPlan),
}

/// A tool a run can call.
enum Callable {
    Tool(Arc<dyn Tool>),
    Agent,
    GoalComplete,
    /// `memory_search` or `memory_remember`.
    Memory(ToolDescriptor),
    /// A team tool (`crate::team::tools`).
    Team(ToolDescriptor),
    /// `a2a_delegate` (`crate::delegate`).
    Delegate(ToolDescriptor),
}

impl Callable {
    fn resolve(ctx: &RunContext, name: &str) -> Option<Self> {
        if name == GOAL_COMPLETE_TOOL && ctx.goal_turns().is_some() {
            return Some(Callable::GoalComplete);
        }
        if let Some(team) = &ctx.team {
            if let Some(d) = crate::team::tools::descriptors(team)
                .into_iter()
                .find(|d| d.name == name)
            {
                return Some(Callable::Team(d));
            }
        }
        if !ctx.agent.allows(name) {
            return None;
        }
        if name == AGENT_TOOL {
            return Some(Callable::Agent);
        }
        if name == crate::delegate::DELEGATE_TOOL
            && crate::delegate::offered(&ctx.settings.settings)
        {
            return Some(Callable::Delegate(crate::delegate::descriptor(
                &ctx.settings.settings,
            )));
        }
        if ctx.session.memory().is_some() {
            if let Some(descriptor) = memory::descriptor(name) {
                return Some(Callable::Memory(descriptor));
            }
        }
        ctx.session
            .tools()
            .get(name)
            .or_else(|| crate::mcp::tool(ctx, name))
            .map(Callable::Tool)
    }

    fn descriptor(&self) -> ToolDescriptor {
        match self {
            Callable::Tool(tool) => tool.descriptor(),
            Callable::Agent => subagent::descriptor(),
            Callable::GoalComplete => goal_complete_descriptor(),
            Callable::Memory(descriptor)
            | Callable::Team(descriptor)
            | Callable::Delegate(descriptor) => descriptor.clone(),
        }
    }
}

/// How a tool call (or a step's calls) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallOutcome {
    /// Journaled with its result (`tool.completed`).
    Finished,
    /// The run was interrupted meanwhile (`tool.interrupted`): the run stops.
    Interrupted,
}

/// Runs one tool call through permissions.
pub(crate) async fn run_tool(
    ctx: &RunContext,
    settings: &RunSettings,
    step: u32,
    call: &ToolCall,
    precheck: Precheck,
) -> Result<CallOutcome> {
    let journal = ctx.session.journal();
    let arguments = match &call.arguments {
        Ok(v) => v.clone(),
        Err(invalid) => Value::String(invalid.raw.clone()),
    };
    ctx.append(vec![Event::ToolStarted {
        run_id: ctx.run_id.clone(),
        step,
        call_id: call.id.clone(),
        tool: call.name.clone(),
        arguments: arguments.clone(),
    }])
    .await?;
    let tool_ctx = tool_context(ctx, settings, call.id.clone());
    let scope = HookScope {
        journal,
        stream: &ctx.stream,
        project_root: ctx.session.project_root(),
        run_id: Some(&ctx.run_id),
        call_id: Some(&call.id),
        tool: Some(&call.name),
        cancel: Some(&ctx.cancel),
    };
    // The arguments of a call that actually ran, for `post_tool_use`.
    let mut ran: Option<&Value> = None;
    let (slot, refused, plan) = match precheck {
        Precheck::None => (None, None, None),
        Precheck::Agent(Ok(slot)) => (Some(slot), None, None),
        Precheck::Agent(Err(limit)) => (None, Some(limit.to_string()), None),
        Precheck::Refused(reason) => (None, Some(reason), None),
        Precheck::Dispatch(plan) => (None, None, Some(plan)),
    };
    let output = match (&call.arguments, Callable::resolve(ctx, &call.name)) {
        _ if refused.is_some() => ToolOutput::error(refused.unwrap_or_default()),
        (_, None) => ToolOutput::error(format!(
            "unknown tool `{}`; available tools: {}",
            call.name,
            subagent::offered_tools(ctx, settings)
                .iter()
                .map(|d| d.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        (Err(invalid), Some(_)) => ToolOutput::error(format!(
            "{invalid}; send a JSON object matching the tool's schema"
        )),
        (Ok(args), Some(tool)) => {
            let hooked = run_hooks(
                &settings.hooks,
                HookEvent::PreToolUse,
                &scope,
                json!({ "arguments": args }),
            )
            .await?;
            let authorization = match hooked {
                HookVerdict::Blocked(reason) => Authorization::Blocked(reason),
                // Interrupted while a hook ran: do not ask or run anything more.
                HookVerdict::Continue if ctx.cancel.is_cancelled() => Authorization::Interrupted,
                HookVerdict::Continue => {
                    authorize(ctx, settings, &tool_ctx, &tool, call, args).await?
                }
            };
            match authorization {
                Authorization::Allowed => {
                    ran = Some(args);
                    match &tool {
                        Callable::Tool(tool) => tokio::select! {
                            out = tool.call(&tool_ctx, args.clone()) => out,
                            _ = ctx.cancel.cancelled() => ToolOutput::error("interrupted"),
                        },
                        // A sub-agent stops on the run's cancellation by itself and
                        // journals its end first.
                        Callable::Agent => match slot {
                            Some(slot) => {
                                subagent::run_child(ctx, settings, &call.id, args, slot).await?
                            }
                            None => ToolOutput::error("no sub-agent slot was reserved"),
                        },
                        Callable::GoalComplete => {
                            match ctx.goal_turns().map(|g| g.complete(args)) {
                                Some(Ok(reply)) => ToolOutput::ok(reply),
                                Some(Err(problem)) => ToolOutput::error(problem.to_string()),
                                None => ToolOutput::error("this run works on no goal"),
                            }
                        }
                        Callable::Memory(descriptor) => {
                            memory::call(ctx, &descriptor.name, args).await
                        }
                        Callable::Delegate(_) => crate::delegate::call(ctx, &call.id, args).await,
                        Callable::Team(descriptor) => {
                            crate::team::tools::call(
                                ctx,
                                settings,
                                &call.id,
                                &descriptor.name,
                                args,
                                plan,
                            )
                            .await?
                        }
                    }
                }
                Authorization::Blocked(reason) => {
                    ToolOutput::error(format!("blocked by hook: {reason}"))
                }
                Authorization::Denied(reason) => {
                    ToolOutput::error(format!("permission denied: {reason}"))
                }
                Authorization::Interrupted => ToolOutput::error("interrupted"),
            }
        }
    };
    if ctx.cancel.is_cancelled() {
        ctx.append(vec![Event::ToolInterrupted {
            run_id: ctx.run_id.clone(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            reason: ctx.interrupt_reason(),
        }])
        .await?;
        return Ok(CallOutcome::Interrupted);
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
    ctx.append(events).await?;
    if let Some(args) = ran {
        let payload = json!({
            "arguments": args,
            "output": output.content,
            "is_error": output.is_error,
        });
        run_hooks(&settings.hooks, HookEvent::PostToolUse, &scope, payload).await?;
    }
    Ok(CallOutcome::Finished)
}

enum Authorization {
    Allowed,
    /// A `pre_tool_use` hook exited with code 2; the reason is its stderr.
    Blocked(String),
    Denied(String),
    Interrupted,
}

async fn authorize(
    ctx: &RunContext,
    settings: &RunSettings,
    tool_ctx: &ToolContext,
    tool: &Callable,
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
    // Every journaled decision goes with its approvals audit record (docs/audit.md).
    let decided = |events: Vec<Event>, subject: &Subject, sub: Option<String>| {
        let audit = events
            .iter()
            .enumerate()
            .filter_map(|(i, e)| audit::record(i, e, subject, sub.clone()))
            .collect();
        ctx.append_audited(events, audit)
    };
    let unasked = Subject {
        tool: call.name.clone(),
        args_hash: hash.clone(),
        preview: None,
    };
    match engine.decide(mode, &descriptor, args, &grants) {
        Verdict::Allow { by } => {
            // Every decision on a tool that can change something is journaled (also when
            // the mode allowed it); reads and the always-safe task list are not.
            let always_safe =
                lumina_tools::permission::ALWAYS_SAFE_TOOLS.contains(&descriptor.name.as_str());
            if !descriptor.read_only && !always_safe {
                let event = resolved(Decision::AllowOnce, by, None, call.id.clone());
                decided(vec![event], &unasked, None).await?;
            }
            Ok(Authorization::Allowed)
        }
        Verdict::Deny { by, reason } => {
            let event = resolved(Decision::Deny, by, Some(reason.clone()), call.id.clone());
            decided(vec![event], &unasked, None).await?;
            Ok(Authorization::Denied(reason))
        }
        Verdict::Ask => {
            let request_id = uuid::Uuid::new_v4().to_string();
            let preview = match tool {
                Callable::Tool(tool) => tool.preview(tool_ctx, args).await,
                Callable::Delegate(_) => crate::delegate::preview(&settings.settings, args),
                _ => None,
            };
            let asked = Subject {
                preview: preview.clone(),
                ..unasked
            };
            let requested = Event::PermissionRequested {
                run_id: ctx.run_id.clone(),
                request_id: request_id.clone(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: args.clone(),
                args_hash: hash,
                preview,
            };
            if ctx.headless {
                let reason = format!(
                    "`{}` needs approval and nobody can answer in headless mode; allow it with --permission-mode or a permissions.allow rule",
                    call.name
                );
                let denied = resolved(Decision::Deny, "headless", Some(reason.clone()), request_id);
                decided(vec![requested, denied], &asked, None).await?;
                return Ok(Authorization::Denied(reason));
            }
            let answer = ctx.session.register_permission(&request_id);
            ctx.append(vec![requested]).await?;
            goal_waits(ctx, true).await?;
            let answer = tokio::select! {
                a = answer => a.ok(),
                _ = ctx.cancel.cancelled() => None,
            };
            ctx.session.forget_permission(&request_id);
            match answer {
                None => {
                    let event = resolved(
                        Decision::Deny,
                        "interrupt",
                        Some("the run was interrupted".into()),
                        request_id,
                    );
                    decided(vec![event], &asked, None).await?;
                    Ok(Authorization::Interrupted)
                }
                Some((decision, reason, sub)) => {
                    let event = resolved(decision, "user", reason.clone(), request_id);
                    decided(vec![event], &asked, sub).await?;
                    goal_waits(ctx, false).await?;
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

/// In a goal (also in its sub-agents), a pending permission request makes the goal
/// `awaiting-approval` until it is answered.
async fn goal_waits(ctx: &RunContext, waiting: bool) -> Result<()> {
    let Some(goal) = &ctx.goal else {
        return Ok(());
    };
    let state = if waiting {
        GoalState::AwaitingApproval
    } else {
        GoalState::Running
    };
    let reason = waiting.then(|| "a tool call waits for permission.respond".to_string());
    let root_run = ctx
        .session
        .active_run_id()
        .unwrap_or_else(|| ctx.run_id.clone());
    ctx.session
        .journal()
        .append(vec![goal.updated(state, reason, &root_run)])
        .await?;
    Ok(())
}

/// What a tool call of this run gets: the session's project and results, the run's
/// cancellation and the settings' shell confinement and limits.
pub(crate) fn tool_context(
    ctx: &RunContext,
    settings: &RunSettings,
    call_id: String,
) -> ToolContext {
    ToolContext {
        project_root: ctx.session.project_root().to_path_buf(),
        results_dir: ctx.session.results_dir(),
        session_id: ctx.session.id().to_string(),
        call_id,
        cancel: ctx.cancel.child_token(),
        shell_timeout_ms: settings.shell_timeout_ms,
        shell_max_timeout_ms: settings.shell_max_timeout_ms,
        output_cap_bytes: settings.output_cap_bytes,
        web_search_url: settings.web_search_url.clone(),
        shell: settings.shell.clone(),
        browser_executable: settings.browser_executable.clone(),
    }
}
