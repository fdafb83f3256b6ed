//! Loading and validating one team folder. Every problem found is collected (not just the
//! first), each naming its file relative to the team folder, the field and what is wrong.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use lumina_skills::{normalize_name, Skill, SkillCatalog, SkillLocation};

use crate::definition::{MemberDefinition, RemoteAgent, TeamDefinition, ToolPatterns};
use crate::error::{Error, Issue, IssueKind, Result};
use crate::files::{self, Entry};
use crate::lookup::TeamSource;
use crate::name::check_name;
use crate::spec::{A2aFile, AgentFile, TeamFile, DEFAULT_MAX_TURNS_PER_TASK};
use crate::yaml;

mod labels;
mod member;
mod skills;
mod team;

pub(crate) use labels::{check_label, LabelProblem};
use labels::{check_url, no_whitespace};

/// Most members a team may have.
pub const MAX_MEMBERS: usize = 32;
/// Largest `loop.max_parallel_agents`.
pub const MAX_PARALLEL_AGENTS: u32 = 32;
/// Most entries in `gates.checks`, and the longest command.
pub const MAX_CHECKS: usize = 32;
pub const MAX_CHECK_BYTES: usize = 4096;
/// Bounds of `gates.task_policy.max_task_chars` when it is not `0` (no bound): a task
/// shorter than the minimum could not say what a member needs.
pub const MIN_TASK_CHARS: u32 = 100;
pub const MAX_TASK_CHARS: u32 = 100_000;
/// Largest `max_turns_per_task`.
pub const MAX_TURNS_PER_TASK: u32 = 10_000;
/// Most entries in `tools`.
pub const MAX_TOOL_PATTERNS: usize = 256;
/// Longest display name, model name or tool pattern, in characters.
pub const MAX_LABEL_CHARS: usize = 200;
/// Longest `a2a.url`, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// Members whose verdicts are gates (`team_verdict`, a team tool): they run here.
const GATE_MEMBERS: [&str; 2] = ["qa", "reviewer"];

const TEAM_FILE: &str = "team.yaml";

/// Loads and validates the team in `dir`, whose folder name is the team's name.
/// [`Error::NotFound`] when `dir` does not exist, [`Error::Invalid`] with every issue found
/// when the definition is broken. Reading a built-in team this way does not coordinate with
/// a concurrent [`crate::install_builtins`]; [`crate::TeamLocations`] does.
pub fn load_team_dir(dir: &Path, source: TeamSource) -> Result<TeamDefinition> {
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let invalid = |issues: Vec<Issue>| Error::Invalid {
        name: folder.clone(),
        dir: dir.to_path_buf(),
        issues,
    };
    if let Err(problem) = check_name(&folder) {
        return Err(invalid(vec![Issue::new(
            ".",
            IssueKind::InvalidName,
            format!("the folder name {folder:?} is not a valid team name: {problem}"),
        )]));
    }
    match files::entry(dir).map_err(|e| Error::io("inspect", dir, e))? {
        Entry::Dir => {}
        Entry::Missing => {
            return Err(Error::NotFound {
                name: folder,
                searched: vec![dir.to_path_buf()],
            })
        }
        Entry::File | Entry::Other => {
            return Err(invalid(vec![Issue::new(
                ".",
                IssueKind::NotRegular,
                "the team folder is not a folder (symbolic links are not followed)".into(),
            )]))
        }
    }

    let mut check = Checker {
        dir,
        issues: Vec::new(),
    };
    let Some(team) = check.yaml::<TeamFile>(Path::new(TEAM_FILE), true) else {
        return Err(invalid(check.issues));
    };
    let team_display = check.display_name(TEAM_FILE, team.display_name.as_deref(), &team.name);
    check.own_name(TEAM_FILE, &team.name, &folder, "team");
    let members = check.member_list(&team.agents);
    check.team_fields(&team, &members);

    let entry = members
        .iter()
        .any(|m| m == &team.entry_agent)
        .then(|| team.entry_agent.clone());
    let mut loaded = Vec::new();
    let mut lists_ok = true;
    // Member paths go through `agents/`; a link there would lead every member elsewhere.
    let agents_usable = match files::entry(&dir.join("agents")) {
        Ok(Entry::Dir | Entry::Missing) => true,
        Ok(Entry::File | Entry::Other) | Err(_) => {
            check.push(Issue::new(
                "agents",
                IssueKind::NotRegular,
                "is not a folder (symbolic links are not followed)".into(),
            ));
            false
        }
    };
    for (index, name) in team.agents.iter().enumerate() {
        if !agents_usable {
            break;
        }
        let first = team.agents.iter().position(|a| a == name) == Some(index);
        if !first || !members.contains(name) {
            continue;
        }
        let rel = Path::new("agents").join(name);
        match files::entry(&dir.join(&rel)) {
            Ok(Entry::Dir) => {}
            Ok(Entry::Missing) => {
                check.push(
                    Issue::new(
                        TEAM_FILE,
                        IssueKind::MissingMemberFolder,
                        format!("member `{name}` has no folder agents/{name}/"),
                    )
                    .at(format!("agents[{index}]")),
                );
                continue;
            }
            Ok(Entry::File | Entry::Other) => {
                check.push(Issue::new(
                    &rel,
                    IssueKind::NotRegular,
                    "is not a folder (symbolic links are not followed)".into(),
                ));
                continue;
            }
            Err(e) => {
                check.push(Issue::new(
                    &rel,
                    IssueKind::Unreadable,
                    format!("cannot be read: {e}"),
                ));
                continue;
            }
        }
        match check.member(&rel, name, &members, entry.as_deref(), source) {
            Some(member) => loaded.push(member),
            None => lists_ok = false,
        }
    }

    let team_system = check.optional_text("team-system.md");
    let shared_prompt = check.optional_text("shared-prompt.md");
    let completion_policy = check.optional_text("completion-policy.md");

    if let (Some(entry), true, true) = (&entry, lists_ok, check.issues.is_empty()) {
        check.reachability(entry, &team.agents, &loaded);
    }
    if !check.issues.is_empty() {
        return Err(invalid(check.issues));
    }
    Ok(TeamDefinition {
        name: team.name,
        display_name: team_display,
        source,
        dir: dir.to_path_buf(),
        entry_agent: team.entry_agent,
        loop_config: team.loop_config,
        gates: team.gates,
        transcript: team.transcript,
        members: loaded,
        team_system,
        shared_prompt,
        completion_policy,
    })
}

struct Checker<'a> {
    dir: &'a Path,
    issues: Vec<Issue>,
}

impl Checker<'_> {
    fn push(&mut self, issue: Issue) {
        self.issues.push(issue);
    }

    pub(super) fn issue(&mut self, file: &str, field: String, kind: IssueKind, message: String) {
        self.push(Issue::new(file, kind, message).at(field));
    }

    /// Reads the text of `rel`; `None` (with an issue) when it cannot be used, `Some(None)`
    /// when it is absent.
    pub(super) fn text(&mut self, rel: &Path) -> Option<Option<String>> {
        match files::read_text(self.dir, rel) {
            Ok(text) => Some(text),
            Err(issue) => {
                self.push(issue);
                None
            }
        }
    }

    pub(super) fn yaml<T: serde::de::DeserializeOwned>(
        &mut self,
        rel: &Path,
        required: bool,
    ) -> Option<T> {
        let text = match self.text(rel)? {
            Some(text) => text,
            None => {
                if required {
                    self.push(Issue::new(rel, IssueKind::MissingFile, "is missing".into()));
                }
                return None;
            }
        };
        match yaml::parse(&text, rel) {
            Ok(value) => Some(value),
            Err(issue) => {
                self.push(issue);
                None
            }
        }
    }

    pub(super) fn optional_text(&mut self, rel: &str) -> String {
        self.text(Path::new(rel)).flatten().unwrap_or_default()
    }

    pub(super) fn relative(&self, path: &Path) -> PathBuf {
        path.strip_prefix(self.dir).unwrap_or(path).to_path_buf()
    }

    /// The skills crate reports `<absolute SKILL.md path>: <reason>`.
    pub(super) fn split_skill_error(&self, rel: &Path, error: &str) -> (PathBuf, String) {
        let prefix = format!("{}{}", self.dir.display(), std::path::MAIN_SEPARATOR);
        let rest = error.strip_prefix(&prefix).unwrap_or(error);
        match rest.find("SKILL.md: ") {
            Some(at) => (
                PathBuf::from(&rest[..at + "SKILL.md".len()]),
                rest[at + "SKILL.md: ".len()..].to_string(),
            ),
            None => (rel.to_path_buf(), rest.to_string()),
        }
    }
}
