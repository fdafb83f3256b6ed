//! A live session: its journal writer, the active run, pending permission requests, and
//! subscriptions that deliver every durable event exactly once, backlog first.
//!
//! One run is active at a time. A submit while a run is active either queues a follow-up
//! or steers the active run (`queue.rs`); which run is active changes only under the
//! session's dispatch lock, so submits, the end of a run and the start of the next queued
//! run never interleave.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use lumina_journal::CommandRecord;
use lumina_protocol::methods::{
    RunSummary, SessionInfo, SessionSubmitParams, SessionSubmitResult, SubmitMode,
};
use lumina_protocol::{Decision, Event, EventFrame, RunStatus, SessionStatus, Usage};
use lumina_skills::{InstructionFile, SkillCatalog};
use lumina_tools::ToolRegistry;
use serde_json::{json, Map, Value};
use tokio::sync::{broadcast, mpsc, oneshot, Mutex};
use tokio_util::sync::CancellationToken;

use crate::goal::{GoalControl, GoalRequest};
use crate::journal::{Outbound, SessionJournal};
use crate::run::{self, RunContext};
use crate::settings::{sanitize_overrides, RunSettings, SettingsError};
use crate::{Error, Result, Shared};

/// A user's answer: the decision, its reason, and the subject of the identity that gave it
/// (for the approvals audit).
pub(crate) type PermissionAnswer = (Decision, Option<String>, Option<String>);

pub(crate) struct ActiveRun {
    pub(crate) run_id: String,
    pub(crate) cancel: CancellationToken,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) active: Option<ActiveRun>,
    pending: HashMap<String, oneshot::Sender<PermissionAnswer>>,
    /// `a2a_delegate` calls parked while their agent is unreachable, by call id: waking one
    /// retries the agent (`crate::delegate`).
    pub(crate) parked: HashMap<String, crate::delegate::Wake>,
    /// Set when this instance stops serving the session (shutdown, drain, eviction): the
    /// active run is cancelled and queued runs wait for the next owner.
    pub(crate) stopping: bool,
    /// Setting overrides of follow-ups queued here, by run id. Never journaled (they may
    /// hold keys): a follow-up started after a restart uses the layered settings.
    pub(crate) queued_overrides: HashMap<String, Map<String, Value>>,
    /// The goal whose run is active, and what `goal.pause`/`goal.cancel` asked of it.
    pub(crate) goal: Option<GoalControl>,
    /// Setting overrides of goals, by goal id, for `goal.resume` (memory only, like
    /// `queued_overrides`).
    pub(crate) goal_overrides: HashMap<String, Map<String, Value>>,
    /// The MCP tools the current step offers (`crate::mcp::refresh_tools`).
    pub(crate) mcp_tools: Vec<Arc<dyn lumina_tools::Tool>>,
    /// The MCP servers whose sign-in the active run already waited for.
    pub(crate) mcp_sign_ins_waited: crate::mcp_sign_in::Waited,
    /// Trust questions the user declined in this session (`crate::trust`; not asked again).
    pub(crate) trust_declined: std::collections::HashSet<String>,
}

/// Project guidance compiled into the model context.
pub struct Guidance {
    pub instructions: Vec<InstructionFile>,
    pub skills: SkillCatalog,
}

pub struct Session {
    journal: Arc<SessionJournal>,
    project_root: PathBuf,
    shared: Arc<Shared>,
    state: StdMutex<State>,
    /// Held while deciding which run is active (see the module docs).
    dispatch: Mutex<()>,
    /// Set when a write was refused for an older fence or the session was evicted: this
    /// instance must not write it again.
    fenced: AtomicBool,
    /// Sub-agents running now (the `subagent_max_parallel` limit).
    agents_live: AtomicU32,
}

impl Session {
    pub(crate) fn new(journal: SessionJournal, project_root: PathBuf, shared: Arc<Shared>) -> Self {
        Self {
            journal: Arc::new(journal),
            project_root,
            shared,
            state: StdMutex::new(State::default()),
            dispatch: Mutex::new(()),
            fenced: AtomicBool::new(false),
            agents_live: AtomicU32::new(0),
        }
    }

    /// The session's writer into the Memory Fabric, when the runtime has a store.
    pub(crate) fn memory(&self) -> Option<&crate::memory::MemorySink> {
        self.journal.memory()
    }

    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    pub(crate) fn mark_fenced(&self) {
        self.fenced.store(true, Ordering::SeqCst);
    }

    pub(crate) fn agents_live(&self) -> &AtomicU32 {
        &self.agents_live
    }

    pub fn journal(&self) -> &Arc<SessionJournal> {
        &self.journal
    }

    pub fn id(&self) -> &str {
        self.journal.session_id()
    }

    pub fn project_root(&self) -> &Path {
        &self.project_root
    }

    pub(crate) fn app_root(&self) -> &lumina_config::AppRoot {
        &self.shared.app_root
    }

    /// The MCP manager of the runtime, when there is one.
    pub fn mcp(&self) -> Option<&lumina_mcp::McpManager> {
        self.shared.mcp.as_ref()
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.shared.tools
    }

    /// Where team member tasks run, when not all here (`team_distributed`).
    pub(crate) fn placement(&self) -> Option<&Arc<dyn crate::team::MemberPlacement>> {
        self.shared.placement.as_ref()
    }

    /// The runtime's A2A client (`a2a_delegate`, remote team members).
    pub(crate) fn a2a_client(&self) -> &lumina_a2a::A2aClient {
        &self.shared.a2a
    }

    pub(crate) fn results_dir(&self) -> PathBuf {
        self.shared.app_root.tool_results_dir().join(self.id())
    }

    /// Instructions and skills, read fresh for every step (files may change).
    pub fn guidance(&self) -> Guidance {
        let app = &self.shared.app_root;
        Guidance {
            instructions: lumina_skills::load_instructions(
                &self.project_root,
                &app.instructions_dir(),
            ),
            skills: SkillCatalog::discover(
                &self.project_root,
                &app.user_skills_dir(),
                &app.builtin_skills_dir(),
            ),
        }
    }

    pub(crate) fn dispatch(&self) -> &Mutex<()> {
        &self.dispatch
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means another task panicked mid-update of plain data.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Session info as listed.
    pub async fn info(&self) -> Result<SessionInfo> {
        let record = self
            .journal
            .store()
            .session(&self.journal.key().tenant, self.id())
            .await?
            .ok_or_else(|| Error::SessionNotFound(self.id().to_string()))?;
        let mut info = crate::projection::session_info(&record);
        let summary = self.journal.with_projection(|p| p.summary()).await;
        info.status = if record.archived {
            SessionStatus::Archived
        } else {
            summary.status
        };
        info.head_seq = summary.head_seq;
        info.last_run = summary.last_run;
        info.usage = summary.usage;
        if !summary.title.is_empty() {
            info.title = summary.title;
        }
        Ok(info)
    }

    pub(crate) async fn reload_settings(
        &self,
        previous: &RunSettings,
    ) -> Result<RunSettings, SettingsError> {
        RunSettings::load(
            &self.shared.app_root,
            &self.project_root,
            &self.shared.env,
            previous.overrides.clone(),
        )
    }

    /// The layered settings with `overrides` on top, read now.
    pub(crate) fn reload_with(
        &self,
        overrides: Map<String, Value>,
    ) -> Result<RunSettings, SettingsError> {
        RunSettings::load(
            &self.shared.app_root,
            &self.project_root,
            &self.shared.env,
            overrides,
        )
    }

    /// Starts a run, queues a follow-up or steers the active run (by `params.mode`), or
    /// returns what an earlier submit with the same key did.
    pub async fn submit(
        self: &Arc<Self>,
        params: SessionSubmitParams,
    ) -> Result<SessionSubmitResult> {
        if params.idempotency_key.trim().is_empty() {
            return Err(Error::InvalidParams(
                "idempotency_key must not be empty".into(),
            ));
        }
        if let Some(existing) = self.existing_run(&params.idempotency_key).await? {
            return Ok(existing);
        }
        if self.is_fenced() {
            return Err(Error::Fenced);
        }
        if self.journal.with_projection(|p| p.archived).await {
            return Err(Error::Archived(self.id().to_string()));
        }
        let overrides = sanitize_overrides(&params.settings)?;
        let settings = RunSettings::load(
            &self.shared.app_root,
            &self.project_root,
            &self.shared.env,
            overrides.clone(),
        )
        .map_err(Error::Settings)?;
        settings.check_model().map_err(Error::Settings)?;
        let mode = params.mode.unwrap_or_default();
        if mode == SubmitMode::Steer {
            // Outside the dispatch lock: hooks may take their whole timeout.
            if let Some(active) = self.active_run_id() {
                self.steering_hooks(&active, &params.prompt, &settings)
                    .await?;
            }
        }

        let _turn = self.dispatch.lock().await;
        let active = self.lock().active.as_ref().map(|a| a.run_id.clone());
        let queued = self.journal.with_projection(|p| !p.queued.is_empty()).await;
        let appended = match (active, mode) {
            (Some(active), SubmitMode::Steer) => self.steer(active, &params).await,
            (None, _) if !queued => self.start_now(&params, settings).await,
            (_, mode) => self.enqueue(&params, overrides, mode).await,
        };
        match appended {
            Ok(result) => Ok(result),
            // A concurrent submit with the same key won the race.
            Err(Error::Journal(lumina_journal::Error::DuplicateCommand(_))) => self
                .existing_run(&params.idempotency_key)
                .await?
                .ok_or_else(|| Error::InvalidParams("duplicate idempotency key".into())),
            Err(other) => Err(other),
        }
    }

    /// Starts a run at once (the session is idle). Called under the dispatch lock.
    async fn start_now(
        self: &Arc<Self>,
        params: &SessionSubmitParams,
        settings: RunSettings,
    ) -> Result<SessionSubmitResult> {
        let run_id = uuid::Uuid::new_v4().to_string();
        let cancel = CancellationToken::new();
        let skill = lumina_skills::parse_invocation(&params.prompt).map(|(name, _)| name);
        self.journal
            .append_with_command(
                vec![
                    Event::RunStarted {
                        run_id: run_id.clone(),
                        idempotency_key: params.idempotency_key.clone(),
                        model: settings.model_name(),
                    },
                    Event::MessageUser {
                        run_id: run_id.clone(),
                        text: params.prompt.clone(),
                        skill,
                    },
                ],
                CommandRecord {
                    key: params.idempotency_key.clone(),
                    result: json!({ "run_id": run_id }),
                },
            )
            .await?;
        self.lock().active = Some(ActiveRun {
            run_id: run_id.clone(),
            cancel: cancel.clone(),
        });
        self.spawn_runs(RunContext::top_level(
            self.clone(),
            run_id.clone(),
            params.prompt.clone(),
            settings,
            params.headless,
            cancel,
        ));
        Ok(SessionSubmitResult {
            run_id: run_id.clone(),
            created: true,
            run: RunSummary {
                run_id,
                status: RunStatus::Running,
                result: None,
                error: None,
            },
        })
    }

    /// Executes `first`, then each queued run after it, on one task.
    pub(crate) fn spawn_runs(self: &Arc<Self>, first: RunContext) {
        tokio::spawn(async move {
            let mut next = Some(first);
            while let Some(ctx) = next.take() {
                // Every log line and trace span of the run carries its ids.
                let span = tracing::info_span!(
                    "run",
                    session_id = %ctx.session.id(),
                    run_id = %ctx.run_id,
                    fence = ctx.session.journal().fence(),
                );
                next = tracing::Instrument::instrument(run::execute(ctx), span).await;
            }
        });
    }

    /// Whether a submit with this idempotency key was accepted before (a retry returns the
    /// original run and starts nothing).
    pub async fn is_retry(&self, idempotency_key: &str) -> Result<bool> {
        Ok(self
            .journal
            .store()
            .command_result(self.journal.key(), idempotency_key)
            .await?
            .is_some())
    }

    async fn existing_run(&self, key: &str) -> Result<Option<SessionSubmitResult>> {
        let Some(recorded) = self
            .journal
            .store()
            .command_result(self.journal.key(), key)
            .await?
        else {
            return Ok(None);
        };
        let run_id = recorded
            .get("run_id")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        let run = self
            .journal
            .with_projection(|p| p.runs.get(&run_id).cloned())
            .await
            .unwrap_or(RunSummary {
                run_id: run_id.clone(),
                status: RunStatus::Running,
                result: None,
                error: None,
            });
        Ok(Some(SessionSubmitResult {
            run_id,
            created: false,
            run,
        }))
    }

    /// Stops the active run because this instance is shutting down or lost the session.
    /// Queued runs stay queued: whoever opens the session next starts them.
    pub fn cancel_all(&self) {
        let mut state = self.lock();
        state.stopping = true;
        if let Some(active) = &state.active {
            active.cancel.cancel();
        }
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.lock().stopping
    }

    pub fn is_running(&self) -> bool {
        self.lock().active.is_some()
    }

    /// The active top-level run.
    pub(crate) fn active_run_id(&self) -> Option<String> {
        self.lock().active.as_ref().map(|a| a.run_id.clone())
    }

    /// Forgets the active goal and returns what `goal.pause`/`goal.cancel` asked of it.
    pub(crate) fn take_goal_request(&self) -> Option<GoalRequest> {
        self.lock().goal.take().and_then(|g| g.request)
    }

    /// Forgets the active run `run_id` (it ended without a successor).
    pub(crate) fn run_ended(&self, run_id: &str) {
        let mut state = self.lock();
        if state.active.as_ref().map(|a| a.run_id.as_str()) == Some(run_id) {
            state.active = None;
        }
    }

    pub(crate) fn register_permission(
        &self,
        request_id: &str,
    ) -> oneshot::Receiver<PermissionAnswer> {
        let (tx, rx) = oneshot::channel();
        self.lock().pending.insert(request_id.to_string(), tx);
        rx
    }

    pub(crate) fn forget_permission(&self, request_id: &str) {
        self.lock().pending.remove(request_id);
    }

    /// Answers a pending permission request; `sub` is the answering identity's subject,
    /// kept in the approvals audit.
    pub fn respond_permission(
        &self,
        request_id: &str,
        decision: Decision,
        reason: Option<String>,
        sub: Option<String>,
    ) -> Result<()> {
        let sender = self
            .lock()
            .pending
            .remove(request_id)
            .ok_or_else(|| Error::PermissionNotPending(request_id.to_string()))?;
        sender
            .send((decision, reason, sub))
            .map_err(|_| Error::PermissionNotPending(request_id.to_string()))
    }

    /// `delegate.retry`: wakes the `a2a_delegate` call `call_id` parked while its agent was
    /// unreachable and says where it stands after the retry (at most
    /// [`crate::delegate::RETRY_ANSWER_WAIT`]; the call goes on after that). A delegation
    /// that does not wait (any more) is answered from the journal: ended (e.g. closed when
    /// this backend restarted) or following its task; not found when the session has none.
    pub async fn retry_delegate(
        &self,
        call_id: &str,
    ) -> Result<lumina_protocol::methods::DelegateRetryResult> {
        let wake = self.lock().parked.remove(call_id);
        if let Some(wake) = wake {
            if let Some(verdict) = crate::delegate::wake(wake).await {
                return Ok(verdict);
            }
        }
        crate::delegate::history::unparked(&self.journal, call_id)
            .await?
            .ok_or_else(|| Error::DelegateNotParked(call_id.to_string()))
    }

    /// Usage added up over a run's steps.
    pub(crate) async fn run_usage(&self, run_id: &str) -> Usage {
        // The projection sums usage as events are applied: no journal re-read per run.
        self.journal
            .with_projection(|p| p.run_usage.get(run_id).copied().unwrap_or_default())
            .await
    }

    /// Pending permission requests (for a client that resumes).
    pub async fn pending_permissions(&self) -> Vec<EventFrame> {
        self.journal
            .with_projection(|p| p.pending_permissions())
            .await
    }

    /// Subscribes from `after_seq`: the backlog from the store, then live events, each seq
    /// exactly once and in order; live deltas are forwarded as they come. A subscriber that
    /// falls behind the live broadcast re-reads from the store. The task ends when the
    /// receiver is dropped.
    pub fn subscribe(&self, after_seq: u64) -> mpsc::Receiver<Outbound> {
        let (tx, rx) = mpsc::channel(256);
        let mut live = self.journal.subscribe();
        let journal = self.journal.clone();
        tokio::spawn(async move {
            let mut last = after_seq;
            if catch_up(&journal, &tx, &mut last).await.is_err() {
                return;
            }
            loop {
                match live.recv().await {
                    Ok(Outbound::Event(frame)) => {
                        if frame.seq <= last {
                            continue;
                        }
                        if frame.seq > last + 1 && catch_up(&journal, &tx, &mut last).await.is_err()
                        {
                            return;
                        }
                        if frame.seq == last + 1 {
                            last = frame.seq;
                            if tx.send(Outbound::Event(frame)).await.is_err() {
                                return;
                            }
                        }
                    }
                    Ok(delta @ Outbound::Delta(_)) => {
                        if tx.send(delta).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        if catch_up(&journal, &tx, &mut last).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        rx
    }
}

/// Sends every stored event after `last`, advancing it.
async fn catch_up(
    journal: &SessionJournal,
    tx: &mpsc::Sender<Outbound>,
    last: &mut u64,
) -> std::result::Result<(), ()> {
    loop {
        let page = match journal.read(*last, 500).await {
            Ok(page) => page,
            Err(err) => {
                tracing::warn!(session_id = %journal.session_id(), error = %err, "subscription backlog read failed");
                return Err(());
            }
        };
        if page.is_empty() {
            return Ok(());
        }
        for frame in page {
            *last = frame.seq;
            tx.send(Outbound::Event(Arc::new(frame)))
                .await
                .map_err(|_| ())?;
        }
    }
}
