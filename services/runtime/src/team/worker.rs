//! The worker side of a distributed member task ([`super::distributed`]): an instance that
//! does not own the session opens it as a guest writer under the owner's fence, claims the
//! task (`team.task_started`, only while the member's stream is as the owner left it), runs
//! the member's turns with the member's own prompt, tools, model and history, and journals
//! the run's terminal event, from which the owner collects the result.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex as StdMutex};

use lumina_journal::ExpectedVersion;
use lumina_protocol::{team_member_stream, RunFailureCode, TaskStatus};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::distributed::{started_event, MemberJob};
use super::member::{member_settings, member_tools, run_member, terminal};
use super::{active_team, load_definition, Role, TeamScope, TeamShared};
use crate::journal::{Alive, GuestWriter, SessionJournal};
use crate::run::{Outcome, RunContext};
use crate::session::Session;
use crate::subagent::AgentScope;
use crate::{Error, Result, Runtime};

/// How a member task ended on this instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberRun {
    /// Its terminal event is journaled with this status.
    Ended(TaskStatus),
    /// Its writes were refused (the owner changed, closed the task, or this instance's
    /// liveness lapsed): it stopped without an end of its own.
    Stopped,
}

/// A member task this instance claimed and has not run yet.
pub struct ClaimedMember {
    member: RunContext,
    /// Why the member cannot run (its settings), journaled as its failure.
    unusable: Option<String>,
}

impl Runtime {
    /// Claims `job` for this instance (`instance_id`) as a guest writer of its session:
    /// fails with [`Error::Fenced`] when the task was started or closed by somebody else,
    /// with [`Error::TeamConflict`] when the session's team no longer runs it. `alive` says
    /// whether this instance may still write (its registry liveness); `cancel` stops the
    /// member's turns.
    pub async fn claim_member_task(
        &self,
        job: &MemberJob,
        instance_id: &str,
        alive: Alive,
        cancel: CancellationToken,
    ) -> Result<ClaimedMember> {
        let key = self.key(&job.session_id);
        let record = self
            .store
            .session(&key.tenant, &job.session_id)
            .await?
            .ok_or_else(|| Error::SessionNotFound(job.session_id.clone()))?;
        let stream = team_member_stream(&job.team_run_id, &job.agent);
        let memory = self.shared.memory_sink(&record.project_root);
        let journal = SessionJournal::open(self.store.clone(), key, job.fence)
            .await?
            .with_memory(memory)
            .with_guest(GuestWriter {
                stream: stream.clone(),
                version: AtomicU64::new(job.opening_version),
                alive,
            });
        let session = Arc::new(Session::new(
            journal,
            PathBuf::from(&record.project_root),
            self.shared.clone(),
        ));
        let team = active_team(&session)
            .await
            .filter(|t| t.team_run_id == job.team_run_id)
            .ok_or_else(|| {
                Error::TeamConflict("the session is no longer in that team run".into())
            })?;
        let task = team
            .task(&job.task_id)
            .filter(|t| t.agent == job.agent && t.status.is_none())
            .cloned()
            .ok_or_else(|| Error::TeamConflict(format!("task {} is not running", job.task_id)))?;
        let definition = load_definition(&session, &team.team)
            .map_err(|e| Error::TeamConflict(e.to_string()))?;
        session
            .journal()
            .append_guarded(
                &stream,
                vec![started_event(
                    &job.team_run_id,
                    &job.task_id,
                    &job.agent,
                    instance_id,
                )],
                Vec::new(),
                ExpectedVersion::Exact(job.opening_version),
            )
            .await?;
        if let Some(observer) = &self.observer {
            observer.opened(&session);
        }
        let permits = definition.loop_config.max_parallel_agents.max(1) as usize;
        let scope = TeamScope {
            team_run_id: job.team_run_id.clone(),
            definition: Arc::new(definition),
            role: Role::Leader,
            shared: Arc::new(TeamShared {
                parallel: Semaphore::new(permits),
                completed: StdMutex::new(None),
                mailbox: tokio::sync::Mutex::new(()),
                follow_ups: tokio::sync::Mutex::new(()),
            }),
        };
        let (leader_settings, mut unusable) = match session.reload_with(job.overrides.clone()) {
            Ok(settings) => (Some(settings), None),
            Err(err) => (None, Some(err.to_string())),
        };
        let settings = match leader_settings {
            Some(leader) => match member_settings(&session, &leader, &scope, &job.agent) {
                Ok(own) => own,
                Err(problem) => {
                    unusable = Some(problem.to_string());
                    leader
                }
            },
            None => {
                // The owner's settings load on the owner; here they do not (a different
                // configuration): the task fails with the reason.
                let plain = session.reload_with(Default::default());
                match plain {
                    Ok(settings) => settings,
                    Err(err) => return Err(Error::Settings(err)),
                }
            }
        };
        let leader = RunContext::top_level(
            session.clone(),
            String::new(),
            String::new(),
            settings.clone(),
            true,
            cancel.clone(),
        );
        let leader = RunContext {
            team: Some(Arc::new(scope.clone())),
            ..leader
        };
        // The MCP tools as the owner would list them for the member (connecting here).
        crate::mcp::refresh_tools(&leader).await?;
        let tools = member_tools(&leader, &job.agent, &scope);
        let member = RunContext {
            session,
            run_id: job.task_id.clone(),
            prompt: task.task.clone(),
            settings,
            // Nobody can answer a permission request here: it is denied with the reason
            // (docs/teams.md#distributed-members).
            headless: true,
            cancel,
            stream,
            agent: AgentScope {
                depth: 1,
                tree: Arc::new(Default::default()),
                tools: Some(tools),
                description: None,
            },
            goal: None,
            team: Some(Arc::new(scope.member(&job.agent, &job.task_id))),
        };
        Ok(ClaimedMember { member, unusable })
    }
}

impl ClaimedMember {
    /// Runs the claimed task's turns and journals its end.
    pub async fn run(self) -> Result<MemberRun> {
        let ClaimedMember { member, unusable } = self;
        let outcome = match unusable {
            Some(message) => Outcome::Failed {
                code: RunFailureCode::Settings,
                message,
            },
            None => match run_member(&member).await {
                Ok(outcome) => outcome,
                Err(Error::Fenced) => return Ok(MemberRun::Stopped),
                Err(err) => return Err(err),
            },
        };
        let usage = member.session.run_usage(&member.run_id).await;
        let (event, status, _) = terminal(&member.run_id, outcome, usage);
        match member.append(vec![event]).await {
            Ok(_) => Ok(MemberRun::Ended(status)),
            Err(Error::Fenced) => Ok(MemberRun::Stopped),
            Err(err) => Err(err),
        }
    }
}
