//! Durable journal events. Every kind is `<entity>.<verb>` and stable; new fields may be
//! added, so readers must ignore unknown fields (serde does by default).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::goal::{GoalBudgets, GoalState, GoalUsage};
use crate::state::{ApiType, RunFailureCode};
use crate::team::{
    TeamCompleted, TeamContractWritten, TeamEntered, TeamExited, TeamFollowUpOpened,
    TeamFollowUpResolved, TeamGateChecked, TeamMemberThinking, TeamMessageSent,
    TeamMessagesDelivered, TeamRoundEnded, TeamRoundStarted, TeamTaskDispatched, TeamTaskEnded,
    TeamTaskStarted,
};

/// One durable event. On the wire it is an object with a `kind` tag and the kind's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Event {
    #[serde(rename = "session.created")]
    SessionCreated { title: String, project_root: String },
    #[serde(rename = "session.archived")]
    SessionArchived {},

    #[serde(rename = "run.started")]
    RunStarted {
        run_id: String,
        idempotency_key: String,
        /// Model used for the run (never a key or a URL with credentials).
        model: String,
    },
    #[serde(rename = "run.completed")]
    RunCompleted {
        run_id: String,
        /// The final assistant text of the run.
        result: String,
        usage: Usage,
    },
    #[serde(rename = "run.failed")]
    RunFailed {
        run_id: String,
        code: RunFailureCode,
        message: String,
    },
    #[serde(rename = "run.interrupted")]
    RunInterrupted { run_id: String, reason: String },
    /// A follow-up submitted while another run was active: it starts (`run.started` with the
    /// same `run_id`) after the runs before it end, in order. A queued run that is cancelled
    /// before it starts ends with `run.interrupted` and never gets `run.started`.
    #[serde(rename = "run.queued")]
    RunQueued {
        run_id: String,
        idempotency_key: String,
        prompt: String,
        /// The submit's `mode` (`followup`, or `steer` when there was no run to steer).
        mode: String,
        /// The submit's `headless` flag, so a run started after a restart keeps it.
        #[serde(default, skip_serializing_if = "is_false")]
        headless: bool,
    },

    #[serde(rename = "step.started")]
    StepStarted { run_id: String, step: u32 },
    #[serde(rename = "step.completed")]
    StepCompleted {
        run_id: String,
        step: u32,
        stop_reason: String,
    },
    #[serde(rename = "step.interrupted")]
    StepInterrupted {
        run_id: String,
        step: u32,
        reason: String,
    },

    #[serde(rename = "message.user")]
    MessageUser {
        run_id: String,
        text: String,
        /// Set when the prompt invoked a skill (`/name args`); the skill text itself is not
        /// part of the visible conversation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skill: Option<String>,
    },
    /// A steering message for the active run: delivered to the model as a user message before
    /// the run's next model request (or, when the run ends first, before the next run's).
    #[serde(rename = "message.steering")]
    MessageSteering { run_id: String, text: String },
    #[serde(rename = "message.assistant")]
    MessageAssistant {
        run_id: String,
        step: u32,
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallInfo>,
    },

    #[serde(rename = "model.requested")]
    ModelRequested {
        run_id: String,
        step: u32,
        model: String,
        api_type: ApiType,
        message_count: u32,
        context_tokens: u64,
        /// The last journal seq the compiled context includes (0 in journals written before
        /// this field existed). Steering messages up to it were delivered by this request.
        #[serde(default, skip_serializing_if = "is_zero")]
        through_seq: u64,
    },
    #[serde(rename = "model.responded")]
    ModelResponded {
        run_id: String,
        step: u32,
        model: String,
        stop_reason: String,
        /// `primary` or `fallback`.
        provider: String,
    },

    #[serde(rename = "tool.started")]
    ToolStarted {
        run_id: String,
        step: u32,
        call_id: String,
        tool: String,
        arguments: Value,
    },
    #[serde(rename = "tool.completed")]
    ToolCompleted {
        run_id: String,
        call_id: String,
        tool: String,
        is_error: bool,
        /// What the model sees (capped).
        output: String,
        /// Tool-specific structured data: a diff, an exit code, the path of the full output.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        metadata: Value,
    },
    #[serde(rename = "tool.interrupted")]
    ToolInterrupted {
        run_id: String,
        call_id: String,
        tool: String,
        reason: String,
    },

    #[serde(rename = "permission.requested")]
    PermissionRequested {
        run_id: String,
        request_id: String,
        call_id: String,
        tool: String,
        arguments: Value,
        /// sha256 of the normalized arguments: an approval binds to tool + this hash.
        args_hash: String,
        /// Human-readable preview: a unified diff for edits, the command for shell.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preview: Option<String>,
    },
    #[serde(rename = "permission.resolved")]
    PermissionResolved {
        run_id: String,
        request_id: String,
        decision: Decision,
        /// Who decided: `user`, `rule`, `mode`, `session_grant` or `headless`.
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },

    /// A configured hook ran (`hook` is its command, clipped).
    #[serde(rename = "hook.completed")]
    HookCompleted {
        hook: String,
        /// `session_start`, `user_prompt_submit`, `pre_tool_use`, `post_tool_use` or `stop`.
        event: String,
        /// `None` when the hook was killed (timeout, interrupt) or could not start.
        exit_code: Option<i32>,
        /// stdout then stderr, capped.
        output: String,
        /// True when the hook exited with code 2 on an event that can be blocked.
        blocked: bool,
        #[serde(default, skip_serializing_if = "is_false")]
        timed_out: bool,
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
    },

    #[serde(rename = "task.updated")]
    TaskUpdated { todos: Vec<TodoItem> },
    #[serde(rename = "usage.recorded")]
    UsageRecorded {
        run_id: String,
        step: u32,
        usage: Usage,
        /// Estimated tokens of the compiled context sent in this step.
        context_tokens: u64,
        /// The configured context window (`max_tokens`).
        max_tokens: u64,
    },
    #[serde(rename = "warning")]
    Warning {
        code: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
    },
    /// A compaction checkpoint: history up to `through_seq` is replaced in the model
    /// context by `summary`.
    #[serde(rename = "checkpoint")]
    Checkpoint {
        run_id: String,
        through_seq: u64,
        summary: String,
        tokens_before: u64,
        tokens_after: u64,
    },
    /// The Memory Fabric added earlier evidence to the system prompt of a run's first step;
    /// `source_ids` are the recalled evidence's source ids (`<session_id>:<seq>`, notes
    /// `<session_id>:note:<uuid>`).
    #[serde(rename = "memory.recalled")]
    MemoryRecalled {
        run_id: String,
        source_ids: Vec<String>,
    },
    /// A sub-agent started (main stream). Its run is journaled on the child stream
    /// `agent/<child_id>` (`run.started` with `run_id = child_id`, `message.user`, steps…).
    #[serde(rename = "agent.started")]
    AgentStarted {
        /// The run whose `agent` tool call started it (a sub-agent's own run for nested ones).
        parent_run_id: String,
        child_id: String,
        /// The parent's `agent` tool call.
        call_id: String,
        /// 1 for a child of a top-level run, 2 for a grandchild, …
        depth: u32,
        prompt: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// The tools offered to the sub-agent.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tools: Vec<String>,
    },
    /// A sub-agent ended (main stream); `result` is what its parent's tool call returned.
    #[serde(rename = "agent.completed")]
    AgentCompleted {
        child_id: String,
        result: String,
        is_error: bool,
    },
    /// A sub-agent stopped without a result: its parent was interrupted, or recovery closed
    /// it after a crash (main stream; its own stream ends with `run.interrupted`).
    #[serde(rename = "agent.interrupted")]
    AgentInterrupted { child_id: String, reason: String },

    /// A goal started (`goal.start`); `run_id` is its first run.
    #[serde(rename = "goal.started")]
    GoalStarted {
        goal_id: String,
        run_id: String,
        objective: String,
        acceptance_criteria: Vec<String>,
        budgets: GoalBudgets,
        /// Consecutive turns without progress that end the goal (`failed`, `no-progress`).
        no_progress_turns: u32,
    },
    /// A goal's state or usage changed (with every model answer, on pause, resume, approval
    /// waits).
    #[serde(rename = "goal.updated")]
    GoalUpdated {
        goal_id: String,
        state: GoalState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        usage: GoalUsage,
        /// The run taking the goal's turns now (set while running).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<String>,
    },
    /// A goal ended: `success`, `budget-exhausted`, `failed` or `cancelled`.
    #[serde(rename = "goal.completed")]
    GoalCompleted {
        goal_id: String,
        state: GoalState,
        /// The model's summary (`success`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// Why it ended otherwise: the spent budget's key, `no-progress`, an error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The model's evidence that the criteria are met (`success`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<String>,
        usage: GoalUsage,
    },

    /// A step of an `a2a_delegate` call, or of a remote team member's task, on the
    /// calling run's stream (docs/a2a.md#delegation): the remote agent's card read, the
    /// message sent, a status or artifact of the remote task, its end, or why the agent
    /// could not be reached.
    #[serde(rename = "delegate.updated")]
    DelegateUpdated {
        run_id: String,
        /// The tool call (or the team task) the delegation belongs to.
        call_id: String,
        /// The configured peer's name, or the URL the call named.
        agent: String,
        step: DelegateStep,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        /// The remote task's A2A state (`TASK_STATE_WORKING`, …) when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<String>,
        /// A short line: the status message, the artifact's name, the reason (capped).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },

    /// An MCP server of the run needs a person to sign in (OAuth authorization code flow,
    /// docs/protocol.md "MCP sign-in"): `url` is the authorization URL to open in a
    /// browser. The run waits for the sign-in to end (`mcp.sign_in_ended`) before its step
    /// goes on; while it waits, an A2A task of the run is `TASK_STATE_AUTH_REQUIRED`.
    #[serde(rename = "mcp.sign_in_required")]
    McpSignInRequired {
        run_id: String,
        /// The server's name in `mcp.json` / `.mcp.json`.
        server: String,
        /// The authorization URL (carries no token or client secret).
        url: String,
    },
    /// The sign-in announced by `mcp.sign_in_required` ended: the run goes on, with the
    /// server's tools when `outcome` is `signed_in`.
    #[serde(rename = "mcp.sign_in_ended")]
    McpSignInEnded {
        run_id: String,
        server: String,
        outcome: SignInOutcome,
        /// Why it failed (`failed`; never a token or a secret).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },

    /// Agent teams (`crate::team`, docs/protocol.md "Teams").
    #[serde(rename = "team.entered")]
    TeamEntered(TeamEntered),
    #[serde(rename = "team.exited")]
    TeamExited(TeamExited),
    #[serde(rename = "team.contract_written")]
    TeamContractWritten(TeamContractWritten),
    #[serde(rename = "team.round_started")]
    TeamRoundStarted(TeamRoundStarted),
    #[serde(rename = "team.round_ended")]
    TeamRoundEnded(TeamRoundEnded),
    #[serde(rename = "team.task_dispatched")]
    TeamTaskDispatched(TeamTaskDispatched),
    #[serde(rename = "team.task_ended")]
    TeamTaskEnded(TeamTaskEnded),
    #[serde(rename = "team.message_sent")]
    TeamMessageSent(TeamMessageSent),
    #[serde(rename = "team.messages_delivered")]
    TeamMessagesDelivered(TeamMessagesDelivered),
    #[serde(rename = "team.gate_checked")]
    TeamGateChecked(TeamGateChecked),
    #[serde(rename = "team.completed")]
    TeamCompleted(TeamCompleted),
    #[serde(rename = "team.follow_up_opened")]
    TeamFollowUpOpened(TeamFollowUpOpened),
    #[serde(rename = "team.follow_up_resolved")]
    TeamFollowUpResolved(TeamFollowUpResolved),
    #[serde(rename = "team.member_thinking")]
    TeamMemberThinking(TeamMemberThinking),
    #[serde(rename = "team.task_started")]
    TeamTaskStarted(TeamTaskStarted),

    /// A kind this build does not know (written by a newer server). Readers skip it.
    #[serde(other)]
    Unknown,
}

impl Event {
    /// The stable `kind` string of this event.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SessionCreated { .. } => "session.created",
            Event::SessionArchived {} => "session.archived",
            Event::RunStarted { .. } => "run.started",
            Event::RunCompleted { .. } => "run.completed",
            Event::RunFailed { .. } => "run.failed",
            Event::RunInterrupted { .. } => "run.interrupted",
            Event::RunQueued { .. } => "run.queued",
            Event::StepStarted { .. } => "step.started",
            Event::StepCompleted { .. } => "step.completed",
            Event::StepInterrupted { .. } => "step.interrupted",
            Event::MessageUser { .. } => "message.user",
            Event::MessageSteering { .. } => "message.steering",
            Event::MessageAssistant { .. } => "message.assistant",
            Event::ModelRequested { .. } => "model.requested",
            Event::ModelResponded { .. } => "model.responded",
            Event::ToolStarted { .. } => "tool.started",
            Event::ToolCompleted { .. } => "tool.completed",
            Event::ToolInterrupted { .. } => "tool.interrupted",
            Event::PermissionRequested { .. } => "permission.requested",
            Event::PermissionResolved { .. } => "permission.resolved",
            Event::HookCompleted { .. } => "hook.completed",
            Event::TaskUpdated { .. } => "task.updated",
            Event::UsageRecorded { .. } => "usage.recorded",
            Event::Warning { .. } => "warning",
            Event::Checkpoint { .. } => "checkpoint",
            Event::MemoryRecalled { .. } => "memory.recalled",
            Event::AgentStarted { .. } => "agent.started",
            Event::AgentCompleted { .. } => "agent.completed",
            Event::AgentInterrupted { .. } => "agent.interrupted",
            Event::GoalStarted { .. } => "goal.started",
            Event::GoalUpdated { .. } => "goal.updated",
            Event::GoalCompleted { .. } => "goal.completed",
            Event::DelegateUpdated { .. } => "delegate.updated",
            Event::McpSignInRequired { .. } => "mcp.sign_in_required",
            Event::McpSignInEnded { .. } => "mcp.sign_in_ended",
            Event::TeamEntered(_) => "team.entered",
            Event::TeamExited(_) => "team.exited",
            Event::TeamContractWritten(_) => "team.contract_written",
            Event::TeamRoundStarted(_) => "team.round_started",
            Event::TeamRoundEnded(_) => "team.round_ended",
            Event::TeamTaskDispatched(_) => "team.task_dispatched",
            Event::TeamTaskEnded(_) => "team.task_ended",
            Event::TeamMessageSent(_) => "team.message_sent",
            Event::TeamMessagesDelivered(_) => "team.messages_delivered",
            Event::TeamGateChecked(_) => "team.gate_checked",
            Event::TeamCompleted(_) => "team.completed",
            Event::TeamFollowUpOpened(_) => "team.follow_up_opened",
            Event::TeamFollowUpResolved(_) => "team.follow_up_resolved",
            Event::TeamMemberThinking(_) => "team.member_thinking",
            Event::TeamTaskStarted(_) => "team.task_started",
            Event::Unknown => "unknown",
        }
    }

    /// Splits into `(kind, payload-without-kind)` for storage.
    pub fn to_parts(&self) -> (String, Value) {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.remove("kind");
        }
        (self.kind().to_string(), value)
    }

    /// Rebuilds an event from stored parts. Fails for kinds this build does not know.
    pub fn from_parts(kind: &str, payload: &Value) -> Result<Event, serde_json::Error> {
        let mut value = match payload {
            Value::Object(map) => Value::Object(map.clone()),
            _ => Value::Object(Default::default()),
        };
        if let Value::Object(map) = &mut value {
            map.insert("kind".into(), Value::String(kind.to_string()));
        }
        serde_json::from_value(value)
    }

    /// The run this event belongs to, if any.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            Event::RunStarted { run_id, .. }
            | Event::RunCompleted { run_id, .. }
            | Event::RunFailed { run_id, .. }
            | Event::RunInterrupted { run_id, .. }
            | Event::RunQueued { run_id, .. }
            | Event::MessageSteering { run_id, .. }
            | Event::StepStarted { run_id, .. }
            | Event::StepCompleted { run_id, .. }
            | Event::StepInterrupted { run_id, .. }
            | Event::MessageUser { run_id, .. }
            | Event::MessageAssistant { run_id, .. }
            | Event::ModelRequested { run_id, .. }
            | Event::ModelResponded { run_id, .. }
            | Event::ToolStarted { run_id, .. }
            | Event::ToolCompleted { run_id, .. }
            | Event::ToolInterrupted { run_id, .. }
            | Event::PermissionRequested { run_id, .. }
            | Event::PermissionResolved { run_id, .. }
            | Event::UsageRecorded { run_id, .. }
            | Event::Checkpoint { run_id, .. }
            | Event::MemoryRecalled { run_id, .. }
            | Event::DelegateUpdated { run_id, .. }
            | Event::McpSignInRequired { run_id, .. }
            | Event::McpSignInEnded { run_id, .. }
            | Event::GoalStarted { run_id, .. }
            | Event::AgentStarted {
                parent_run_id: run_id,
                ..
            } => Some(run_id),
            Event::Warning { run_id, .. }
            | Event::HookCompleted { run_id, .. }
            | Event::GoalUpdated { run_id, .. } => run_id.as_deref(),
            Event::AgentCompleted { .. }
            | Event::AgentInterrupted { .. }
            | Event::GoalCompleted { .. } => None,
            Event::SessionCreated { .. }
            | Event::SessionArchived {}
            | Event::TaskUpdated { .. }
            | Event::TeamEntered(_)
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
            | Event::TeamFollowUpResolved(_)
            | Event::TeamMemberThinking(_)
            | Event::TeamTaskStarted(_)
            | Event::Unknown => None,
        }
    }
}

/// What a `delegate.updated` event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegateStep {
    /// The agent's card was read (fetched or from the cache).
    Card,
    /// The message was sent; the remote task exists.
    Sent,
    /// The remote task's status changed.
    Status,
    /// An artifact (or a chunk of one) arrived.
    Artifact,
    /// The call stopped following the task: it ended, waits for input, or is still
    /// working past the call's time limit (`state` says which).
    Ended,
    /// The agent could not be reached (card, address, connection, credentials, time
    /// limit): the call's result is input-required with `detail`; nothing ran locally.
    Unreachable,
    /// The agent became unreachable while its task (`task_id`) was followed: the call is
    /// parked — the run waits on it, input-required with the reason in `detail` — until a
    /// retry (`delegate.retry`, or an A2A `GetTask` on the run's task) reaches the agent.
    Waiting,
}

/// How an MCP sign-in ended (`mcp.sign_in_ended`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignInOutcome {
    /// The person signed in: the server's tools are offered from now on.
    SignedIn,
    /// Nobody signed in within the time limit (`auth_timeout`, 5 min): the run goes on
    /// without the server's tools; its next use starts a new sign-in.
    TimedOut,
    /// The sign-in ended without tokens (refused, an OAuth error): `detail` says why.
    Failed,
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallInfo {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// A permission decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Allow this one call.
    AllowOnce,
    /// Allow this exact call (tool + argument hash) for the rest of the session.
    AllowSession,
    Deny,
}

/// Token usage; counts add up across steps of a run and runs of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

/// One entry of the task list written by `todo_write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

#[cfg(test)]
mod tests;
