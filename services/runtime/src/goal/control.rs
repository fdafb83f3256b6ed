//! The `goal.*` methods on a session: start, pause, resume, cancel.
//!
//! Start and resume journal the goal event together with the run that takes its turns, in
//! one append (start also with its idempotency record), under the session's dispatch lock,
//! so a goal is running exactly when its run is open. Pause and cancel of a running goal
//! cancel its run and wait (bounded) until the run journaled the goal's new state.

use std::sync::Arc;
use std::time::Duration;

use lumina_journal::CommandRecord;
use lumina_protocol::methods::{
    GoalRef, GoalResult, GoalResumeParams, GoalStartParams, GoalSummary,
};
use lumina_protocol::{Event, GoalBudgets, GoalState};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::progress::DEFAULT_NO_PROGRESS_TURNS;
use super::{goal_text, GoalRecord, GoalRun};
use crate::run::RunContext;
use crate::session::{ActiveRun, Session};
use crate::settings::{sanitize_overrides, RunSettings};
use crate::{Error, Result};

/// How long pause and cancel wait for the running goal's run to stop.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// What a `goal.*` call asked of the running goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GoalRequest {
    Pause,
    Cancel,
}

/// The goal whose run is active on this session.
pub(crate) struct GoalControl {
    pub goal_id: String,
    pub request: Option<GoalRequest>,
}

/// A budget of 0 would end the goal before its first turn: each one given must be at least
/// 1 (an absent one is no limit).
fn check_budgets(budgets: &GoalBudgets) -> Result<()> {
    let given = [
        ("max_turns", budgets.max_turns.map(u64::from)),
        ("max_tool_calls", budgets.max_tool_calls.map(u64::from)),
        ("max_tokens", budgets.max_tokens),
        ("max_wall_ms", budgets.max_wall_ms),
    ];
    match given.iter().find(|(_, value)| *value == Some(0)) {
        Some((name, _)) => Err(Error::InvalidParams(format!(
            "budgets.{name} must be at least 1 (leave it out for no limit)"
        ))),
        None => Ok(()),
    }
}

impl Session {
    /// `goal.start`: journals the goal and its first run and starts it, or returns what an
    /// earlier start with the same key did.
    pub async fn goal_start(self: &Arc<Self>, params: GoalStartParams) -> Result<GoalResult> {
        if params.idempotency_key.trim().is_empty() {
            return Err(Error::InvalidParams(
                "idempotency_key must not be empty".into(),
            ));
        }
        if params.objective.trim().is_empty() {
            return Err(Error::InvalidParams("objective must not be empty".into()));
        }
        if let Some(existing) = self.existing_goal(&params.idempotency_key).await? {
            return Ok(GoalResult {
                goal: existing,
                created: false,
            });
        }
        let no_progress_turns = params
            .no_progress_turns
            .unwrap_or(DEFAULT_NO_PROGRESS_TURNS);
        if no_progress_turns == 0 {
            return Err(Error::InvalidParams(
                "no_progress_turns must be at least 1".into(),
            ));
        }
        check_budgets(&params.budgets)?;
        self.check_writable().await?;
        let overrides = sanitize_overrides(&params.settings)?;
        let settings = self.settings_for(overrides.clone())?;

        let _turn = self.dispatch().lock().await;
        self.check_idle().await?;
        if let Some(goal) = self
            .journal()
            .with_projection(|p| p.unfinished_goal().cloned())
            .await
        {
            return Err(Error::GoalConflict(format!(
                "goal {} is {}; resume or cancel it first",
                goal.summary.goal_id, goal.summary.state
            )));
        }
        let goal_id = uuid::Uuid::new_v4().to_string();
        let run_id = uuid::Uuid::new_v4().to_string();
        let text = goal_text(&params.objective, &params.acceptance_criteria);
        let appended = self
            .journal()
            .append_with_command(
                vec![
                    Event::RunStarted {
                        run_id: run_id.clone(),
                        idempotency_key: params.idempotency_key.clone(),
                        model: settings.model_name(),
                    },
                    Event::GoalStarted {
                        goal_id: goal_id.clone(),
                        run_id: run_id.clone(),
                        objective: params.objective.clone(),
                        acceptance_criteria: params.acceptance_criteria.clone(),
                        budgets: params.budgets,
                        no_progress_turns,
                    },
                    Event::MessageUser {
                        run_id: run_id.clone(),
                        text: text.clone(),
                        skill: None,
                    },
                ],
                CommandRecord {
                    key: params.idempotency_key.clone(),
                    result: json!({ "run_id": run_id, "goal_id": goal_id }),
                },
            )
            .await;
        match appended {
            Ok(_) => {}
            // A concurrent start with the same key won the race.
            Err(Error::Journal(lumina_journal::Error::DuplicateCommand(_))) => {
                let goal = self
                    .existing_goal(&params.idempotency_key)
                    .await?
                    .ok_or_else(|| Error::InvalidParams("duplicate idempotency key".into()))?;
                return Ok(GoalResult {
                    goal,
                    created: false,
                });
            }
            Err(other) => return Err(other),
        }
        self.lock()
            .goal_overrides
            .insert(goal_id.clone(), overrides);
        let record = self.goal_record(Some(&goal_id)).await?;
        self.start_goal_run(&record, run_id, text, settings, params.headless);
        Ok(GoalResult {
            goal: record.summary,
            created: true,
        })
    }

    /// `goal.resume`: continues a paused goal in a new run. A goal that is running already
    /// is returned as it is (`created: false`).
    pub async fn goal_resume(self: &Arc<Self>, params: GoalResumeParams) -> Result<GoalResult> {
        self.check_writable().await?;
        let _turn = self.dispatch().lock().await;
        let record = self.goal_record(params.goal_id.as_deref()).await?;
        match record.summary.state {
            GoalState::Paused => {}
            GoalState::Running | GoalState::AwaitingApproval => {
                return Ok(GoalResult {
                    goal: record.summary,
                    created: false,
                })
            }
            ended => {
                return Err(Error::GoalConflict(format!(
                    "goal {} has ended ({ended})",
                    record.summary.goal_id
                )))
            }
        }
        self.check_idle().await?;
        let overrides = if params.settings.is_null() {
            self.lock()
                .goal_overrides
                .get(&record.summary.goal_id)
                .cloned()
                .unwrap_or_default()
        } else {
            sanitize_overrides(&params.settings)?
        };
        let settings = self.settings_for(overrides.clone())?;
        let goal_id = record.summary.goal_id.clone();
        let run_id = uuid::Uuid::new_v4().to_string();
        self.journal()
            .append(vec![
                Event::RunStarted {
                    run_id: run_id.clone(),
                    idempotency_key: format!("goal:{goal_id}:resume"),
                    model: settings.model_name(),
                },
                Event::GoalUpdated {
                    goal_id: goal_id.clone(),
                    state: GoalState::Running,
                    reason: Some("resumed".into()),
                    usage: record.summary.usage,
                    run_id: Some(run_id.clone()),
                },
            ])
            .await?;
        self.lock()
            .goal_overrides
            .insert(goal_id.clone(), overrides);
        let record = self.goal_record(Some(&goal_id)).await?;
        let text = goal_text(
            &record.summary.objective,
            &record.summary.acceptance_criteria,
        );
        self.start_goal_run(&record, run_id, text, settings, false);
        Ok(GoalResult {
            goal: record.summary,
            created: true,
        })
    }

    /// `goal.pause`: stops the running goal's run; the goal becomes `paused`.
    pub async fn goal_pause(&self, params: GoalRef) -> Result<GoalResult> {
        self.stop_goal(params, GoalRequest::Pause).await
    }

    /// `goal.cancel`: ends the goal (`cancelled`), stopping its run if it is running.
    pub async fn goal_cancel(&self, params: GoalRef) -> Result<GoalResult> {
        self.stop_goal(params, GoalRequest::Cancel).await
    }

    async fn stop_goal(&self, params: GoalRef, request: GoalRequest) -> Result<GoalResult> {
        self.check_writable().await?;
        let goal_id = {
            let _turn = self.dispatch().lock().await;
            let record = self.goal_record(params.goal_id.as_deref()).await?;
            let goal_id = record.summary.goal_id.clone();
            match (record.summary.state, request) {
                (state, _) if state.is_terminal() => {
                    return Err(Error::GoalConflict(format!(
                        "goal {goal_id} has ended ({state})"
                    )))
                }
                (GoalState::Paused, GoalRequest::Pause) => {
                    return Ok(GoalResult {
                        goal: record.summary,
                        created: false,
                    })
                }
                (GoalState::Paused, GoalRequest::Cancel) => {
                    self.journal()
                        .append(vec![Event::GoalCompleted {
                            goal_id: goal_id.clone(),
                            state: GoalState::Cancelled,
                            summary: None,
                            reason: Some("cancelled by goal.cancel".into()),
                            evidence: Vec::new(),
                            usage: record.summary.usage,
                        }])
                        .await?;
                    self.lock().goal_overrides.remove(&goal_id);
                    let record = self.goal_record(Some(&goal_id)).await?;
                    return Ok(GoalResult {
                        goal: record.summary,
                        created: true,
                    });
                }
                _ => {}
            }
            // Running: its run ends on cancellation and journals the new state.
            let mut state = self.lock();
            let cancel = state.active.as_ref().map(|a| a.cancel.clone());
            match (&mut state.goal, cancel) {
                (Some(control), Some(cancel)) if control.goal_id == goal_id => {
                    control.request = Some(request);
                    cancel.cancel();
                }
                _ => {
                    return Err(Error::Unavailable(format!(
                        "goal {goal_id} is running but its run is not on this instance"
                    )))
                }
            }
            goal_id
        };
        let deadline = tokio::time::Instant::now() + STOP_WAIT;
        loop {
            let record = self.goal_record(Some(&goal_id)).await?;
            let stopped = !matches!(
                record.summary.state,
                GoalState::Running | GoalState::AwaitingApproval
            );
            if stopped || tokio::time::Instant::now() >= deadline {
                if request == GoalRequest::Cancel {
                    self.lock().goal_overrides.remove(&goal_id);
                }
                return Ok(GoalResult {
                    goal: record.summary,
                    created: stopped,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Makes `run_id` the active run and executes it for the goal. Called under the
    /// dispatch lock, after its start was journaled.
    fn start_goal_run(
        self: &Arc<Self>,
        record: &GoalRecord,
        run_id: String,
        prompt: String,
        settings: RunSettings,
        headless: bool,
    ) {
        let cancel = CancellationToken::new();
        {
            let mut state = self.lock();
            state.active = Some(ActiveRun {
                run_id: run_id.clone(),
                cancel: cancel.clone(),
            });
            state.goal = Some(GoalControl {
                goal_id: record.summary.goal_id.clone(),
                request: None,
            });
        }
        let mut ctx =
            RunContext::top_level(self.clone(), run_id, prompt, settings, headless, cancel);
        ctx.goal = Some(Arc::new(GoalRun::new(record)));
        self.spawn_runs(ctx);
    }

    async fn goal_record(&self, goal_id: Option<&str>) -> Result<GoalRecord> {
        self.journal()
            .with_projection(|p| p.goal(goal_id).cloned())
            .await
            .ok_or_else(|| {
                Error::GoalNotFound(match goal_id {
                    Some(id) => format!("goal {id} not found"),
                    None => "this session has no unfinished goal".into(),
                })
            })
    }

    async fn existing_goal(&self, key: &str) -> Result<Option<GoalSummary>> {
        let Some(recorded) = self
            .journal()
            .store()
            .command_result(self.journal().key(), key)
            .await?
        else {
            return Ok(None);
        };
        let Some(goal_id) = recorded.get("goal_id").and_then(Value::as_str) else {
            return Err(Error::InvalidParams(format!(
                "idempotency_key `{key}` was used for a submit, not a goal"
            )));
        };
        Ok(Some(self.goal_record(Some(goal_id)).await?.summary))
    }

    async fn check_writable(&self) -> Result<()> {
        if self.is_fenced() {
            return Err(Error::Fenced);
        }
        if self.journal().with_projection(|p| p.archived).await {
            return Err(Error::Archived(self.id().to_string()));
        }
        Ok(())
    }

    /// A goal run starts only on an idle session. Called under the dispatch lock.
    async fn check_idle(&self) -> Result<()> {
        let queued = self
            .journal()
            .with_projection(|p| !p.queued.is_empty())
            .await;
        if self.lock().active.is_some() || queued {
            return Err(Error::Busy(self.id().to_string()));
        }
        Ok(())
    }

    fn settings_for(&self, overrides: Map<String, Value>) -> Result<RunSettings> {
        let settings = self.reload_with(overrides).map_err(Error::Settings)?;
        settings.check_model().map_err(Error::Settings)?;
        Ok(settings)
    }
}
