//! Rebuildable projections of a session journal: status, last run, usage totals, task list,
//! session-scoped approvals, goals, and what recovery must close. One reducer, fed every
//! event in seq order, both when a session is opened (replay) and as events are appended
//! (live).
//!
//! Sub-agent runs live on child streams (`agent/<id>`): their runs, steps, tools and
//! permission requests are tracked as open work (so recovery closes them on their stream)
//! and their usage counts, but they are not the session's runs (`runs`, `last_run`), title,
//! task list or steering.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use lumina_protocol::methods::{RunSummary, SessionInfo};
use lumina_protocol::{
    Decision, Event, EventFrame, RunStatus, SessionStatus, TodoItem, Usage, MAIN_STREAM,
};
use serde::{Deserialize, Serialize};

/// What the summary row (and `meta.json`) holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub title: String,
    pub status: SessionStatus,
    pub head_seq: u64,
    pub last_run: Option<RunSummary>,
    pub usage: Usage,
    pub todos: Vec<TodoItem>,
}

/// A run that started (or was queued) and has not ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenRun {
    /// The stream its events go to (`main`, or a sub-agent's `agent/<id>`).
    pub stream: String,
    pub open_steps: Vec<u32>,
    /// call_id → tool name.
    pub open_tools: BTreeMap<String, String>,
    /// request_id → pending permission event.
    pub open_permissions: BTreeMap<String, EventFrame>,
}

/// A follow-up waiting for the runs before it (`run.queued` without `run.started` yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedRun {
    pub run_id: String,
    pub idempotency_key: String,
    pub prompt: String,
    pub mode: String,
    pub headless: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Projection {
    pub title: String,
    pub archived: bool,
    pub head_seq: u64,
    pub usage: Usage,
    /// Usage per run (top-level and child runs), summed over its steps.
    pub run_usage: HashMap<String, Usage>,
    pub todos: Vec<TodoItem>,
    /// Every run's latest state, by id.
    pub runs: HashMap<String, RunSummary>,
    pub last_run: Option<String>,
    pub open_runs: BTreeMap<String, OpenRun>,
    /// Follow-ups in the order they start. Not open runs: recovery has nothing to close for
    /// them, it starts them.
    pub queued: Vec<QueuedRun>,
    /// Seqs of `message.steering` events no model request has included yet.
    pub undelivered_steering: BTreeSet<u64>,
    /// (tool, args_hash) pairs approved for the session.
    pub session_grants: HashSet<(String, String)>,
    /// Sub-agents started and not ended: child_id → depth.
    pub open_agents: BTreeMap<String, u32>,
    /// Every goal of the session, in start order.
    pub goals: Vec<crate::goal::GoalRecord>,
    /// Every team run of the session, in entry order (`crate::team::state`).
    pub teams: Vec<crate::team::TeamRecord>,
    /// request_id → (tool, args_hash), to bind `allow_session` decisions.
    requested: HashMap<String, (String, String)>,
}

impl Projection {
    pub fn apply(&mut self, frame: &EventFrame) {
        if frame.seq <= self.head_seq {
            return;
        }
        self.head_seq = frame.seq;
        let main = frame.stream == MAIN_STREAM;
        match &frame.event {
            Event::SessionCreated { title, .. } => self.title = title.clone(),
            Event::SessionArchived {} => self.archived = true,
            Event::RunQueued {
                run_id,
                idempotency_key,
                prompt,
                mode,
                headless,
            } => {
                // Not `last_run`: that is the latest run that started.
                self.runs.insert(
                    run_id.clone(),
                    RunSummary {
                        run_id: run_id.clone(),
                        status: RunStatus::Queued,
                        result: None,
                        error: None,
                    },
                );
                self.queued.push(QueuedRun {
                    run_id: run_id.clone(),
                    idempotency_key: idempotency_key.clone(),
                    prompt: prompt.clone(),
                    mode: mode.clone(),
                    headless: *headless,
                });
            }
            Event::MessageSteering { .. } => {
                self.undelivered_steering.insert(frame.seq);
            }
            // A sub-agent's context is its own stream: it delivers no steering.
            Event::ModelRequested { .. } if !main => {}
            Event::ModelRequested { through_seq, .. } => {
                if *through_seq == 0 {
                    self.undelivered_steering.clear();
                } else {
                    self.undelivered_steering.retain(|seq| seq > through_seq);
                }
            }
            Event::RunStarted { run_id, .. } => {
                if main {
                    self.queued.retain(|q| q.run_id != *run_id);
                    self.set_run(run_id, RunStatus::Running, None, None);
                }
                self.open_runs
                    .entry(run_id.clone())
                    .or_insert_with(|| OpenRun {
                        stream: frame.stream.clone(),
                        ..OpenRun::default()
                    });
            }
            Event::MessageUser { text, .. } => {
                if main && self.title.is_empty() {
                    self.title = title_from_prompt(text);
                }
            }
            Event::StepStarted { run_id, step } => {
                if let Some(run) = self.open_runs.get_mut(run_id) {
                    run.open_steps.push(*step);
                }
            }
            Event::StepCompleted { run_id, step, .. }
            | Event::StepInterrupted { run_id, step, .. } => {
                if let Some(run) = self.open_runs.get_mut(run_id) {
                    run.open_steps.retain(|s| s != step);
                }
            }
            Event::ToolStarted {
                run_id,
                call_id,
                tool,
                ..
            } => {
                if let Some(run) = self.open_runs.get_mut(run_id) {
                    run.open_tools.insert(call_id.clone(), tool.clone());
                }
            }
            Event::ToolCompleted {
                run_id, call_id, ..
            }
            | Event::ToolInterrupted {
                run_id, call_id, ..
            } => {
                if let Some(run) = self.open_runs.get_mut(run_id) {
                    run.open_tools.remove(call_id);
                }
            }
            Event::PermissionRequested {
                run_id,
                request_id,
                tool,
                args_hash,
                ..
            } => {
                self.requested
                    .insert(request_id.clone(), (tool.clone(), args_hash.clone()));
                if let Some(run) = self.open_runs.get_mut(run_id) {
                    run.open_permissions
                        .insert(request_id.clone(), frame.clone());
                }
            }
            Event::PermissionResolved {
                run_id,
                request_id,
                decision,
                ..
            } => {
                if *decision == Decision::AllowSession {
                    if let Some(grant) = self.requested.get(request_id) {
                        self.session_grants.insert(grant.clone());
                    }
                }
                if let Some(run) = self.open_runs.get_mut(run_id) {
                    run.open_permissions.remove(request_id);
                }
            }
            Event::TaskUpdated { todos } => {
                if main {
                    self.todos = todos.clone();
                }
            }
            Event::UsageRecorded { run_id, usage, .. } => {
                self.usage.add(usage);
                self.run_usage.entry(run_id.clone()).or_default().add(usage);
            }
            Event::RunCompleted { run_id, result, .. } => {
                if main {
                    self.set_run(run_id, RunStatus::Completed, Some(result.clone()), None);
                }
                self.open_runs.remove(run_id);
            }
            Event::RunFailed {
                run_id,
                code,
                message,
            } => {
                if main {
                    let error = Some(format!("{code}: {message}"));
                    self.set_run(run_id, RunStatus::Failed, None, error);
                }
                self.open_runs.remove(run_id);
            }
            Event::RunInterrupted { run_id, reason } => {
                if main {
                    // A queued run cancelled before it started ends here too.
                    self.queued.retain(|q| q.run_id != *run_id);
                    self.set_run(run_id, RunStatus::Interrupted, None, Some(reason.clone()));
                }
                self.open_runs.remove(run_id);
            }
            Event::AgentStarted {
                child_id, depth, ..
            } => {
                self.open_agents.insert(child_id.clone(), *depth);
            }
            Event::AgentCompleted { child_id, .. } | Event::AgentInterrupted { child_id, .. } => {
                self.open_agents.remove(child_id);
            }
            Event::GoalStarted { .. } | Event::GoalUpdated { .. } | Event::GoalCompleted { .. } => {
                crate::goal::apply(&mut self.goals, &frame.event)
            }
            Event::TeamEntered(_)
            | Event::TeamExited(_)
            | Event::TeamContractWritten(_)
            | Event::TeamRoundStarted(_)
            | Event::TeamRoundEnded(_)
            | Event::TeamTaskDispatched(_)
            | Event::TeamTaskEnded(_)
            | Event::TeamMessageSent(_)
            | Event::TeamMessagesDelivered(_)
            | Event::TeamGateChecked(_)
            | Event::TeamCompleted(_)
            | Event::TeamFollowUpOpened(_)
            | Event::TeamFollowUpResolved(_) => {
                crate::team::state::apply(&mut self.teams, &frame.event)
            }
            Event::MessageAssistant { .. }
            | Event::ModelResponded { .. }
            | Event::HookCompleted { .. }
            | Event::Warning { .. }
            | Event::Checkpoint { .. }
            | Event::MemoryRecalled { .. }
            | Event::DelegateUpdated { .. }
            | Event::McpSignInRequired { .. }
            | Event::McpSignInEnded { .. }
            | Event::TeamMemberThinking(_)
            | Event::TeamTaskStarted(_)
            | Event::Unknown => {}
        }
    }

    fn set_run(
        &mut self,
        run_id: &str,
        status: RunStatus,
        result: Option<String>,
        error: Option<String>,
    ) {
        self.runs.insert(
            run_id.to_string(),
            RunSummary {
                run_id: run_id.to_string(),
                status,
                result,
                error,
            },
        );
        self.last_run = Some(run_id.to_string());
    }

    pub fn status(&self) -> SessionStatus {
        if self.archived {
            SessionStatus::Archived
        } else if self.open_runs.is_empty() && self.queued.is_empty() {
            SessionStatus::Idle
        } else {
            SessionStatus::Running
        }
    }

    pub fn summary(&self) -> Summary {
        Summary {
            title: self.title.clone(),
            status: self.status(),
            head_seq: self.head_seq,
            last_run: self
                .last_run
                .as_ref()
                .and_then(|id| self.runs.get(id).cloned()),
            usage: self.usage,
            todos: self.todos.clone(),
        }
    }

    /// The goal that has not ended (running, awaiting approval or paused), if any.
    pub fn unfinished_goal(&self) -> Option<&crate::goal::GoalRecord> {
        self.goals
            .iter()
            .rev()
            .find(|g| !g.summary.state.is_terminal())
    }

    /// A goal by id, or the unfinished one.
    pub fn goal(&self, goal_id: Option<&str>) -> Option<&crate::goal::GoalRecord> {
        match goal_id {
            Some(id) => self.goals.iter().find(|g| g.summary.goal_id == id),
            None => self.unfinished_goal(),
        }
    }

    /// Permission requests still waiting for an answer, oldest first.
    pub fn pending_permissions(&self) -> Vec<EventFrame> {
        let mut frames: Vec<EventFrame> = self
            .open_runs
            .values()
            .flat_map(|run| run.open_permissions.values().cloned())
            .collect();
        frames.sort_by_key(|f| f.seq);
        frames
    }
}

/// A session title from the first prompt: the first line, at most 60 characters.
pub fn title_from_prompt(prompt: &str) -> String {
    let line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut title: String = line.trim().chars().take(60).collect();
    if line.trim().chars().count() > 60 {
        title.push('…');
    }
    title
}

/// Builds the protocol's session info from a stored record and its summary JSON.
pub fn session_info(record: &lumina_journal::SessionRecord) -> SessionInfo {
    let summary: Summary = serde_json::from_value(record.summary.clone()).unwrap_or_default();
    SessionInfo {
        id: record.session_id.clone(),
        title: if summary.title.is_empty() {
            record.title.clone()
        } else {
            summary.title
        },
        project_root: record.project_root.clone(),
        created_at_ms: record.created_at_ms,
        updated_at_ms: record.updated_at_ms,
        status: match summary.status {
            _ if record.archived => SessionStatus::Archived,
            // No status recorded: read as idle.
            SessionStatus::Other(name) if name.is_empty() => SessionStatus::Idle,
            status => status,
        },
        head_seq: summary.head_seq,
        last_run: summary.last_run,
        usage: summary.usage,
    }
}
