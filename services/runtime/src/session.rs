//! A live session: its journal writer, the active run, pending permission requests, and
//! subscriptions that deliver every durable event exactly once, backlog first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use lumina_journal::CommandRecord;
use lumina_protocol::methods::{RunSummary, SessionInfo, SessionSubmitParams, SessionSubmitResult};
use lumina_protocol::{Decision, Event, EventFrame, Usage};
use lumina_skills::{InstructionFile, SkillCatalog};
use lumina_tools::ToolRegistry;
use serde_json::json;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::journal::{Outbound, SessionJournal};
use crate::run::{self, RunContext};
use crate::settings::{sanitize_overrides, RunSettings};
use crate::{Error, Result, Shared};

type PermissionAnswer = (Decision, Option<String>);

struct ActiveRun {
    run_id: String,
    cancel: CancellationToken,
}

#[derive(Default)]
struct State {
    active: Option<ActiveRun>,
    pending: HashMap<String, oneshot::Sender<PermissionAnswer>>,
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
    /// Set when a write was refused for an older fence or the session was evicted: this
    /// instance must not write it again.
    fenced: AtomicBool,
}

impl Session {
    pub(crate) fn new(journal: SessionJournal, project_root: PathBuf, shared: Arc<Shared>) -> Self {
        Self {
            journal: Arc::new(journal),
            project_root,
            shared,
            state: StdMutex::new(State::default()),
            fenced: AtomicBool::new(false),
        }
    }

    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    pub(crate) fn mark_fenced(&self) {
        self.fenced.store(true, Ordering::SeqCst);
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

    pub fn tools(&self) -> &ToolRegistry {
        &self.shared.tools
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

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
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
            "archived".into()
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
    ) -> Result<RunSettings, String> {
        RunSettings::load(
            &self.shared.app_root,
            &self.project_root,
            &self.shared.env,
            previous.overrides.clone(),
        )
    }

    /// Starts a run, or returns the run an earlier submit with the same key started.
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
        let overrides = sanitize_overrides(&params.settings).map_err(Error::InvalidParams)?;
        let settings = RunSettings::load(
            &self.shared.app_root,
            &self.project_root,
            &self.shared.env,
            overrides,
        )
        .map_err(Error::Settings)?;
        settings.check_model().map_err(Error::Settings)?;

        let run_id = uuid::Uuid::new_v4().to_string();
        let cancel = CancellationToken::new();
        {
            let mut state = self.lock();
            if state.active.is_some() {
                return Err(Error::Busy(self.id().to_string()));
            }
            state.active = Some(ActiveRun {
                run_id: run_id.clone(),
                cancel: cancel.clone(),
            });
        }
        let skill = lumina_skills::parse_invocation(&params.prompt).map(|(name, _)| name);
        let appended = self
            .journal
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
            .await;
        if let Err(err) = appended {
            self.lock().active = None;
            return match err {
                // A concurrent submit with the same key won the race.
                Error::Journal(lumina_journal::Error::DuplicateCommand(_)) => self
                    .existing_run(&params.idempotency_key)
                    .await?
                    .ok_or_else(|| Error::InvalidParams("duplicate idempotency key".into())),
                other => Err(other),
            };
        }
        let ctx = RunContext {
            session: self.clone(),
            run_id: run_id.clone(),
            settings,
            headless: params.headless,
            cancel,
        };
        let session = self.clone();
        let finished_run = run_id.clone();
        tokio::spawn(async move {
            run::execute(ctx).await;
            let mut state = session.lock();
            if state.active.as_ref().map(|a| a.run_id.as_str()) == Some(finished_run.as_str()) {
                state.active = None;
            }
        });
        Ok(SessionSubmitResult {
            run_id: run_id.clone(),
            created: true,
            run: RunSummary {
                run_id,
                status: "running".into(),
                result: None,
                error: None,
            },
        })
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
                status: "running".into(),
                result: None,
                error: None,
            });
        Ok(Some(SessionSubmitResult {
            run_id,
            created: false,
            run,
        }))
    }

    /// Interrupts the active run (or the named one). Returns false when nothing was running.
    pub fn interrupt(&self, run_id: Option<&str>) -> bool {
        let state = self.lock();
        match &state.active {
            Some(active) if run_id.is_none_or(|id| id == active.run_id) => {
                active.cancel.cancel();
                true
            }
            _ => false,
        }
    }

    /// Stops the active run because this instance is shutting down or lost the session.
    pub fn cancel_all(&self) {
        if let Some(active) = &self.lock().active {
            active.cancel.cancel();
        }
    }

    pub fn is_running(&self) -> bool {
        self.lock().active.is_some()
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

    /// Answers a pending permission request.
    pub fn respond_permission(
        &self,
        request_id: &str,
        decision: Decision,
        reason: Option<String>,
    ) -> Result<()> {
        let sender = self
            .lock()
            .pending
            .remove(request_id)
            .ok_or_else(|| Error::PermissionNotPending(request_id.to_string()))?;
        sender
            .send((decision, reason))
            .map_err(|_| Error::PermissionNotPending(request_id.to_string()))
    }

    /// Usage added up over a run's steps.
    pub(crate) async fn run_usage(&self, run_id: &str) -> Usage {
        let events = self.journal.read(0, usize::MAX).await.unwrap_or_default();
        let mut total = Usage::default();
        for frame in &events {
            if let Event::UsageRecorded {
                run_id: r, usage, ..
            } = &frame.event
            {
                if r == run_id {
                    total.add(usage);
                }
            }
        }
        total
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
