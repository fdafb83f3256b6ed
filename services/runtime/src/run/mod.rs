//! One run of the agent loop: compile context → stream the model → run tool calls through
//! permissions → append results → repeat until the model stops, the user interrupts, a budget
//! is hit, or something fails. Every step is journaled; failures are recorded, never hidden.
//!
//! Around the loop: `user_prompt_submit` hooks before the first step (exit 2 fails the run
//! with `blocked_by_hook`), `stop` hooks before the terminal event. A run whose model
//! answered while a steering message was still undelivered takes another step instead of
//! ending, so the message reaches the model in this run. The end of a run and the start of
//! the next queued one happen under the session's dispatch lock ([`execute`] returns it).
//!
//! The same loop ([`step::run_loop`]) runs sub-agents (`crate::subagent`, on their own
//! stream) and goal turns (`crate::goal`: the run ends with the goal's verdict).

mod calls;
pub(crate) mod step;

use std::sync::Arc;
use std::time::Duration;

use lumina_protocol::{Event, EventFrame, GoalState, RunFailureCode, RunStatus, MAIN_STREAM};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::context;
use crate::goal::{GoalEnd, GoalRequest, GoalRun};
use crate::hooks::{run_hooks, HookEvent, HookScope, HookVerdict};
use crate::session::Session;
use crate::settings::RunSettings;
use crate::subagent::AgentScope;
use crate::{Error, Result};

/// How a run ended, for the journal.
pub(crate) enum Outcome {
    Completed(String),
    Failed {
        code: RunFailureCode,
        message: String,
    },
    Interrupted(String),
    /// A goal run ended by the goal's own verdict (success, budget, no progress).
    Goal(GoalEnd),
}

pub(crate) struct RunContext {
    pub session: Arc<Session>,
    pub run_id: String,
    /// The run's prompt (for `user_prompt_submit` hooks).
    pub prompt: String,
    pub settings: RunSettings,
    pub headless: bool,
    pub cancel: CancellationToken,
    /// Where the run's events go: `main`, or `agent/<id>` for a sub-agent.
    pub stream: String,
    /// Depth, tool subset and agent-tree counters (top-level runs: depth 0, every tool).
    pub agent: AgentScope,
    /// The goal this run works on: its turns in a top-level run, approval states in a
    /// sub-agent of one.
    pub goal: Option<Arc<GoalRun>>,
    /// The run's place in an agent team: the leader (a top-level run of a session that
    /// entered a team, attached in [`execute`]) or a member task (`crate::team`).
    pub team: Option<Arc<crate::team::TeamScope>>,
}

impl RunContext {
    /// A run of the session's main conversation, the root of its own agent tree.
    pub(crate) fn top_level(
        session: Arc<Session>,
        run_id: String,
        prompt: String,
        settings: RunSettings,
        headless: bool,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            session,
            run_id,
            prompt,
            settings,
            headless,
            cancel,
            stream: MAIN_STREAM.to_string(),
            agent: AgentScope::root(),
            goal: None,
            team: None,
        }
    }

    /// Appends to this run's stream.
    pub(crate) async fn append(&self, events: Vec<Event>) -> Result<Vec<Arc<EventFrame>>> {
        self.session.journal().append_to(&self.stream, events).await
    }

    /// Appends to this run's stream with approvals audit records (docs/audit.md).
    pub(crate) async fn append_audited(
        &self,
        events: Vec<Event>,
        audit: Vec<lumina_journal::NewAudit>,
    ) -> Result<Vec<Arc<EventFrame>>> {
        self.session
            .journal()
            .append_audited(&self.stream, events, audit)
            .await
    }

    pub(crate) fn is_main(&self) -> bool {
        self.stream == MAIN_STREAM
    }

    /// The goal whose turns this run takes (never a sub-agent's).
    pub(crate) fn goal_turns(&self) -> Option<&GoalRun> {
        self.goal.as_deref().filter(|_| self.is_main())
    }

    /// Journals a `warning` of this run on its stream.
    pub(crate) async fn warn(&self, code: &str, message: impl Into<String>) -> Result<()> {
        self.append(vec![Event::Warning {
            code: code.into(),
            message: message.into(),
            run_id: Some(self.run_id.clone()),
        }])
        .await?;
        Ok(())
    }

    /// Why a cancelled run stopped, for the events that record it.
    pub(crate) fn interrupt_reason(&self) -> String {
        if self.goal.as_deref().is_some_and(GoalRun::wall_expired) {
            "the goal's wall-time budget (max_wall_ms) ran out".into()
        } else {
            "interrupted by the user".into()
        }
    }
}

/// Runs to the end, journals the terminal event and starts the next queued run, which it
/// returns for the caller to execute. A lost fence stops the run at once (there is nothing
/// more it may write); a store that cannot be reached delays its end until it can be
/// journaled (`journal_end`).
pub(crate) async fn execute(mut ctx: RunContext) -> Option<RunContext> {
    let _run_end = ctx.is_main().then(|| RunEnd {
        tools: ctx.session.tools().clone(),
        session_id: ctx.session.id().to_string(),
    });
    let mut steps = 0;
    let mut last_text = String::new();
    // A session in a team: this run is the leader's.
    let mut team_problem = None;
    if ctx.is_main() && ctx.team.is_none() {
        match crate::team::attach(&ctx).await {
            Ok(Some(team)) => {
                // The leader uses the tools its agent.yaml allows, like every member.
                ctx.agent.tools = Some(crate::team::member::member_tools(&ctx, team.me(), &team));
                ctx.team = Some(team);
            }
            Ok(None) => {}
            Err(problem) => team_problem = Some(problem.to_string()),
        }
    }
    if ctx.is_main() {
        if let Err(Error::Fenced) = crate::trust::project_hooks(&ctx).await {
            return fenced(&ctx).await;
        }
    }
    let _watchdog = wall_watchdog(&ctx);
    let mut first = Some(match team_problem {
        Some(message) => Ok(Some(Outcome::Failed {
            code: RunFailureCode::Settings,
            message,
        })),
        None => prompt_hooks(&ctx).await,
    });
    // A team round the backend stopped in resumes before the leader's model is asked.
    if let Some(Ok(None)) = first {
        if let Err(err) = crate::team::control::resume_round(&ctx).await {
            first = Some(Err(err));
        }
    }
    loop {
        let result = match first.take() {
            Some(Ok(Some(blocked))) => Ok(blocked),
            Some(Err(err)) => Err(err),
            Some(Ok(None)) | None => step::run_loop(&ctx, &mut steps, &mut last_text).await,
        };
        let outcome = match result {
            // Cancelled by the wall-time watchdog: the goal's budget, not the user.
            Ok(Outcome::Interrupted(_)) if ctx.goal_turns().is_some_and(GoalRun::wall_expired) => {
                Outcome::Goal(GoalEnd::budget("max_wall_ms"))
            }
            Ok(outcome) => outcome,
            Err(Error::Fenced) => return fenced(&ctx).await,
            Err(err) => Outcome::Failed {
                code: RunFailureCode::RuntimeError,
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
        let goal_event = ctx
            .goal
            .as_ref()
            .map(|goal| goal_event(&ctx, goal, &outcome));
        let event = match outcome {
            Outcome::Completed(result) => Event::RunCompleted {
                run_id: ctx.run_id.clone(),
                result,
                usage,
            },
            Outcome::Goal(GoalEnd {
                state: GoalState::Success,
                summary,
                ..
            }) => Event::RunCompleted {
                run_id: ctx.run_id.clone(),
                result: summary.unwrap_or(last_text),
                usage,
            },
            Outcome::Goal(end) => Event::RunFailed {
                run_id: ctx.run_id.clone(),
                code: goal_failure(end.state),
                message: end.reason.unwrap_or_default(),
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
        // The run's evidence is in the memory ledger before its end is journaled: whoever
        // sees the run end can recall (and compile) all of it.
        if let Some(sink) = ctx.session.memory() {
            sink.writer.flush().await;
        }
        // The goal's verdict first: whoever sees the run end knows the goal's state.
        let mut events: Vec<Event> = goal_event.into_iter().collect();
        events.push(event);
        match journal_end(&ctx, events).await {
            EndJournaled::Yes => {}
            EndJournaled::Fenced => return fenced(&ctx).await,
            EndJournaled::GaveUp => {
                // The backend is stopping: recovery closes the run when the session opens.
                ctx.session.run_ended(&ctx.run_id);
                return None;
            }
        }
        // The project's new evidence is compiled in the background (`memory_compile`).
        crate::memory::after_run(&ctx);
        let next = ctx.session.start_next_locked(&ctx.run_id).await;
        drop(turn);
        return next;
    }
}

/// Tells the session's tools that its top-level run ended, however [`execute`] returns
/// (the browser tools close the run's browser and delete its profile).
struct RunEnd {
    tools: lumina_tools::ToolRegistry,
    session_id: String,
}

impl Drop for RunEnd {
    fn drop(&mut self) {
        self.tools.run_ended(&self.session_id);
    }
}

/// Whether a run's terminal event reached the journal.
enum EndJournaled {
    Yes,
    Fenced,
    GaveUp,
}

/// First and longest wait between attempts to journal a run's end.
const END_RETRY_FIRST: Duration = Duration::from_millis(100);
const END_RETRY_MAX: Duration = Duration::from_secs(5);

/// Journals a run's terminal events, retrying while the store cannot be reached (a
/// PostgreSQL restart, a full disk): an acknowledged run always gets its end, and the next
/// queued run starts only after it. Stops when the session was fenced (a newer owner closes
/// the run) or is being stopped (recovery closes it on the next open). An attempt whose
/// reply was lost may have committed: the journal catches up from the store and checks
/// before appending again, so the end is never written twice.
async fn journal_end(ctx: &RunContext, events: Vec<Event>) -> EndJournaled {
    let journal = ctx.session.journal();
    let mut wait = END_RETRY_FIRST;
    let mut attempts = 0u32;
    loop {
        match journal.append(events.clone()).await {
            Ok(_) => {
                if attempts > 0 {
                    tracing::info!(session_id = %journal.session_id(), run_id = %ctx.run_id, attempts, "journaled the end of a run after retrying");
                }
                return EndJournaled::Yes;
            }
            Err(Error::Fenced) => return EndJournaled::Fenced,
            Err(err) => {
                attempts += 1;
                tracing::warn!(session_id = %journal.session_id(), run_id = %ctx.run_id, attempts, error = %err, "could not journal the end of a run; retrying");
            }
        }
        loop {
            if ctx.session.is_stopping() {
                tracing::error!(session_id = %journal.session_id(), run_id = %ctx.run_id, "session stopping before the end of its run was journaled");
                return EndJournaled::GaveUp;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(END_RETRY_MAX);
            match journal.resync().await {
                Ok(()) => break,
                Err(Error::Fenced) => return EndJournaled::Fenced,
                Err(err) => {
                    tracing::debug!(session_id = %journal.session_id(), error = %err, "journal still unreachable");
                }
            }
        }
        let open = journal
            .with_projection(|p| p.open_runs.contains_key(&ctx.run_id))
            .await;
        if !open {
            // The lost reply had committed it after all.
            return EndJournaled::Yes;
        }
    }
}

/// The `run.failed` code of a goal run that ended without success.
fn goal_failure(state: GoalState) -> RunFailureCode {
    match state {
        GoalState::BudgetExhausted => RunFailureCode::GoalBudgetExhausted,
        GoalState::Failed => RunFailureCode::GoalFailed,
        // No goal verdict ends a run in another state (success completes it, pause and
        // cancel interrupt it); kept total, in the same shape.
        other => RunFailureCode::from(format!("goal_{}", other.as_str().replace('-', "_"))),
    }
}

/// The goal event that goes with the end of a goal's run. Consumes the pause/cancel
/// request that stopped it.
fn goal_event(ctx: &RunContext, goal: &GoalRun, outcome: &Outcome) -> Event {
    let request = ctx.session.take_goal_request();
    match outcome {
        Outcome::Goal(end) => goal.completed(end.clone()),
        Outcome::Interrupted(_) if request == Some(GoalRequest::Cancel) => {
            goal.completed(GoalEnd {
                state: GoalState::Cancelled,
                reason: Some("cancelled by goal.cancel".into()),
                summary: None,
                evidence: Vec::new(),
            })
        }
        Outcome::Interrupted(reason) => {
            let reason = match request {
                Some(_) => "paused by goal.pause".to_string(),
                None => reason.clone(),
            };
            goal.updated(GoalState::Paused, Some(reason), &ctx.run_id)
        }
        Outcome::Failed { code, message } => goal.completed(GoalEnd {
            state: GoalState::Failed,
            reason: Some(format!("{code}: {message}")),
            summary: None,
            evidence: Vec::new(),
        }),
        // Goal turns never end a run with plain text; kept total for safety.
        Outcome::Completed(_) => goal.completed(GoalEnd {
            state: GoalState::Failed,
            reason: Some("the run ended without goal_complete".into()),
            summary: None,
            evidence: Vec::new(),
        }),
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

pub(crate) fn hook_scope(ctx: &RunContext) -> HookScope<'_> {
    HookScope {
        journal: ctx.session.journal(),
        stream: &ctx.stream,
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
        ctx.warn("hook_invalid", problem.clone()).await?;
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
            code: context::BLOCKED_BY_HOOK,
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
        Outcome::Completed(result) => json!({"status": RunStatus::Completed, "result": result}),
        Outcome::Failed { code, message } => {
            json!({"status": RunStatus::Failed, "code": code, "message": message})
        }
        Outcome::Interrupted(reason) => {
            json!({"status": RunStatus::Interrupted, "reason": reason})
        }
        Outcome::Goal(end) => json!({
            "status": "goal",
            "goal_state": end.state,
            "reason": end.reason,
            "result": end.summary,
        }),
    };
    // The run may be interrupted already; its stop hooks still run to their timeout.
    let scope = HookScope {
        cancel: None,
        ..hook_scope(ctx)
    };
    run_hooks(&settings.hooks, HookEvent::Stop, &scope, payload).await?;
    Ok(())
}

/// Aborts its task when dropped.
struct Watchdog(tokio::task::JoinHandle<()>);

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A goal run with a wall-time budget is cancelled the moment it runs out, also in the
/// middle of a model stream or a tool call (turn boundaries check it too).
fn wall_watchdog(ctx: &RunContext) -> Option<Watchdog> {
    let goal = ctx.goal.clone().filter(|_| ctx.is_main())?;
    let remaining = goal.wall_remaining()?;
    let cancel = ctx.cancel.clone();
    Some(Watchdog(tokio::spawn(async move {
        tokio::time::sleep(remaining).await;
        goal.expire_wall();
        cancel.cancel();
    })))
}
