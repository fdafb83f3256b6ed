//! Running an agent team in a normal session (docs/teams.md, "Running a team").
//!
//! After `team.enter` every top-level run of the session is the team leader's (the team's
//! `entry_agent`): its prompt is the team's, and it gets the tools `team_contract`,
//! `team_dispatch`, `team_message` and `team_complete`. The loop is observe → plan →
//! dispatch → work → collect → gate → finalize:
//!
//! - **Rounds.** The `team_dispatch` calls of one leader message form a round
//!   (`team.round_started` … `team.round_ended` on the board stream `team/<team_run_id>`);
//!   they run concurrently, at most `loop.max_parallel_agents` members at once
//!   ([`TeamShared::parallel`]). A round with a failed or interrupted task or a failed gate
//!   makes the next round a recovery round. `loop.max_iterations` (0 = unbounded) bounds the
//!   rounds; `stop_policy: stop_on_failure` refuses dispatches after a failed round.
//! - **Members** ([`member`]) run the ordinary step loop on their own stream
//!   `team/<team_run_id>/<member>`: their own system prompt (team-system + shared-prompt +
//!   their `system.md` + private skills), their own history (only what was sent to them),
//!   the tools `tools` allows, `max_turns_per_task`, their own `model`.
//! - **Mailboxes** ([`tools`]): `team_message` only along `communicates_with`, at most
//!   `team_max_messages_per_round` per round; a member's mail reaches it with its next task
//!   (`team.messages_delivered` in the same append as the task), the leader's with the
//!   result of the sender's task.
//! - **Gates** ([`gates`]): `require_contract` (no dispatch before `team_contract`), the
//!   task policy ([`policy`]: rules every dispatch must meet, and every contract criterion
//!   served at the end), follow-ups ([`follow_ups`]: nothing left open unless the leader
//!   deferred it with a reason), the verdicts of the `qa` and `reviewer` members
//!   (`team_verdict`), and `checks` (commands in the project, run at `team_complete`).
//!   `team_complete` is refused with the failing gate's output while one fails.
//! - **Thinking**: with `transcript.show_thinking` a member's thinking is journaled
//!   (`team.member_thinking`, [`thinking_event`]) for clients to show; otherwise it is not
//!   stored.
//! - **Durability** ([`control`]): everything is a journal event; after a restart the open
//!   round resumes: interrupted tasks get `team.task_ended{status: interrupted}` and are
//!   dispatched once more, completed ones are never re-run.

pub(crate) mod control;
mod distributed;
mod follow_ups;
mod gates;
pub(crate) mod member;
mod policy;
mod prompt;
mod remote;
pub mod state;
pub(crate) mod tools;
mod worker;

use std::sync::{Arc, Mutex as StdMutex};

use lumina_team::{TeamDefinition, TeamLocations};
use tokio::sync::Semaphore;

use crate::run::RunContext;
use crate::session::Session;

pub use control::{create_team, install_builtin_teams, list_teams};
pub use distributed::{MemberJob, MemberPlacement, PlacementError};
pub(crate) use prompt::system_prompt;
pub use state::TeamRecord;
pub(crate) use tools::DISPATCH_TOOL;
pub use worker::MemberRun;

/// The member names that are gates when a team has them.
pub const QA_MEMBER: &str = "qa";
pub const REVIEWER_MEMBER: &str = "reviewer";

/// What a run of a team is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Role {
    /// The entry agent on the session's main stream.
    Leader,
    /// A member working on one task on its own stream.
    Member { name: String, task_id: String },
}

/// State shared by the leader's run and the members it dispatches.
pub(crate) struct TeamShared {
    /// Permits for members working at once (`loop.max_parallel_agents`).
    pub parallel: Semaphore,
    /// Set by a successful `team_complete`: the leader's run ends after this step.
    pub completed: StdMutex<Option<String>>,
    /// Held while a message is counted against the round's cap and journaled.
    pub mailbox: tokio::sync::Mutex<()>,
    /// Held while a follow-up is numbered or settled and journaled.
    pub follow_ups: tokio::sync::Mutex<()>,
}

/// A run's place in a team.
#[derive(Clone)]
pub(crate) struct TeamScope {
    pub team_run_id: String,
    pub definition: Arc<TeamDefinition>,
    pub role: Role,
    pub shared: Arc<TeamShared>,
}

impl TeamScope {
    pub(crate) fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    /// The name of the member this run is (the entry agent for the leader).
    pub(crate) fn me(&self) -> &str {
        match &self.role {
            Role::Leader => &self.definition.entry_agent,
            Role::Member { name, .. } => name,
        }
    }

    /// The task this run works on (members only).
    pub(crate) fn task_id(&self) -> &str {
        match &self.role {
            Role::Leader => "",
            Role::Member { task_id, .. } => task_id,
        }
    }

    /// Steps a run of this scope may take (`max_turns_per_task` for members).
    pub(crate) fn max_steps(&self) -> Option<u32> {
        match &self.role {
            Role::Leader => None,
            Role::Member { name, .. } => self.definition.member(name).map(|m| m.max_turns_per_task),
        }
    }

    /// The scope of a member task dispatched from this (leader) scope.
    pub(crate) fn member(&self, name: &str, task_id: &str) -> TeamScope {
        TeamScope {
            role: Role::Member {
                name: name.to_string(),
                task_id: task_id.to_string(),
            },
            ..self.clone()
        }
    }

    /// Whether the leader completed the team's task in this run.
    pub(crate) fn completed(&self) -> Option<String> {
        self.shared
            .completed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The session's active team run, if it entered one.
pub(crate) async fn active_team(session: &Session) -> Option<TeamRecord> {
    session
        .journal()
        .with_projection(|p| p.teams.iter().rev().find(|t| t.active).cloned())
        .await
}

/// Loads the definition of the team `name` for the session's project.
pub(crate) fn load_definition(
    session: &Session,
    name: &str,
) -> Result<TeamDefinition, lumina_team::Error> {
    TeamLocations::new(session.app_root(), Some(session.project_root())).load(name)
}

/// Why the session's team cannot run (the leader's run fails with it).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TeamUnusable {
    #[error("the session's team `{team}` cannot be used: {source}")]
    Definition {
        team: String,
        #[source]
        source: lumina_team::Error,
    },
    #[error(
        "the team `{team}` changed its entry agent from `{was}` to `{now}`; leave the team and enter it again"
    )]
    EntryChanged {
        team: String,
        was: String,
        now: String,
    },
}

/// The leader's scope for a top-level run of a session that entered a team; `Ok(None)`
/// when it did not. The definition is read now (it may have changed since `team.enter`).
pub(crate) async fn attach(ctx: &RunContext) -> Result<Option<Arc<TeamScope>>, TeamUnusable> {
    let Some(record) = active_team(&ctx.session).await else {
        return Ok(None);
    };
    let definition =
        load_definition(&ctx.session, &record.team).map_err(|source| TeamUnusable::Definition {
            team: record.team.clone(),
            source,
        })?;
    if definition.entry_agent != record.entry_agent {
        return Err(TeamUnusable::EntryChanged {
            team: record.team.clone(),
            was: record.entry_agent.clone(),
            now: definition.entry_agent.clone(),
        });
    }
    let permits = definition.loop_config.max_parallel_agents.max(1) as usize;
    Ok(Some(Arc::new(TeamScope {
        team_run_id: record.team_run_id.clone(),
        definition: Arc::new(definition),
        role: Role::Leader,
        shared: Arc::new(TeamShared {
            parallel: Semaphore::new(permits),
            completed: StdMutex::new(None),
            mailbox: tokio::sync::Mutex::new(()),
            follow_ups: tokio::sync::Mutex::new(()),
        }),
    })))
}

/// The leader's briefing for its next request (`prompt::briefing`); `None` for other runs.
pub(crate) async fn leader_briefing(ctx: &RunContext) -> Option<String> {
    let team = ctx.team.as_ref().filter(|t| t.is_leader())?;
    let record = active_team(&ctx.session).await?;
    Some(prompt::briefing(&team.definition, &record))
}

/// Whether a run's thinking is journaled: a member (not the leader, whose thinking streams
/// as `thinking` deltas like any session's) of a team with `transcript.show_thinking`.
pub(crate) fn captures_thinking(ctx: &RunContext) -> bool {
    ctx.team
        .as_ref()
        .is_some_and(|t| !t.is_leader() && t.definition.transcript.show_thinking)
}

/// `team.member_thinking` for one model turn of a member, when it is journaled and the
/// model gave any thinking.
pub(crate) fn thinking_event(
    ctx: &RunContext,
    step: u32,
    text: &str,
) -> Option<lumina_protocol::Event> {
    let team = ctx.team.as_ref()?;
    if !captures_thinking(ctx) || text.trim().is_empty() {
        return None;
    }
    Some(lumina_protocol::Event::TeamMemberThinking(
        lumina_protocol::team::TeamMemberThinking {
            team_run_id: team.team_run_id.clone(),
            task_id: team.task_id().to_string(),
            agent: team.me().to_string(),
            step,
            text: text.to_string(),
        },
    ))
}
