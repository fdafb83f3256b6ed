//! Agent teams on the wire: the `team.*` journal events (payloads of [`crate::Event`]'s
//! `Team*` variants), the typed states they carry, and the `team.*` methods' params and
//! results. docs/protocol.md, "Teams", is the prose version; docs/teams.md the reference.
//!
//! Streams: `team.entered`, `team.exited` and `team.completed` go to `main`; the team's board
//! (rounds, dispatches, task ends, messages, gates, the contract) to `team/<team_run_id>`
//! ([`team_board_stream`]); each member's runs to `team/<team_run_id>/<member>`
//! ([`team_member_stream`]).

use serde::{Deserialize, Serialize};

/// The board stream of a team run: `team/<team_run_id>`.
pub fn team_board_stream(team_run_id: &str) -> String {
    format!("team/{team_run_id}")
}

/// A member's stream in a team run: `team/<team_run_id>/<member>`.
pub fn team_member_stream(team_run_id: &str, member: &str) -> String {
    format!("team/{team_run_id}/{member}")
}

/// How a member's task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The member handed back its result.
    Completed,
    /// The member's run failed (model error, `max_turns_per_task`, a refused tool loop).
    Failed,
    /// The work stopped without a result (user interrupt, or a restart closed it).
    Interrupted,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Interrupted => "interrupted",
        }
    }
}

/// A member's state as clients show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberStatus {
    /// No task yet.
    Idle,
    Working,
    Completed,
    Failed,
    Interrupted,
}

impl From<TaskStatus> for MemberStatus {
    fn from(status: TaskStatus) -> Self {
        match status {
            TaskStatus::Completed => MemberStatus::Completed,
            TaskStatus::Failed => MemberStatus::Failed,
            TaskStatus::Interrupted => MemberStatus::Interrupted,
        }
    }
}

/// `team.entered` (main): the session works as the team from now on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamEntered {
    pub team_run_id: String,
    pub team: String,
    pub display_name: String,
    pub entry_agent: String,
    /// Every member, entry agent first.
    pub members: Vec<String>,
    /// `transcript.show_member_dialogue`: clients show the messages between members.
    #[serde(default = "shown")]
    pub show_member_dialogue: bool,
    /// `transcript.show_tool_details`: clients show each member tool call's start with its
    /// arguments, not only its end.
    #[serde(default)]
    pub show_tool_details: bool,
    /// `transcript.show_thinking`: members' thinking is journaled
    /// (`team.member_thinking`) and clients show it, collapsed.
    #[serde(default)]
    pub show_thinking: bool,
}

fn shown() -> bool {
    true
}

/// `team.exited` (main): the session works as a single agent again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamExited {
    pub team_run_id: String,
}

/// `team.contract_written` (board): the leader's contract for the current task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamContractWritten {
    pub team_run_id: String,
    pub goal: String,
    pub acceptance_criteria: Vec<String>,
}

/// `team.round_started` (board): the leader's dispatches of one model message form a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamRoundStarted {
    pub team_run_id: String,
    /// 1, 2, … over the team run.
    pub round: u32,
    /// The round after a failed one (or a resumed round after a restart).
    #[serde(default)]
    pub recovery: bool,
    /// Why it is a recovery round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `team.round_ended` (board): every task of the round ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamRoundEnded {
    pub team_run_id: String,
    pub round: u32,
    /// No task failed or was interrupted and no gate of the round failed.
    pub passed: bool,
    /// What failed, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

/// `team.task_dispatched` (board): a task handed to a member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamTaskDispatched {
    pub team_run_id: String,
    pub round: u32,
    /// Also the member run's `run_id` on the member's stream.
    pub task_id: String,
    pub agent: String,
    pub task: String,
    /// The leader's `team_dispatch` call (empty for a re-dispatch after a restart).
    #[serde(default)]
    pub call_id: String,
    /// The interrupted task this one runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_of: Option<String>,
    /// The contract's acceptance criteria this task serves (1-based), as the leader named
    /// them under `gates.task_policy.require_criteria`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub criteria: Vec<u32>,
}

/// `team.task_ended` (board).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamTaskEnded {
    pub team_run_id: String,
    pub task_id: String,
    pub agent: String,
    pub status: TaskStatus,
    /// The member's final message, or why it failed or stopped.
    pub summary: String,
}

/// `team.message_sent` (board): a message into a member's (or the leader's) mailbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamMessageSent {
    pub team_run_id: String,
    pub msg_id: String,
    pub round: u32,
    pub from: String,
    pub to: String,
    pub text: String,
    /// The sender's task (empty when the leader sent it).
    #[serde(default)]
    pub task_id: String,
}

/// `team.messages_delivered` (the recipient's stream): these messages are in the
/// recipient's context from now on (journaled with the task that carries them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamMessagesDelivered {
    pub team_run_id: String,
    pub to: String,
    pub msg_ids: Vec<String>,
}

/// `team.gate_checked` (board): one gate's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamGateChecked {
    pub team_run_id: String,
    pub round: u32,
    /// `contract`, `qa`, `reviewer`, or `check:<command>`.
    pub name: String,
    pub passed: bool,
    pub output: String,
}

/// `team.completed` (main): the leader finished the task and the gates let it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamCompleted {
    pub team_run_id: String,
    pub summary: String,
    pub rounds: u32,
    /// Every follow-up of the task that was not done: the deferred ones with the leader's
    /// reason (and, under `completion_policy: leader`, any still open), so none is dropped
    /// silently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub follow_ups: Vec<FollowUpItem>,
}

/// Where a follow-up stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FollowUpStatus {
    /// Reported and not settled: `team_complete` is refused (`gates.follow_ups`).
    Open,
    Done,
    /// Left for later by the leader, with a reason.
    Deferred,
}

impl FollowUpStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FollowUpStatus::Open => "open",
            FollowUpStatus::Done => "done",
            FollowUpStatus::Deferred => "deferred",
        }
    }
}

/// How a follow-up was settled (`team.follow_up_resolved`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FollowUpDisposition {
    Done,
    Deferred,
}

impl From<FollowUpDisposition> for FollowUpStatus {
    fn from(disposition: FollowUpDisposition) -> Self {
        match disposition {
            FollowUpDisposition::Done => FollowUpStatus::Done,
            FollowUpDisposition::Deferred => FollowUpStatus::Deferred,
        }
    }
}

/// `team.follow_up_opened` (board): a member (or the leader) reported an open item with
/// `team_follow_up{item}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamFollowUpOpened {
    pub team_run_id: String,
    /// `F1`, `F2`, … over the team run.
    pub follow_up_id: String,
    pub round: u32,
    /// The member that reported it.
    pub by: String,
    /// The reporter's task (empty when the leader reported it).
    #[serde(default)]
    pub task_id: String,
    pub item: String,
}

/// `team.follow_up_resolved` (board): a follow-up was done, or deferred by the leader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamFollowUpResolved {
    pub team_run_id: String,
    pub follow_up_id: String,
    pub by: String,
    pub disposition: FollowUpDisposition,
    /// Why it was deferred (required then), or a note on how it was done.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// A follow-up as `team.completed` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FollowUpItem {
    pub follow_up_id: String,
    pub item: String,
    pub by: String,
    pub status: FollowUpStatus,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// `team.member_thinking` (the member's stream): a member's thinking in one model turn,
/// journaled just before that step's `message.assistant` — only when the team's
/// `transcript.show_thinking` is on (otherwise a member's thinking is never stored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamMemberThinking {
    pub team_run_id: String,
    pub task_id: String,
    pub agent: String,
    pub step: u32,
    pub text: String,
}

/// `team.task_started` (the member's stream): with `team_distributed`, which cluster instance
/// runs a member task. The instance that takes the task journals it first, appended only
/// while the member's stream is exactly as the owner left it after the task's
/// `message.user`, so exactly one instance ever starts a task (docs/teams.md#distributed-members).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamTaskStarted {
    pub team_run_id: String,
    pub task_id: String,
    pub agent: String,
    /// The cluster instance that runs the task.
    pub instance_id: String,
}

/// One team as `team.list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamInfo {
    pub name: String,
    pub display_name: String,
    /// `project`, `user` or `builtin`.
    pub source: String,
    /// Why the team cannot be used; absent when it is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `team.list` params: with a session, its project's teams are included; without one, those
/// of `project_root` (a client that has not opened a session yet knows its project).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TeamListParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The project directory, used only without `session_id` (a session's own project wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_root: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamListResult {
    pub teams: Vec<TeamInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamEnterParams {
    pub session_id: String,
    pub team: String,
}

/// A session's team, as `team.enter` and `team.exit` leave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamEnterResult {
    pub team_run_id: String,
    pub team: String,
    pub display_name: String,
    pub entry_agent: String,
    pub members: Vec<String>,
    /// `false` when the session was in this team already.
    pub created: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamExitParams {
    pub session_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamExitResult {
    /// The team run that ended; absent when the session was in no team.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_run_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamCreateParams {
    pub name: String,
    pub display_name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamCreateResult {
    pub name: String,
    /// The new team's folder.
    pub path: String,
}
