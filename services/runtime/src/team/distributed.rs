//! Distributed members (`team_distributed`, cluster profile; docs/teams.md#distributed-members):
//! a member task runs on another live instance instead of the session's owner.
//!
//! The owner journals the task's opening on the member's stream (`run.started`, the mail,
//! `message.user`) as always, then asks an instance picked by the [`MemberPlacement`] to run
//! it ([`MemberJob`]). That instance opens the session as a *guest* writer
//! ([`crate::journal::GuestWriter`]: the owner's fence, and the member stream's version) and
//! claims the task with `team.task_started` — appended only while the member's stream is
//! exactly as the owner left it, so exactly one instance ever runs a task (when the RPC
//! fails the owner claims it the same way and runs it here). The worker runs the member's
//! turns with the member's own history (its stream) and journals the task's terminal event
//! (`run.completed` / `run.failed` / `run.interrupted`) there: the owner collects the result
//! from the journal, never from the RPC reply, so a lost reply loses nothing.
//!
//! While it waits the owner watches the worker's registry entry (its incarnation). When the
//! entry lapses before the terminal event, the owner closes what the member left open on its
//! stream (which also moves the stream's version, so a worker that wakes up can append
//! nothing more there) and ends the run interrupted; `member.rs` then dispatches the task once
//! more (`retry_of`), on another instance or here. The member's completed tool calls are in
//! its stream, so the retry's model sees their results and does not call them again.

use std::sync::Arc;
use std::time::Duration;

use lumina_journal::ExpectedVersion;
use lumina_protocol::team::TeamTaskStarted;
use lumina_protocol::{Event, TaskStatus};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::projection::OpenRun;
use crate::run::RunContext;
use crate::{Error, Result};

/// How often the owner looks for the worker's progress and checks that it lives.
const POLL: Duration = Duration::from_millis(200);

/// How long the owner waits for a worker to journal the end of a task it was told to stop.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// Why an interrupted task's run ended when its instance died.
pub(crate) const LOST_REASON: &str =
    "the instance running the member stopped before the task ended";

/// A member task sent to another instance.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberJob {
    pub session_id: String,
    pub team_run_id: String,
    pub agent: String,
    pub task_id: String,
    /// The session's fence: every write of the worker carries it.
    pub fence: u64,
    /// The member stream's version after the task's opening (`message.user`).
    pub opening_version: u64,
    /// The leader run's setting overrides (model, permission mode …) the member starts from.
    #[serde(default)]
    pub overrides: Map<String, Value>,
    /// The instance that owns the session (the worker stops when it is gone).
    pub owner: String,
}

/// Why a member task could not be started elsewhere.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PlacementError(pub String);

/// Where member tasks run: implemented by the cluster over its registry and Streams RPC.
#[async_trait::async_trait]
pub trait MemberPlacement: Send + Sync + 'static {
    /// This instance's id (recorded when the task runs here).
    fn instance_id(&self) -> &str;

    /// A live instance other than this one to run a task on, not in `avoid`; `None` runs
    /// it here.
    async fn pick(&self, avoid: &[String]) -> Option<String>;

    /// Asks `instance` to run `job`. `Ok` means it claimed the task; returns the
    /// incarnation it runs under when known.
    async fn start(
        &self,
        instance: &str,
        tenant: &str,
        job: &MemberJob,
    ) -> std::result::Result<Option<String>, PlacementError>;

    /// Whether `instance` (under `incarnation`, when known) still lives. Unknown (the
    /// registry cannot be read) counts as alive.
    async fn alive(&self, instance: &str, incarnation: Option<&str>) -> bool;

    /// Asks `instance` to stop the task (best effort: the owner closes it anyway).
    async fn cancel(&self, instance: &str, tenant: &str, session_id: &str, task_id: &str);

    /// Whether `instance` still runs the task; `None` when it cannot be asked. A worker
    /// whose run ended without an end in the journal (its store writes failed) says no.
    async fn running(
        &self,
        instance: &str,
        tenant: &str,
        session_id: &str,
        task_id: &str,
    ) -> Option<bool>;
}

/// How many polls between two `running` questions to the worker.
const ASK_EVERY: u32 = 10;

/// How a distributed task went.
pub(super) enum Placed {
    /// This instance claimed it: run it here.
    Here,
    /// Its terminal event is journaled (by the worker, or by the owner for a lost worker).
    Ended {
        status: TaskStatus,
        summary: String,
        /// The worker died or stopped before the task ended: dispatch it once more.
        lost: bool,
    },
}

/// Runs the member task of `member` (its opening journaled, the stream at
/// `opening_version`) on another instance when one is live; see the module docs.
pub(super) async fn run(
    member: &RunContext,
    placement: &Arc<dyn MemberPlacement>,
    agent: &str,
    opening_version: u64,
    leader_overrides: &Map<String, Value>,
) -> Result<Placed> {
    let journal = member.session.journal().clone();
    let team = member
        .team
        .as_ref()
        .ok_or_else(|| Error::Unavailable("a member task without a team".into()))?;
    let Some(instance) = placement.pick(&[]).await else {
        return claim_here(member, placement, agent, opening_version).await;
    };
    let job = MemberJob {
        session_id: member.session.id().to_string(),
        team_run_id: team.team_run_id.clone(),
        agent: agent.to_string(),
        task_id: member.run_id.clone(),
        fence: journal.fence(),
        opening_version,
        overrides: leader_overrides.clone(),
        owner: placement.instance_id().to_string(),
    };
    let _external = journal.external_writer();
    let tenant = journal.key().tenant.clone();
    let incarnation = match placement.start(&instance, &tenant, &job).await {
        Ok(incarnation) => incarnation,
        Err(err) => {
            // The reply may be lost while the task was claimed there: the journal says.
            tracing::info!(session_id = %job.session_id, task_id = %job.task_id, instance_id = %instance, error = %err, "member task not started elsewhere");
            None
        }
    };
    let mut watch = Watch::new(member, opening_version);
    watch.read().await?;
    let started = match watch.started_by.clone() {
        Some(started) => Some(started),
        None => match claim_here(member, placement, agent, opening_version).await {
            Ok(placed) => return Ok(placed),
            // Claimed there after all (its reply still on the way).
            Err(Error::Journal(lumina_journal::Error::Conflict { .. })) => {
                watch.read().await?;
                watch.started_by.clone()
            }
            Err(err) => return Err(err),
        },
    };
    let Some(worker) = started else {
        return Err(Error::Unavailable(
            "the member task's stream moved but nobody started it".into(),
        ));
    };
    if worker == placement.instance_id() {
        // Not reachable (this instance claims through `claim_here`), but harmless.
        return Ok(Placed::Here);
    }
    let incarnation = if worker == instance {
        incarnation
    } else {
        None
    };
    tracing::info!(session_id = %job.session_id, task_id = %job.task_id, agent, instance_id = %worker, "member task runs on another instance");
    watch
        .until_end(placement, &worker, incarnation.as_deref(), &tenant)
        .await
}

/// Claims the task for this instance (`team.task_started` while the stream is still at
/// `opening_version`).
async fn claim_here(
    member: &RunContext,
    placement: &Arc<dyn MemberPlacement>,
    agent: &str,
    opening_version: u64,
) -> Result<Placed> {
    let team_run_id = member
        .team
        .as_ref()
        .map(|t| t.team_run_id.clone())
        .unwrap_or_default();
    member
        .session
        .journal()
        .append_guarded(
            &member.stream,
            vec![started_event(
                &team_run_id,
                &member.run_id,
                agent,
                placement.instance_id(),
            )],
            Vec::new(),
            ExpectedVersion::Exact(opening_version),
        )
        .await?;
    Ok(Placed::Here)
}

pub(crate) fn started_event(
    team_run_id: &str,
    task_id: &str,
    agent: &str,
    instance: &str,
) -> Event {
    Event::TeamTaskStarted(TeamTaskStarted {
        team_run_id: team_run_id.to_string(),
        task_id: task_id.to_string(),
        agent: agent.to_string(),
        instance_id: instance.to_string(),
    })
}

/// The owner's view of a member stream while another instance writes it.
struct Watch<'a> {
    member: &'a RunContext,
    /// The stream's version read so far.
    version: u64,
    started_by: Option<String>,
    terminal: Option<(TaskStatus, String)>,
}

impl<'a> Watch<'a> {
    fn new(member: &'a RunContext, version: u64) -> Self {
        Self {
            member,
            version,
            started_by: None,
            terminal: None,
        }
    }

    /// Reads what the stream gained since the last read.
    async fn read(&mut self) -> Result<()> {
        let journal = self.member.session.journal();
        loop {
            let page = journal
                .store()
                .read_stream(journal.key(), &self.member.stream, self.version, 500)
                .await?;
            let Some(last) = page.last() else {
                return Ok(());
            };
            self.version = last.stream_seq;
            for stored in &page {
                let Some(frame) = crate::journal::to_frame(journal.session_id(), stored) else {
                    continue;
                };
                let task = self.member.run_id.as_str();
                match frame.event {
                    Event::TeamTaskStarted(e) if e.task_id == task => {
                        self.started_by = Some(e.instance_id)
                    }
                    Event::RunCompleted { run_id, result, .. } if run_id == task => {
                        self.terminal = Some((TaskStatus::Completed, result))
                    }
                    Event::RunFailed {
                        run_id,
                        code,
                        message,
                    } if run_id == task => {
                        self.terminal = Some((TaskStatus::Failed, format!("{code}: {message}")))
                    }
                    Event::RunInterrupted { run_id, reason } if run_id == task => {
                        self.terminal = Some((TaskStatus::Interrupted, reason))
                    }
                    _ => {}
                }
            }
        }
    }

    /// Waits for the task's terminal event while `worker` lives; closes the task when it
    /// dies first.
    async fn until_end(
        mut self,
        placement: &Arc<dyn MemberPlacement>,
        worker: &str,
        incarnation: Option<&str>,
        tenant: &str,
    ) -> Result<Placed> {
        let journal = self.member.session.journal().clone();
        let mut cancelled_at: Option<tokio::time::Instant> = None;
        let mut polls: u32 = 0;
        loop {
            polls = polls.wrapping_add(1);
            if let Err(err) = self.read().await {
                // The store is briefly unreachable: the journal still holds the answer.
                tracing::debug!(session_id = %journal.session_id(), error = %err, "member task progress not read");
                tokio::time::sleep(POLL).await;
                continue;
            }
            if let Some((status, summary)) = self.terminal.take() {
                // The owner's projection (usage, the board) catches up with the worker.
                journal.sync().await?;
                let lost = status == TaskStatus::Interrupted && !self.member.cancel.is_cancelled();
                return Ok(Placed::Ended {
                    status,
                    summary,
                    lost,
                });
            }
            if self.member.session.is_stopping() {
                // This instance stopped serving the session: the next owner recovers it.
                return Err(Error::Fenced);
            }
            let gave_up = cancelled_at.is_some_and(|at| at.elapsed() > CANCEL_GRACE);
            let gone = !placement.alive(worker, incarnation).await
                || (polls.is_multiple_of(ASK_EVERY)
                    && placement
                        .running(worker, tenant, journal.session_id(), &self.member.run_id)
                        .await
                        == Some(false));
            if gave_up || gone {
                let reason = if gave_up {
                    "interrupted".to_string()
                } else {
                    tracing::warn!(session_id = %journal.session_id(), task_id = %self.member.run_id, instance_id = %worker, "the instance running a member task is gone");
                    LOST_REASON.to_string()
                };
                return match self.close(&reason).await? {
                    // The worker's end landed first.
                    Closed::Ended => continue,
                    Closed::Closed => Ok(Placed::Ended {
                        status: TaskStatus::Interrupted,
                        summary: reason,
                        lost: !gave_up,
                    }),
                };
            }
            if cancelled_at.is_none() {
                tokio::select! {
                    _ = tokio::time::sleep(POLL) => {}
                    _ = self.member.cancel.cancelled() => {
                        placement.cancel(worker, tenant, journal.session_id(), &self.member.run_id).await;
                        cancelled_at = Some(tokio::time::Instant::now());
                    }
                }
            } else {
                tokio::time::sleep(POLL).await;
            }
        }
    }

    /// Journals the end of the task's run for a worker that is gone: what it left open
    /// (tools, steps, permission requests), then `run.interrupted` — appended only at the
    /// stream's version as last read, so nothing the worker wrote is missed.
    async fn close(&mut self, reason: &str) -> Result<Closed> {
        let journal = self.member.session.journal().clone();
        loop {
            self.read().await?;
            if self.terminal.is_some() {
                return Ok(Closed::Ended);
            }
            journal.sync().await?;
            let open = journal
                .with_projection(|p| p.open_runs.get(&self.member.run_id).cloned())
                .await
                .unwrap_or_else(|| OpenRun {
                    stream: self.member.stream.clone(),
                    ..Default::default()
                });
            let (mut events, mut audit) = (Vec::new(), Vec::new());
            crate::recovery::close_inner(
                &self.member.run_id,
                &open,
                reason,
                &mut events,
                &mut audit,
            );
            events.push(Event::RunInterrupted {
                run_id: self.member.run_id.clone(),
                reason: reason.to_string(),
            });
            match journal
                .append_guarded(
                    &self.member.stream,
                    events,
                    audit,
                    ExpectedVersion::Exact(self.version),
                )
                .await
            {
                Ok(_) => return Ok(Closed::Closed),
                // The worker appended meanwhile: read it and close again.
                Err(Error::Journal(lumina_journal::Error::Conflict { .. })) => continue,
                Err(err) => return Err(err),
            }
        }
    }
}

enum Closed {
    Ended,
    Closed,
}
