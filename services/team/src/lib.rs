//! Agent team definitions (docs/design.md#agent-teams, reference: docs/teams.md): the
//! `team.yaml` and `agents/<name>/agent.yaml` schemas, loading and validating a team folder,
//! the lookup order (project `.Lumina/TEAM/`, user `<AppRoot>/config/teams/`, built-in
//! `<AppRoot>/app/resources/teams/`), listing, the built-in teams and their installation,
//! and the `/NewTeam` template. Running a team is not here: the runtime consumes a
//! [`TeamDefinition`].
//!
//! A team folder:
//!
//! ```text
//! <name>/
//!   team.yaml              required
//!   team-system.md         optional: the team's charter, given to every member
//!   shared-prompt.md       optional: conventions every member follows
//!   completion-policy.md   optional: what "done" means
//!   agents/<member>/
//!     agent.yaml           required
//!     system.md            required, non-empty: the member's prompt
//!     skills/<skill>/SKILL.md   optional private skills (same format as project skills)
//! ```
//!
//! Defaults of the optional fields:
//!
//! | field | default |
//! |---|---|
//! | `display_name` (team, member) | the name |
//! | `loop.max_iterations` | `0` (unbounded: ends on completion or user interrupt) |
//! | `loop.max_parallel_agents` | [`DEFAULT_MAX_PARALLEL_AGENTS`] (4), at least 1 |
//! | `loop.completion_policy` | `leader_and_gates` ([`CompletionPolicy`]) |
//! | `loop.stop_policy` | `recover` ([`StopPolicy`]) |
//! | `gates.require_contract` | `false` |
//! | `gates.checks` | none |
//! | `gates.task_policy.require_criteria` | `false` |
//! | `gates.task_policy.max_task_chars` | `0` (no bound) |
//! | `gates.follow_ups` | `false` |
//! | `transcript.show_member_dialogue` | `true` |
//! | `transcript.show_tool_details`, `transcript.show_thinking` | `false` |
//! | `communicates_with` | entry agent: every other member; others: the entry agent |
//! | `model` | the session's model |
//! | `tools` | `["*"]` (every tool; the permission engine still applies) |
//! | `max_turns_per_task` | [`DEFAULT_MAX_TURNS_PER_TASK`] (40), at least 1 |
//! | `private_skills` | every skill in the member's `skills/` |
//!
//! Validation collects every problem as an [`Issue`] naming the file relative to the team
//! folder, the field (`loop.max_parallel_agents`, `agents[2]`, `communicates_with[0]`) and
//! what is wrong. Files are read without following symbolic links and capped at
//! [`MAX_FILE_BYTES`]; YAML is parsed with budgets against hostile input (`yaml.rs`).

mod builtin;
mod create;
mod definition;
mod error;
mod files;
mod fsutil;
mod load;
mod lookup;
mod name;
mod spec;
mod yaml;

pub use builtin::{install_builtins, BuiltinFile, BuiltinTeam, InstallReport, BUILTIN_TEAMS};
pub use create::create_team;
pub use definition::{MemberDefinition, TeamDefinition, ToolPatterns};
pub use error::{Error, Issue, IssueKind, Result};
pub use files::MAX_FILE_BYTES;
pub use load::{
    load_team_dir, MAX_CHECKS, MAX_CHECK_BYTES, MAX_LABEL_CHARS, MAX_MEMBERS, MAX_PARALLEL_AGENTS,
    MAX_TASK_CHARS, MAX_TOOL_PATTERNS, MAX_TURNS_PER_TASK, MIN_TASK_CHARS,
};
pub use lookup::{
    builtin_teams_dir, check_team_name, project_teams_dir, user_teams_dir, TeamCatalog,
    TeamListing, TeamLocations, TeamSource,
};
pub use name::{check_name, NameProblem, MAX_NAME_LEN};
pub use spec::{
    CompletionPolicy, GateConfig, LoopConfig, StopPolicy, TaskPolicy, TranscriptConfig,
    DEFAULT_MAX_PARALLEL_AGENTS, DEFAULT_MAX_TURNS_PER_TASK,
};
