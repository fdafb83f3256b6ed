//! Entering and leaving a team (`team.enter`, `team.exit`), listing and creating teams
//! (`team.list`, `team.create`), and what happens to a team after a restart: recovery
//! closes the tasks that were running (`team.task_ended{status: interrupted}`), and a
//! round that was open resumes in a new leader run that dispatches each interrupted task
//! once more (`retry_of`), keeps every completed one, ends the round and tells the leader
//! what happened before its model is asked again.

use std::path::Path;
use std::sync::Arc;

use futures::future::join_all;
use lumina_config::AppRoot;
use lumina_protocol::methods::{
    TeamCreateResult, TeamEnterResult, TeamExitResult, TeamInfo, TeamListResult,
};
use lumina_protocol::team::{TeamEntered, TeamExited, TeamTaskEnded};
use lumina_protocol::{team_board_stream, Event, TaskStatus};
use tokio_util::sync::CancellationToken;

use super::member::{result_text, run_task};
use super::tools::{end_round, DispatchPlan};
use super::{active_team, load_definition};
use crate::journal::SessionJournal;
use crate::run::RunContext;
use crate::session::{ActiveRun, Session};
use crate::{Error, Result};

const RESTART_REASON: &str = "the backend stopped before the task ended";

/// Maps a team-definition error to the runtime's (unknown team → `not_found`).
fn team_error(err: lumina_team::Error) -> Error {
    match err {
        lumina_team::Error::NotFound { .. } => Error::TeamNotFound(err.to_string()),
        lumina_team::Error::Io { .. } => Error::Unavailable(err.to_string()),
        other => Error::InvalidParams(other.to_string()),
    }
}

/// Writes the built-in teams under the AppRoot (at start-up; idempotent). A failure is
/// logged: the built-in teams are then missing from `team.list`, nothing else breaks.
pub fn install_builtin_teams(app_root: &AppRoot) {
    match lumina_team::install_builtins(app_root) {
        Ok(report) => {
            tracing::debug!(
                installed = report.installed.len(),
                unchanged = report.unchanged.len(),
                "built-in teams ready"
            )
        }
        Err(err) => tracing::warn!(error = %err, "built-in teams could not be installed"),
    }
}

/// `team.list`: the teams of the user and the built-in ones, and the project's when a
/// project root is given.
pub fn list_teams(app_root: &AppRoot, project_root: Option<&Path>) -> TeamListResult {
    let catalog = lumina_team::TeamLocations::new(app_root, project_root).list();
    for problem in &catalog.errors {
        tracing::warn!(problem = %problem, "a team folder could not be listed");
    }
    TeamListResult {
        teams: catalog
            .teams
            .into_iter()
            .map(|t| TeamInfo {
                name: t.name,
                display_name: t.display_name,
                source: t.source.as_str().to_string(),
                error: t.error,
            })
            .collect(),
    }
}

/// `team.create`: a new user team from the `/NewTeam` template.
pub fn create_team(app_root: &AppRoot, name: &str, display_name: &str) -> Result<TeamCreateResult> {
    match lumina_team::create_team(app_root, name, display_name) {
        Ok(path) => Ok(TeamCreateResult {
            name: name.to_string(),
            path: path.display().to_string(),
        }),
        Err(err @ lumina_team::Error::AlreadyExists { .. }) => {
            Err(Error::TeamConflict(err.to_string()))
        }
        Err(err) => Err(team_error(err)),
    }
}

impl Session {
    /// `team.enter`: from now on the session's runs are the team leader's. Entering the
    /// team the session is in already returns it (`created: false`).
    pub async fn team_enter(&self, team: &str) -> Result<TeamEnterResult> {
        self.check_team_writable().await?;
        let definition = load_definition(self, team).map_err(team_error)?;
        let _turn = self.dispatch().lock().await;
        if let Some(current) = active_team(self).await {
            if current.team == definition.name {
                return Ok(TeamEnterResult {
                    team_run_id: current.team_run_id,
                    team: current.team,
                    display_name: current.display_name,
                    entry_agent: current.entry_agent,
                    members: current.members,
                    created: false,
                });
            }
            return Err(Error::TeamConflict(format!(
                "the session is in the team `{}`; leave it first (team.exit)",
                current.team
            )));
        }
        self.check_team_idle().await?;
        let mut members = vec![definition.entry_agent.clone()];
        members.extend(
            definition
                .members
                .iter()
                .filter(|m| m.name != definition.entry_agent)
                .map(|m| m.name.clone()),
        );
        let entered = TeamEntered {
            team_run_id: uuid::Uuid::new_v4().to_string(),
            team: definition.name.clone(),
            display_name: definition.display_name.clone(),
            entry_agent: definition.entry_agent.clone(),
            members: members.clone(),
            show_member_dialogue: definition.transcript.show_member_dialogue,
            show_tool_details: definition.transcript.show_tool_details,
            show_thinking: definition.transcript.show_thinking,
        };
        self.journal()
            .append(vec![Event::TeamEntered(entered.clone())])
            .await?;
        tracing::info!(session_id = %self.id(), team = %entered.team, team_run_id = %entered.team_run_id, "session entered a team");
        Ok(TeamEnterResult {
            team_run_id: entered.team_run_id,
            team: entered.team,
            display_name: entered.display_name,
            entry_agent: entered.entry_agent,
            members,
            created: true,
        })
    }

    /// `team.exit`: the session works as a single agent again (idle sessions only).
    pub async fn team_exit(&self) -> Result<TeamExitResult> {
        self.check_team_writable().await?;
        let _turn = self.dispatch().lock().await;
        let Some(current) = active_team(self).await else {
            return Ok(TeamExitResult { team_run_id: None });
        };
        self.check_team_idle().await?;
        self.journal()
            .append(vec![Event::TeamExited(TeamExited {
                team_run_id: current.team_run_id.clone(),
            })])
            .await?;
        Ok(TeamExitResult {
            team_run_id: Some(current.team_run_id),
        })
    }

    /// After recovery: a team round that was open when the backend stopped resumes in a
    /// new leader run (see the module docs).
    pub(crate) async fn resume_team(self: &Arc<Self>) {
        let _turn = self.dispatch().lock().await;
        if self.lock().active.is_some() || self.is_fenced() {
            return;
        }
        let Some(record) = active_team(self).await else {
            return;
        };
        if !record.round_open {
            return;
        }
        let settings = match self.reload_with(Default::default()) {
            Ok(settings) if settings.check_model().is_ok() => settings,
            _ => {
                tracing::warn!(session_id = %self.id(), "team round not resumed: no usable model settings");
                return;
            }
        };
        let run_id = uuid::Uuid::new_v4().to_string();
        let started = self
            .journal()
            .append(vec![Event::RunStarted {
                run_id: run_id.clone(),
                idempotency_key: format!(
                    "team:{}:round:{}:resume",
                    record.team_run_id, record.round
                ),
                model: settings.model_name(),
            }])
            .await;
        if let Err(err) = started {
            tracing::error!(session_id = %self.id(), error = %err, "could not resume the team round");
            return;
        }
        tracing::info!(session_id = %self.id(), team_run_id = %record.team_run_id, round = record.round, "resuming team round");
        let cancel = CancellationToken::new();
        self.lock().active = Some(ActiveRun {
            run_id: run_id.clone(),
            cancel: cancel.clone(),
        });
        self.spawn_runs(RunContext::top_level(
            self.clone(),
            run_id,
            String::new(),
            settings,
            false,
            cancel,
        ));
    }

    async fn check_team_writable(&self) -> Result<()> {
        if self.is_fenced() {
            return Err(Error::Fenced);
        }
        if self.journal().with_projection(|p| p.archived).await {
            return Err(Error::Archived(self.id().to_string()));
        }
        Ok(())
    }

    async fn check_team_idle(&self) -> Result<()> {
        let queued = self
            .journal()
            .with_projection(|p| !p.queued.is_empty())
            .await;
        if self.lock().active.is_some() || queued {
            return Err(Error::Busy(self.id().to_string()));
        }
        Ok(())
    }
}

/// Recovery: every task of an active team that was running gets its explicit end.
pub(crate) async fn close_running_tasks(journal: &SessionJournal) -> Result<usize> {
    let teams: Vec<_> = journal
        .with_projection(|p| p.teams.iter().filter(|t| t.active).cloned().collect())
        .await;
    let mut closed = 0;
    for team in teams {
        let events: Vec<Event> = team
            .running_tasks()
            .into_iter()
            .map(|task| {
                Event::TeamTaskEnded(TeamTaskEnded {
                    team_run_id: team.team_run_id.clone(),
                    task_id: task.task_id.clone(),
                    agent: task.agent.clone(),
                    status: TaskStatus::Interrupted,
                    summary: RESTART_REASON.into(),
                })
            })
            .collect();
        if events.is_empty() {
            continue;
        }
        closed += events.len();
        journal
            .append_to(&team_board_stream(&team.team_run_id), events)
            .await?;
    }
    Ok(closed)
}

/// At the start of a leader run: when the team's round is still open (the backend stopped
/// in it), dispatch its interrupted tasks once more, end the round and tell the leader.
pub(crate) async fn resume_round(ctx: &RunContext) -> Result<()> {
    let Some(team) = ctx.team.as_deref().filter(|t| t.is_leader()) else {
        return Ok(());
    };
    let Some(record) = active_team(&ctx.session).await else {
        return Ok(());
    };
    if !record.round_open {
        return Ok(());
    }
    let round = record.round;
    // A retry that was interrupted too is not dispatched a third time: it counts as failed.
    let again: Vec<_> = record
        .interrupted_in_open_round()
        .into_iter()
        .filter(|t| t.retry_of.is_none())
        .cloned()
        .collect();
    let settings = ctx.settings.clone();
    let runs = again.iter().map(|task| {
        run_task(
            ctx,
            &settings,
            team,
            "",
            DispatchPlan {
                round,
                agent: task.agent.clone(),
                task: task.task.clone(),
                criteria: task.criteria.clone(),
            },
            Some(task.task_id.clone()),
        )
    });
    for result in join_all(runs).await {
        // Errors are the journal's (a lost fence): nothing more may be written.
        result?;
    }
    if ctx.cancel.is_cancelled() && ctx.session.is_stopping() {
        return Ok(());
    }
    end_round(ctx, &record.team_run_id, round).await?;
    let record = active_team(&ctx.session).await.unwrap_or(record);
    let mut text = format!(
        "[The backend restarted during round {round} of the team. Work that had completed was \
         kept; interrupted work was dispatched once more ({}).]\n",
        if again.is_empty() {
            "none was interrupted".to_string()
        } else {
            again
                .iter()
                .map(|t| format!("`{}`", t.agent))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let finals = record.tasks.iter().filter(|t| {
        t.round == round
            && !record
                .tasks
                .iter()
                .any(|r| r.retry_of.as_deref() == Some(&t.task_id))
    });
    for task in finals {
        let status = task.status.unwrap_or(TaskStatus::Interrupted);
        text.push_str(&format!(
            "\n{}\n",
            result_text(&record, &task.agent, &task.task_id, status, &task.summary)
        ));
    }
    ctx.append(vec![Event::MessageUser {
        run_id: ctx.run_id.clone(),
        text,
        skill: None,
    }])
    .await?;
    Ok(())
}
