//! The two YAML schemas, `team.yaml` and `agents/<name>/agent.yaml`, exactly as written on
//! disk: every struct denies unknown fields, and every optional field has the default
//! documented on it (and in docs/teams.md). The validated, defaulted form is
//! [`crate::TeamDefinition`].

use serde::Deserialize;

/// Default of `loop.max_parallel_agents`: as many members working at once as sub-agents
/// a session runs in parallel by default (`subagent_max_parallel`).
pub const DEFAULT_MAX_PARALLEL_AGENTS: u32 = 4;

/// Default of `max_turns_per_task` in `agent.yaml`: model turns one member may take on one
/// task before it must hand back what it has.
pub const DEFAULT_MAX_TURNS_PER_TASK: u32 = 40;

/// `team.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TeamFile {
    /// Required; must equal the team's folder name.
    pub name: String,
    /// Default: `name`.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Required; one of `agents`.
    pub entry_agent: String,
    /// Default: [`LoopConfig::default`].
    #[serde(default, rename = "loop")]
    pub loop_config: LoopConfig,
    /// Default: [`GateConfig::default`].
    #[serde(default)]
    pub gates: GateConfig,
    /// Default: [`TranscriptConfig::default`].
    #[serde(default)]
    pub transcript: TranscriptConfig,
    /// Required, non-empty: the member names, each the name of a folder under `agents/`.
    pub agents: Vec<String>,
}

/// `team.yaml` `loop`: how the observe → plan → dispatch → work → collect → gate → finalize
/// loop (docs/design.md#agent-teams) is bounded and when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoopConfig {
    /// Rounds before the loop stops and reports; `0` (the default) is unbounded, so the loop
    /// ends only on completion or a user interrupt.
    pub max_iterations: u32,
    /// Members working at the same time, at least 1. Default
    /// [`DEFAULT_MAX_PARALLEL_AGENTS`].
    pub max_parallel_agents: u32,
    /// Who decides that the work is done. Default [`CompletionPolicy::LeaderAndGates`].
    pub completion_policy: CompletionPolicy,
    /// What a failed round leads to. Default [`StopPolicy::Recover`].
    pub stop_policy: StopPolicy,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            max_iterations: 0,
            max_parallel_agents: DEFAULT_MAX_PARALLEL_AGENTS,
            completion_policy: CompletionPolicy::default(),
            stop_policy: StopPolicy::default(),
        }
    }
}

/// `loop.completion_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionPolicy {
    /// Done when the entry agent declares the work complete against `completion-policy.md`
    /// **and** every gate passes (the contract, when required, and each check).
    #[default]
    LeaderAndGates,
    /// Done when the entry agent declares it; gates still run and their results are
    /// reported, but a failing gate does not keep the loop going.
    Leader,
}

/// `loop.stop_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopPolicy {
    /// A failed round (a failing gate, a member that failed) leads to a recovery round; the
    /// loop ends only on completion, a user interrupt or `max_iterations`.
    #[default]
    Recover,
    /// The loop stops after the first failed round and reports what failed.
    StopOnFailure,
}

/// `team.yaml` `gates`: what must hold before the team may finish.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GateConfig {
    /// The entry agent must write a contract (goal, deliverables, acceptance criteria)
    /// before any work is dispatched, and the result is checked against it. Default `false`.
    pub require_contract: bool,
    /// Shell commands run in the project root after each round's work; each must exit 0.
    /// Default: none.
    pub checks: Vec<String>,
    /// Rules every `team_dispatch` task must satisfy. Default: none (every rule off).
    pub task_policy: TaskPolicy,
    /// Members report what they leave open with `team_follow_up`; `team_complete` is
    /// refused while one is neither done nor deferred by the leader with a reason. Default
    /// `false`.
    pub follow_ups: bool,
}

/// `team.yaml` `gates.task_policy`: rules the runtime checks on every `team_dispatch`
/// (refused with an error result naming the rule) and, for `require_criteria`, again at
/// `team_complete`. Only rules a program can decide: whether a task fits a member's role
/// is left to the member's `tools` and the permission engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TaskPolicy {
    /// Every dispatch names the contract's acceptance criteria it serves (`criteria`: their
    /// numbers), and `team_complete` requires every criterion to have been served by a
    /// completed task of a member other than the `qa`/`reviewer` gates. Needs
    /// `gates.require_contract`. Default `false`.
    pub require_criteria: bool,
    /// Longest task text in characters; a longer task must be split. `0` (the default) is
    /// no bound.
    pub max_task_chars: u32,
}

impl TaskPolicy {
    /// Whether any rule is on.
    pub fn is_on(&self) -> bool {
        self.require_criteria || self.max_task_chars > 0
    }
}

/// `team.yaml` `transcript`: what of the team's work the user sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TranscriptConfig {
    /// Messages between members. Default `true`.
    pub show_member_dialogue: bool,
    /// Members' tool calls with their arguments and results (otherwise one line each).
    /// Default `false`.
    pub show_tool_details: bool,
    /// Members' thinking, where the model provides it. Default `false`.
    pub show_thinking: bool,
}

impl Default for TranscriptConfig {
    fn default() -> Self {
        TranscriptConfig {
            show_member_dialogue: true,
            show_tool_details: false,
            show_thinking: false,
        }
    }
}

/// `agents/<name>/agent.yaml`. `None` means "not given": see each field's default.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentFile {
    /// Required; must equal the member's folder name.
    pub name: String,
    /// Default: `name`.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Default: the entry agent talks with every other member, every other member with the
    /// entry agent only.
    #[serde(default)]
    pub communicates_with: Option<Vec<String>>,
    /// Default: the session's model.
    #[serde(default)]
    pub model: Option<String>,
    /// Tool names or globs (`web_*`, `mcp__github__*`). Default `["*"]`: every tool the
    /// session offers (the permission engine still applies).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Default [`DEFAULT_MAX_TURNS_PER_TASK`]; at least 1.
    #[serde(default)]
    pub max_turns_per_task: Option<u32>,
    /// Names of skills in the member's `skills/` folder. Default: all of them.
    #[serde(default)]
    pub private_skills: Option<Vec<String>>,
}
