//! Follow-ups and steering (LightWorker): what a submit does while a run is active, how the
//! next queued run starts, and interrupts of queued runs.
//!
//! - A follow-up is journaled as `run.queued` together with its idempotency record and
//!   starts (`run.started`, `message.user`) when the runs before it have ended, in order.
//! - A steering message is journaled as `message.steering` together with its idempotency
//!   record; the run loop delivers it before its next model request (see `context.rs`).
//! - Both are durable: after a restart the projection still lists the queued runs (the
//!   session counts as busy, so start-up recovery opens it) and [`Session::resume_queued`]
//!   starts them once the interrupted run is closed; undelivered steering reaches the next
//!   model request of whichever run comes next.

use std::sync::Arc;

use lumina_journal::CommandRecord;
use lumina_protocol::methods::{RunSummary, SessionSubmitParams, SessionSubmitResult, SubmitMode};
use lumina_protocol::{Event, RunFailureCode, RunStatus, MAIN_STREAM};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::hooks::{run_hooks, HookEvent, HookScope, HookVerdict};
use crate::projection::QueuedRun;
use crate::run::RunContext;
use crate::session::{ActiveRun, Session};
use crate::settings::RunSettings;
use crate::{Error, Result};

impl Session {
    /// `user_prompt_submit` hooks for a steering message, before it is journaled: a hook
    /// that blocks it refuses the submit (`forbidden`), so it never reaches the model.
    pub(crate) async fn steering_hooks(
        &self,
        active: &str,
        text: &str,
        settings: &RunSettings,
    ) -> Result<()> {
        let scope = HookScope {
            journal: self.journal(),
            stream: MAIN_STREAM,
            project_root: self.project_root(),
            run_id: Some(active),
            call_id: None,
            tool: None,
            cancel: None,
        };
        let payload = json!({ "prompt": text, "steering": true });
        match run_hooks(
            &settings.hooks,
            HookEvent::UserPromptSubmit,
            &scope,
            payload,
        )
        .await?
        {
            HookVerdict::Continue => Ok(()),
            HookVerdict::Blocked(reason) => Err(Error::BlockedByHook(reason)),
        }
    }

    /// Journals a steering message for the active run. Called under the dispatch lock.
    pub(crate) async fn steer(
        &self,
        active: String,
        params: &SessionSubmitParams,
    ) -> Result<SessionSubmitResult> {
        self.journal()
            .append_with_command(
                vec![Event::MessageSteering {
                    run_id: active.clone(),
                    text: params.prompt.clone(),
                }],
                CommandRecord {
                    key: params.idempotency_key.clone(),
                    result: json!({ "run_id": active, "steering": true }),
                },
            )
            .await?;
        let run = self
            .journal()
            .with_projection(|p| p.runs.get(&active).cloned())
            .await
            .unwrap_or_else(|| summary(&active, RunStatus::Running));
        Ok(SessionSubmitResult {
            run_id: active,
            created: true,
            run,
        })
    }

    /// Journals a follow-up behind the active and queued runs. Called under the dispatch lock.
    pub(crate) async fn enqueue(
        &self,
        params: &SessionSubmitParams,
        overrides: Map<String, Value>,
        mode: SubmitMode,
    ) -> Result<SessionSubmitResult> {
        let run_id = uuid::Uuid::new_v4().to_string();
        self.journal()
            .append_with_command(
                vec![Event::RunQueued {
                    run_id: run_id.clone(),
                    idempotency_key: params.idempotency_key.clone(),
                    prompt: params.prompt.clone(),
                    mode: mode.as_str().into(),
                    headless: params.headless,
                }],
                CommandRecord {
                    key: params.idempotency_key.clone(),
                    result: json!({ "run_id": run_id }),
                },
            )
            .await?;
        self.lock()
            .queued_overrides
            .insert(run_id.clone(), overrides);
        Ok(SessionSubmitResult {
            run_id: run_id.clone(),
            created: true,
            run: summary(&run_id, RunStatus::Queued),
        })
    }

    /// Interrupts the active run (or the named one, which may be queued: it is then
    /// cancelled before it starts). Returns false when there was nothing to interrupt.
    pub async fn interrupt(&self, run_id: Option<&str>) -> Result<bool> {
        {
            let state = self.lock();
            if let Some(active) = &state.active {
                if run_id.is_none_or(|id| id == active.run_id) {
                    active.cancel.cancel();
                    return Ok(true);
                }
            }
        }
        let Some(run_id) = run_id else {
            return Ok(false);
        };
        let _turn = self.dispatch().lock().await;
        let queued = self
            .journal()
            .with_projection(|p| p.queued.iter().any(|q| q.run_id == run_id))
            .await;
        if !queued {
            return Ok(false);
        }
        self.journal()
            .append(vec![Event::RunInterrupted {
                run_id: run_id.to_string(),
                reason: "cancelled before it started".into(),
            }])
            .await?;
        self.lock().queued_overrides.remove(run_id);
        Ok(true)
    }

    /// Starts the queued runs left by a previous owner or process (after recovery closed the
    /// interrupted run), unless a run is active already.
    pub async fn resume_queued(self: &Arc<Self>) {
        let _turn = self.dispatch().lock().await;
        if self.lock().active.is_some() {
            return;
        }
        if let Some(ctx) = self.start_next(None).await {
            self.spawn_runs(ctx);
        }
    }

    /// Called by a run that just journaled its end, under the dispatch lock: forgets it and
    /// starts the next queued run, whose context is returned for the caller to execute.
    pub(crate) async fn start_next_locked(self: &Arc<Self>, finished: &str) -> Option<RunContext> {
        self.start_next(Some(finished)).await
    }

    async fn start_next(self: &Arc<Self>, finished: Option<&str>) -> Option<RunContext> {
        {
            let mut state = self.lock();
            if let Some(finished) = finished {
                if state.active.as_ref().map(|a| a.run_id.as_str()) == Some(finished) {
                    state.active = None;
                }
            }
            if state.stopping || self.is_fenced() {
                return None;
            }
        }
        loop {
            let next = self
                .journal()
                .with_projection(|p| p.queued.first().cloned())
                .await?;
            let overrides = self
                .lock()
                .queued_overrides
                .remove(&next.run_id)
                .unwrap_or_default();
            match self.start_queued(next, overrides).await {
                Ok(Some(ctx)) => return Some(ctx),
                // It failed at once (journaled); try the one after it.
                Ok(None) => continue,
                Err(err) => {
                    tracing::error!(session_id = %self.id(), error = %err, "could not start a queued run");
                    return None;
                }
            }
        }
    }

    /// Journals the start of a queued run and makes it active; `None` when its settings are
    /// unusable (then the run is journaled as failed right away).
    async fn start_queued(
        self: &Arc<Self>,
        queued: QueuedRun,
        overrides: Map<String, Value>,
    ) -> Result<Option<RunContext>> {
        let settings = self
            .reload_with(overrides)
            .and_then(|s| s.check_model().map(|()| s));
        let model = settings
            .as_ref()
            .map(RunSettings::model_name)
            .unwrap_or_default();
        let skill = lumina_skills::parse_invocation(&queued.prompt).map(|(name, _)| name);
        let mut events = vec![
            Event::RunStarted {
                run_id: queued.run_id.clone(),
                idempotency_key: queued.idempotency_key.clone(),
                model,
            },
            Event::MessageUser {
                run_id: queued.run_id.clone(),
                text: queued.prompt.clone(),
                skill,
            },
        ];
        let settings = match settings {
            Ok(settings) => settings,
            Err(err) => {
                events.push(Event::RunFailed {
                    run_id: queued.run_id.clone(),
                    code: RunFailureCode::Settings,
                    message: err.to_string(),
                });
                self.journal().append(events).await?;
                return Ok(None);
            }
        };
        self.journal().append(events).await?;
        let cancel = CancellationToken::new();
        self.lock().active = Some(ActiveRun {
            run_id: queued.run_id.clone(),
            cancel: cancel.clone(),
        });
        Ok(Some(RunContext::top_level(
            self.clone(),
            queued.run_id,
            queued.prompt,
            settings,
            queued.headless,
            cancel,
        )))
    }
}

fn summary(run_id: &str, status: RunStatus) -> RunSummary {
    RunSummary {
        run_id: run_id.to_string(),
        status,
        result: None,
        error: None,
    }
}
