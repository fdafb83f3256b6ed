//! Goal mode (LightWorker): a goal with acceptance criteria and budgets, pursued as a
//! sequence of model turns on the session until the model declares the criteria met.
//!
//! - A goal runs inside ordinary runs of the session (one at a time, like any run): each
//!   model step is one goal turn. Before every turn the model gets a briefing (objective,
//!   criteria, remaining budget, progress so far) as the last user message of the request;
//!   it is not journaled, so it always shows the current numbers. A turn that ends with text
//!   and no tool calls does not end the goal: the next turn starts.
//! - It ends `success` when the model calls `goal_complete{summary, evidence}` (offered only
//!   in goal runs), `budget-exhausted` when a budget is spent (checked before every turn and
//!   every tool call), `failed` on errors or the no-progress verdict ([`progress`]),
//!   `cancelled` by `goal.cancel`. `goal.pause` and `session.interrupt` stop the run and
//!   leave it `paused`; `goal.resume` continues it in a new run with the journaled usage
//!   (the no-progress count starts afresh: it lives in the run's tracker only).
//! - Everything is journaled on the main stream: `goal.started`, `goal.updated` (with each
//!   model answer — the turn, its tokens and tool calls are counted before the calls run, so
//!   usage survives a crash mid-tool —, on pause, resume and approval waits),
//!   `goal.completed`. Recovery marks a goal that was running when the backend stopped
//!   `paused`.
//!
//! [`control`] has the `goal.*` methods; [`GoalRun`] is the per-run tracker the agent loop
//! consults.

mod control;
pub mod progress;

use std::sync::Mutex as StdMutex;
use std::time::Instant;

use lumina_protocol::methods::GoalSummary;
use lumina_protocol::{Event, GoalBudgets, GoalState, GoalUsage};
use lumina_tools::ToolDescriptor;
use serde_json::{json, Value};

pub(crate) use control::{GoalControl, GoalRequest};
use progress::ProgressDetector;

use crate::error::ArgError;

/// The tool a goal run offers for declaring the criteria met.
pub const GOAL_COMPLETE_TOOL: &str = "goal_complete";

/// A goal as the projection knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct GoalRecord {
    pub summary: GoalSummary,
    pub no_progress_turns: u32,
}

/// Folds a `goal.*` event into the session's goals.
pub(crate) fn apply(goals: &mut Vec<GoalRecord>, event: &Event) {
    match event {
        Event::GoalStarted {
            goal_id,
            run_id,
            objective,
            acceptance_criteria,
            budgets,
            no_progress_turns,
        } => goals.push(GoalRecord {
            summary: GoalSummary {
                goal_id: goal_id.clone(),
                state: GoalState::Running,
                reason: None,
                objective: objective.clone(),
                acceptance_criteria: acceptance_criteria.clone(),
                budgets: *budgets,
                usage: GoalUsage::default(),
                run_id: Some(run_id.clone()),
                summary: None,
            },
            no_progress_turns: *no_progress_turns,
        }),
        Event::GoalUpdated {
            goal_id,
            state,
            reason,
            usage,
            run_id,
        } => {
            if let Some(goal) = goals.iter_mut().find(|g| g.summary.goal_id == *goal_id) {
                goal.summary.state = *state;
                goal.summary.reason = reason.clone();
                goal.summary.usage = *usage;
                if run_id.is_some() {
                    goal.summary.run_id = run_id.clone();
                }
            }
        }
        Event::GoalCompleted {
            goal_id,
            state,
            summary,
            reason,
            usage,
            ..
        } => {
            if let Some(goal) = goals.iter_mut().find(|g| g.summary.goal_id == *goal_id) {
                goal.summary.state = *state;
                goal.summary.reason = reason.clone();
                goal.summary.summary = summary.clone();
                goal.summary.usage = *usage;
            }
        }
        _ => {}
    }
}

/// How a goal run ended, when the goal itself decided it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GoalEnd {
    pub state: GoalState,
    pub reason: Option<String>,
    pub summary: Option<String>,
    pub evidence: Vec<String>,
}

impl GoalEnd {
    pub(crate) fn budget(key: &str) -> Self {
        Self {
            state: GoalState::BudgetExhausted,
            reason: Some(key.to_string()),
            summary: None,
            evidence: Vec::new(),
        }
    }

    pub(crate) fn no_progress() -> Self {
        Self {
            state: GoalState::Failed,
            reason: Some("no-progress".into()),
            summary: None,
            evidence: Vec::new(),
        }
    }
}

/// The goal a run works on: what it is, and what this run has used so far.
pub(crate) struct GoalRun {
    pub goal_id: String,
    pub objective: String,
    pub criteria: Vec<String>,
    pub budgets: GoalBudgets,
    tracker: StdMutex<Tracker>,
    /// Set by the run's wall-time watchdog when `max_wall_ms` ran out mid-turn.
    wall_expired: std::sync::atomic::AtomicBool,
}

struct Tracker {
    /// Usage journaled before this run (wall time included).
    base_wall_ms: u64,
    usage: GoalUsage,
    started: Instant,
    progress: ProgressDetector,
    completion: Option<(String, Vec<String>)>,
    last_text: String,
}

impl GoalRun {
    pub(crate) fn new(record: &GoalRecord) -> Self {
        let s = &record.summary;
        Self {
            goal_id: s.goal_id.clone(),
            objective: s.objective.clone(),
            criteria: s.acceptance_criteria.clone(),
            budgets: s.budgets,
            tracker: StdMutex::new(Tracker {
                base_wall_ms: s.usage.wall_ms,
                usage: s.usage,
                started: Instant::now(),
                progress: ProgressDetector::new(record.no_progress_turns),
                completion: None,
                last_text: String::new(),
            }),
            wall_expired: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Wall time left before `max_wall_ms` runs out (`None`: no such budget).
    pub(crate) fn wall_remaining(&self) -> Option<std::time::Duration> {
        let max = self.budgets.max_wall_ms?;
        let used = self.usage().wall_ms;
        Some(std::time::Duration::from_millis(max.saturating_sub(used)))
    }

    /// The watchdog saw `max_wall_ms` run out (the run is being cancelled).
    pub(crate) fn expire_wall(&self) {
        self.wall_expired
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn wall_expired(&self) -> bool {
        self.wall_expired.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tracker> {
        // A poisoned lock only means a panic mid-update of plain counters.
        self.tracker.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The goal's usage now (journaled usage plus this run's).
    pub(crate) fn usage(&self) -> GoalUsage {
        let t = self.lock();
        let mut usage = t.usage;
        usage.wall_ms = t.base_wall_ms + t.started.elapsed().as_millis() as u64;
        usage
    }

    /// The budget that is spent, if any (checked before every turn).
    pub(crate) fn exhausted(&self) -> Option<&'static str> {
        self.usage().exhausted(&self.budgets)
    }

    /// Counts one model turn; true when it completes the no-progress verdict.
    pub(crate) fn record_turn<'a>(
        &self,
        text: &str,
        tokens: u64,
        calls: impl IntoIterator<Item = (&'a str, &'a Value)>,
    ) -> bool {
        let mut t = self.lock();
        t.usage.turns += 1;
        t.usage.tokens += tokens;
        if !text.trim().is_empty() {
            t.last_text = text.to_string();
        }
        t.progress.observe(text, calls)
    }

    /// Takes a call of `tool` from the budget; false when none is left (the call must not
    /// run). `goal_complete` is free.
    pub(crate) fn take_tool_call(&self, tool: &str) -> bool {
        if tool == GOAL_COMPLETE_TOOL {
            return true;
        }
        let mut t = self.lock();
        if self
            .budgets
            .max_tool_calls
            .is_some_and(|max| t.usage.tool_calls >= max)
        {
            return false;
        }
        t.usage.tool_calls += 1;
        true
    }

    /// Handles a `goal_complete` call: the reply the model sees, or an error.
    pub(crate) fn complete(&self, args: &Value) -> Result<String, ArgError> {
        let summary = args
            .get("summary")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or(ArgError::Required("summary"))?;
        let evidence = match args.get("evidence") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or(ArgError::NotStrings("evidence"))?,
            Some(_) => return Err(ArgError::NotStrings("evidence")),
        };
        self.lock().completion = Some((summary.to_string(), evidence));
        Ok("The goal is marked complete.".into())
    }

    /// `Some` once `goal_complete` succeeded.
    pub(crate) fn completion(&self) -> Option<GoalEnd> {
        self.lock()
            .completion
            .clone()
            .map(|(summary, evidence)| GoalEnd {
                state: GoalState::Success,
                reason: None,
                summary: Some(summary),
                evidence,
            })
    }

    /// `goal.updated` with the current usage.
    pub(crate) fn updated(&self, state: GoalState, reason: Option<String>, run_id: &str) -> Event {
        Event::GoalUpdated {
            goal_id: self.goal_id.clone(),
            state,
            reason,
            usage: self.usage(),
            run_id: Some(run_id.to_string()),
        }
    }

    /// `goal.completed` for `end`.
    pub(crate) fn completed(&self, end: GoalEnd) -> Event {
        Event::GoalCompleted {
            goal_id: self.goal_id.clone(),
            state: end.state,
            summary: end.summary,
            reason: end.reason,
            evidence: end.evidence,
            usage: self.usage(),
        }
    }

    /// What the model is told before each turn.
    pub(crate) fn briefing(&self) -> String {
        let usage = self.usage();
        let last = self.lock().last_text.clone();
        let b = &self.budgets;
        let mut out = format!(
            "[Goal mode — turn {}]\nObjective: {}\n",
            usage.turns + 1,
            self.objective
        );
        if self.criteria.is_empty() {
            out.push_str("Acceptance criteria: the objective is achieved.\n");
        } else {
            out.push_str("Acceptance criteria:\n");
            for (i, c) in self.criteria.iter().enumerate() {
                out.push_str(&format!("{}. {c}\n", i + 1));
            }
        }
        out.push_str(&format!(
            "Budget remaining: {}, {}, {}, {}.\n",
            remaining("turns", usage.turns.into(), b.max_turns.map(u64::from)),
            remaining(
                "tool calls",
                usage.tool_calls.into(),
                b.max_tool_calls.map(u64::from)
            ),
            remaining("tokens", usage.tokens, b.max_tokens),
            remaining("ms of wall time", usage.wall_ms, b.max_wall_ms),
        ));
        out.push_str(&format!(
            "Progress so far: {} turns, {} tool calls, {} tokens, {} ms.\n",
            usage.turns, usage.tool_calls, usage.tokens, usage.wall_ms
        ));
        if !last.trim().is_empty() {
            out.push_str(&format!("Your last message: {}\n", clip(&last, 300)));
        }
        out.push_str(&format!(
            "Keep working toward the objective with your tools. When every acceptance \
             criterion is met, call `{GOAL_COMPLETE_TOOL}` with a summary and the evidence \
             for each criterion; not before. Repeating yourself without progress stops the goal."
        ));
        out
    }
}

fn remaining(what: &str, used: u64, max: Option<u64>) -> String {
    match max {
        Some(max) => format!("{} of {max} {what}", max.saturating_sub(used)),
        None => format!("unlimited {what}"),
    }
}

fn clip(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        flat.chars().take(max).chain(['…']).collect()
    }
}

/// The first user message of a goal's run: what the conversation shows.
pub(crate) fn goal_text(objective: &str, criteria: &[String]) -> String {
    let mut text = format!("Goal: {objective}");
    if !criteria.is_empty() {
        text.push_str("\nAcceptance criteria:");
        for c in criteria {
            text.push_str(&format!("\n- {c}"));
        }
    }
    text
}

/// The `goal_complete` tool as the model sees it.
pub(crate) fn goal_complete_descriptor() -> ToolDescriptor {
    ToolDescriptor {
        name: GOAL_COMPLETE_TOOL.into(),
        description: "Declare the current goal achieved: every acceptance criterion is met. \
            Give a short summary of the outcome and, for each criterion, the evidence \
            (files, command output, checks) that shows it is met. Ends the goal."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": "What was achieved."},
                "evidence": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "One entry per acceptance criterion: why it is met."
                }
            },
            "required": ["summary"]
        }),
        read_only: true,
        edits_files: false,
    }
}
