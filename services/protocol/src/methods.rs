//! Params and results of every method. Method names are the `METHOD` constants.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::state::{RunStatus, SessionStatus};
use crate::table::Method;
use crate::{EventFrame, GoalBudgets, GoalState, GoalUsage, Usage};

pub use crate::a2a::{
    A2aPeerInfo, A2aPeersParams, A2aPeersResult, CardSkill, CardSummary, PeerAuth, Reachability,
};
pub use crate::audit::{AuditEntry, AuditListParams, AuditListResult};
pub use crate::skill::{SkillInfo, SkillListParams, SkillListResult, SkillSource};
pub use crate::team::{
    TeamCreateParams, TeamCreateResult, TeamEnterParams, TeamEnterResult, TeamExitParams,
    TeamExitResult, TeamInfo, TeamListParams, TeamListResult,
};

// The wire names, for callers that match on strings; the table in `crate::table` is the
// one declaration.
pub const HELLO: &str = Method::Hello.name();
pub const SESSION_CREATE: &str = Method::SessionCreate.name();
pub const SESSION_LIST: &str = Method::SessionList.name();
pub const SESSION_INFO: &str = Method::SessionInfo.name();
pub const SESSION_RESUME: &str = Method::SessionResume.name();
pub const SESSION_EVENTS: &str = Method::SessionEvents.name();
pub const SESSION_SUBMIT: &str = Method::SessionSubmit.name();
pub const SESSION_INTERRUPT: &str = Method::SessionInterrupt.name();
pub const SESSION_ARCHIVE: &str = Method::SessionArchive.name();
pub const PERMISSION_RESPOND: &str = Method::PermissionRespond.name();
pub const GOAL_START: &str = Method::GoalStart.name();
pub const GOAL_PAUSE: &str = Method::GoalPause.name();
pub const GOAL_RESUME: &str = Method::GoalResume.name();
pub const GOAL_CANCEL: &str = Method::GoalCancel.name();
pub const MCP_STATUS: &str = Method::McpStatus.name();
pub const MCP_TRUST: &str = Method::McpTrust.name();
pub const DELEGATE_RETRY: &str = Method::DelegateRetry.name();
pub const TEAM_LIST: &str = Method::TeamList.name();
pub const TEAM_ENTER: &str = Method::TeamEnter.name();
pub const TEAM_EXIT: &str = Method::TeamExit.name();
pub const TEAM_CREATE: &str = Method::TeamCreate.name();
pub const SKILL_LIST: &str = Method::SkillList.name();
pub const A2A_PEERS: &str = Method::A2aPeers.name();
pub const ADMIN_DRAIN: &str = Method::AdminDrain.name();
pub const ADMIN_SHUTDOWN: &str = Method::AdminShutdown.name();

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HelloParams {
    /// Versions the client speaks; the server picks the highest it supports.
    #[serde(default)]
    pub protocols: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloResult {
    pub protocol: u32,
    pub server: ServerInfo,
    pub identity: Identity,
    /// What the `shell` tool's sandbox can enforce on the server's host (docs/sandbox.md).
    /// Absent from servers that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<crate::Confinement>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    /// `local` or `cluster`.
    pub profile: String,
    pub instance_id: String,
    /// Largest accepted frame, bytes.
    pub max_frame_bytes: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub sub: String,
    pub tenant: String,
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionCreateParams {
    /// Absolute path of the project root; defaults to the backend's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// A session as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: String,
    pub title: String,
    pub project_root: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// `idle`, `running` or `archived`.
    pub status: SessionStatus,
    pub head_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<RunSummary>,
    pub usage: Usage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_id: String,
    /// `queued`, `running`, `completed`, `failed` or `interrupted`.
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionResult {
    pub session: SessionInfo,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionListParams {
    #[serde(default)]
    pub include_archived: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionListResult {
    pub sessions: Vec<SessionInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRef {
    pub session_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfoResult {
    pub session: SessionInfo,
    /// The instance that owns the session (holds its lease).
    pub owner: String,
    /// The owner's fencing token.
    pub fence: u64,
}

/// Subscribe to a session's events. Events with `seq > after_seq` are pushed, backlog first,
/// then live, each exactly once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionResumeParams {
    pub session_id: String,
    #[serde(default)]
    pub after_seq: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionResumeResult {
    pub session: SessionInfo,
    /// The journal head when the subscription was taken.
    pub head_seq: u64,
    /// Permission requests still waiting for an answer.
    pub pending_permissions: Vec<EventFrame>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEventsParams {
    pub session_id: String,
    #[serde(default)]
    pub after_seq: u64,
    /// At most this many events (server caps it at 1000; default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEventsResult {
    pub events: Vec<EventFrame>,
    pub head_seq: u64,
    /// True when more events exist after the last one returned.
    pub more: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSubmitParams {
    pub session_id: String,
    /// Required. A second submit with the same key returns the first run and starts nothing.
    pub idempotency_key: String,
    pub prompt: String,
    /// Per-submit setting overrides (the CLI's flags and environment): model settings and
    /// `permission_mode`. Keys are never journaled.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub settings: Value,
    /// True when nobody can answer permission requests: `ask` becomes a denial.
    #[serde(default)]
    pub headless: bool,
    /// What to do when a run is active: queue a follow-up run (the default) or steer the
    /// active run. Ignored when the session is idle: the prompt starts a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SubmitMode>,
}

/// How a submit joins a session that is busy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubmitMode {
    /// A new run, queued behind the active one (and any queued before it).
    #[default]
    #[serde(alias = "follow_up", alias = "follow-up")]
    Followup,
    /// A message delivered to the active run before its next model request.
    Steer,
}

impl SubmitMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SubmitMode::Followup => "followup",
            SubmitMode::Steer => "steer",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSubmitResult {
    pub run_id: String,
    /// False when the key was seen before and the original run is returned.
    pub created: bool,
    pub run: RunSummary,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInterruptParams {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInterruptResult {
    pub interrupted: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionRespondParams {
    pub session_id: String,
    pub request_id: String,
    pub decision: crate::Decision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Params of methods that take none (`{}` or `null`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Empty {}

/// Result of `admin.drain`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DrainResult {
    pub ok: bool,
    /// Leases handed back (sessions other instances may now take).
    pub released: usize,
}

/// Result of `console.ticket`: a single-use sign-in ticket for the web console
/// (docs/console.md). `login_path` is the path to open on the backend's HTTP address.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsoleTicketResult {
    pub login_path: String,
    /// When the ticket stops being accepted (unix milliseconds).
    pub expires_at_ms: i64,
}

/// Result of methods that only acknowledge.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ack {
    pub ok: bool,
}

/// Starts a goal (LightWorker goal mode): a sequence of turns on the session until the model
/// declares the acceptance criteria met (`goal_complete`), a budget runs out, it stops making
/// progress, it fails, or it is paused or cancelled. The session must be idle and have no
/// unfinished (paused) goal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalStartParams {
    pub session_id: String,
    /// Required. A second start with the same key returns the first goal and starts nothing.
    pub idempotency_key: String,
    pub objective: String,
    #[serde(default)]
    pub acceptance_criteria: Vec<String>,
    #[serde(default)]
    pub budgets: GoalBudgets,
    /// Consecutive turns without progress before the `no-progress` verdict (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_progress_turns: Option<u32>,
    /// Setting overrides as in `session.submit` (held in memory, never journaled).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub settings: Value,
    /// As in `session.submit`: nobody can answer permission requests.
    #[serde(default)]
    pub headless: bool,
}

/// Names a goal of a session; without `goal_id`, the session's unfinished goal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalRef {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_id: Option<String>,
}

/// Resumes a paused goal (a new run continues its turns and budgets).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalResumeParams {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_id: Option<String>,
    /// Setting overrides for the new run (default: those of the start, while this backend
    /// process lives; the layered settings after a restart).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub settings: Value,
}

/// A goal as the journal describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalSummary {
    pub goal_id: String,
    pub state: GoalState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub objective: String,
    pub acceptance_criteria: Vec<String>,
    pub budgets: GoalBudgets,
    pub usage: GoalUsage,
    /// The goal's latest run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// Result of every `goal.*` method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalResult {
    pub goal: GoalSummary,
    /// `goal.start`: false when the key was seen before (the original goal is returned).
    /// Other methods: whether the call changed anything.
    pub created: bool,
}

/// Result of `mcp.status` (params: [`SessionRef`]): the MCP servers configured for the
/// session's project (`<project>/.mcp.json` and the user's `config/mcp.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct McpStatusResult {
    pub servers: Vec<McpServerStatus>,
}

/// One MCP server as `/mcp` shows it. Nothing here holds an expanded `${VAR}` value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerStatus {
    pub name: String,
    /// `user` or `project`.
    pub source: String,
    /// `stdio`, `http` or `sse`.
    pub transport: String,
    /// `connected`, `connecting`, `failed`, `untrusted` or `not_started`.
    pub state: String,
    /// Why it failed, or how to trust it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// Tool names as the model sees them (`mcp__<server>__<tool>`).
    #[serde(default)]
    pub tools: Vec<String>,
}

/// `delegate.retry`: retries an `a2a_delegate` call parked while its agent was unreachable
/// (`delegate.updated` step `waiting`): the agent is asked again at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DelegateRetryParams {
    pub session_id: String,
    /// The parked tool call's id (`delegate.updated.call_id`).
    pub call_id: String,
}

/// Where a retried delegation stands when `delegate.retry` answers (within about 15 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegateRetryState {
    /// Still unreachable: the call stays parked (`detail`: why).
    Waiting,
    /// The agent answered and the call follows its task again.
    Working,
    /// The call ended (`detail`: the remote task's state; for a call that was no longer
    /// parked, how it ended — e.g. closed when the backend restarted); the run goes on, if
    /// it still runs.
    Ended,
}

/// Result of `delegate.retry`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DelegateRetryResult {
    pub state: DelegateRetryState,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// `mcp.trust`: trusts a project MCP server (recorded under the AppRoot, asked once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpTrustParams {
    pub session_id: String,
    pub server: String,
}
