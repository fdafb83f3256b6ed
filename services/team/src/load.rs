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

    fn issue(&mut self, file: &str, field: String, kind: IssueKind, message: String) {
        self.push(Issue::new(file, kind, message).at(field));
    }

    /// Reads the text of `rel`; `None` (with an issue) when it cannot be used, `Some(None)`
    /// when it is absent.
    fn text(&mut self, rel: &Path) -> Option<Option<String>> {
        match files::read_text(self.dir, rel) {
            Ok(text) => Some(text),
            Err(issue) => {
                self.push(issue);
                None
            }
        }
    }

    fn yaml<T: serde::de::DeserializeOwned>(&mut self, rel: &Path, required: bool) -> Option<T> {
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

    fn optional_text(&mut self, rel: &str) -> String {
        self.text(Path::new(rel)).flatten().unwrap_or_default()
    }

    /// `name` must be a valid name and equal the folder it lives in.
    fn own_name(&mut self, file: &str, name: &str, folder: &str, what: &str) {
        if let Err(problem) = check_name(name) {
            self.issue(
                file,
                "name".into(),
                IssueKind::InvalidName,
                format!("{name:?} is not a valid {what} name: {problem}"),
            );
        } else if name != folder {
            self.issue(
                file,
                "name".into(),
                IssueKind::NameMismatch,
                format!("`{name}` differs from the {what} folder name `{folder}`"),
            );
        }
    }

    fn display_name(&mut self, file: &str, given: Option<&str>, name: &str) -> String {
        let Some(given) = given else {
            return name.to_string();
        };
        match check_label(given) {
            Ok(label) => label,
            Err(reason) => {
                self.issue(
                    file,
                    "display_name".into(),
                    IssueKind::InvalidValue,
                    reason.to_string(),
                );
                name.to_string()
            }
        }
    }

    /// The valid, distinct member names of `team.yaml` `agents`.
    fn member_list(&mut self, agents: &[String]) -> Vec<String> {
        if agents.is_empty() {
            self.issue(
                TEAM_FILE,
                "agents".into(),
                IssueKind::InvalidValue,
                "a team needs at least one member".into(),
            );
        }
        if agents.len() > MAX_MEMBERS {
            self.issue(
                TEAM_FILE,
                "agents".into(),
                IssueKind::TooMany,
                format!("{} members; at most {MAX_MEMBERS}", agents.len()),
            );
        }
        let mut members: Vec<String> = Vec::new();
        for (i, name) in agents.iter().enumerate() {
            if let Err(problem) = check_name(name) {
                self.issue(
                    TEAM_FILE,
                    format!("agents[{i}]"),
                    IssueKind::InvalidName,
                    format!("{name:?} is not a valid member name: {problem}"),
                );
            } else if let Some(first) = agents.iter().position(|a| a == name).filter(|&p| p < i) {
                self.issue(
                    TEAM_FILE,
                    format!("agents[{i}]"),
                    IssueKind::Duplicate,
                    format!("member `{name}` is listed twice (first as agents[{first}])"),
                );
            } else {
                members.push(name.clone());
            }
        }
        members
    }

    fn team_fields(&mut self, team: &TeamFile, members: &[String]) {
        if let Err(problem) = check_name(&team.entry_agent) {
            self.issue(
                TEAM_FILE,
                "entry_agent".into(),
                IssueKind::InvalidName,
                format!(
                    "{:?} is not a valid member name: {problem}",
                    team.entry_agent
                ),
            );
        } else if !members.contains(&team.entry_agent) {
            self.issue(
                TEAM_FILE,
                "entry_agent".into(),
                IssueKind::EntryNotMember,
                format!("`{}` is not one of `agents`", team.entry_agent),
            );
        }
        let parallel = team.loop_config.max_parallel_agents;
        if parallel == 0 || parallel > MAX_PARALLEL_AGENTS {
            self.issue(
                TEAM_FILE,
                "loop.max_parallel_agents".into(),
                IssueKind::InvalidValue,
                format!("{parallel}: must be between 1 and {MAX_PARALLEL_AGENTS}"),
            );
        }
        let checks = &team.gates.checks;
        if checks.len() > MAX_CHECKS {
            self.issue(
                TEAM_FILE,
                "gates.checks".into(),
                IssueKind::TooMany,
                format!("{} checks; at most {MAX_CHECKS}", checks.len()),
            );
        }
        for (i, command) in checks.iter().enumerate() {
            let reason = if command.trim().is_empty() {
                Some("the command is empty".to_string())
            } else if command.contains('\0') {
                Some("the command contains a NUL character".to_string())
            } else if command.len() > MAX_CHECK_BYTES {
                Some(format!(
                    "the command is longer than {MAX_CHECK_BYTES} bytes"
                ))
            } else {
                None
            };
            if let Some(reason) = reason {
                self.issue(
                    TEAM_FILE,
                    format!("gates.checks[{i}]"),
                    IssueKind::InvalidValue,
                    reason,
                );
            }
        }
        let policy = &team.gates.task_policy;
        if policy.require_criteria && !team.gates.require_contract {
            self.issue(
                TEAM_FILE,
                "gates.task_policy.require_criteria".into(),
                IssueKind::InvalidValue,
                "needs gates.require_contract: true (the criteria are the contract's)".into(),
            );
        }
        let chars = policy.max_task_chars;
        if chars != 0 && !(MIN_TASK_CHARS..=MAX_TASK_CHARS).contains(&chars) {
            self.issue(
                TEAM_FILE,
                "gates.task_policy.max_task_chars".into(),
                IssueKind::InvalidValue,
                format!(
                    "{chars}: must be 0 (no bound) or between {MIN_TASK_CHARS} and {MAX_TASK_CHARS}"
                ),
            );
        }
    }

    /// Loads `agents/<name>/`; `None` when its `agent.yaml` could not be read (other issues
    /// of the member are still collected).
    fn member(
        &mut self,
        rel: &Path,
        name: &str,
        members: &[String],
        entry: Option<&str>,
        source: TeamSource,
    ) -> Option<MemberDefinition> {
        let file_path = rel.join("agent.yaml");
        let file = file_path.display().to_string();
        let agent = self.yaml::<AgentFile>(&file_path, true);
        let declared_remote = agent.as_ref().is_some_and(|a| a.a2a.is_some());
        let system_rel = rel.join("system.md");
        let system_prompt = match self.text(&system_rel) {
            // A remote agent has its own prompt: `system.md` is optional and not sent.
            Some(_) if declared_remote => None,
            Some(Some(text)) if text.trim().is_empty() => {
                self.push(Issue::new(
                    &system_rel,
                    IssueKind::InvalidValue,
                    "is empty; a member needs a system prompt".into(),
                ));
                None
            }
            Some(Some(text)) => Some(text),
            Some(None) => {
                self.push(Issue::new(
                    &system_rel,
                    IssueKind::MissingFile,
                    "is missing".into(),
                ));
                None
            }
            None => None,
        };
        let catalog = self.skills(&rel.join("skills"), source);
        let agent = agent?;
        let remote = agent
            .a2a
            .as_ref()
            .and_then(|a2a| self.remote(&file, name, entry, a2a));
        if agent.a2a.is_some() {
            self.remote_only(&file, &agent, &catalog, rel);
        }

        self.own_name(&file, &agent.name, name, "member");
        let display_name = self.display_name(&file, agent.display_name.as_deref(), name);
        let communicates_with = match &agent.communicates_with {
            Some(list) => self.peers(&file, name, list, members),
            None if Some(name) == entry => members.iter().filter(|m| *m != name).cloned().collect(),
            None => entry.map(str::to_string).into_iter().collect(),
        };
        let model = agent.model.as_deref().and_then(|model| {
            match check_label(model).and_then(|m| no_whitespace(m, "a model name")) {
                Ok(model) => Some(model),
                Err(reason) => {
                    self.issue(
                        &file,
                        "model".into(),
                        IssueKind::InvalidValue,
                        reason.to_string(),
                    );
                    None
                }
            }
        });
        let tools = match &agent.tools {
            None => ToolPatterns::all(),
            Some(list) => self.tools(&file, list),
        };
        let max_turns = agent
            .max_turns_per_task
            .unwrap_or(DEFAULT_MAX_TURNS_PER_TASK);
        if max_turns == 0 || max_turns > MAX_TURNS_PER_TASK {
            self.issue(
                &file,
                "max_turns_per_task".into(),
                IssueKind::InvalidValue,
                format!("{max_turns}: must be between 1 and {MAX_TURNS_PER_TASK}"),
            );
        }
        let skills = match &agent.private_skills {
            _ if agent.a2a.is_some() => Vec::new(),
            None => catalog.skills.clone(),
            Some(names) => self.private_skills(&file, rel, names, &catalog),
        };
        Some(MemberDefinition {
            name: name.to_string(),
            display_name,
            communicates_with,
            model,
            tools,
            max_turns_per_task: max_turns,
            system_prompt: system_prompt.unwrap_or_default(),
            skills,
            dir: self.dir.join(rel),
            remote,
        })
    }

    /// `a2a`: exactly one of `peer` (a peer name) and `url` (an http(s) URL); never the
    /// entry agent nor a gate member, which run the team's own tools here.
    fn remote(
        &mut self,
        file: &str,
        name: &str,
        entry: Option<&str>,
        a2a: &A2aFile,
    ) -> Option<RemoteAgent> {
        let mut fine = true;
        if Some(name) == entry {
            fine = false;
            self.issue(
                file,
                "a2a".into(),
                IssueKind::InvalidValue,
                format!(
                    "the entry agent `{name}` cannot be a remote A2A agent: it runs the team here"
                ),
            );
        }
        if GATE_MEMBERS.contains(&name) {
            fine = false;
            self.issue(
                file,
                "a2a".into(),
                IssueKind::InvalidValue,
                format!(
                    "`{name}` is a gate member (its verdict is a team tool) and cannot be a \
                     remote A2A agent"
                ),
            );
        }
        let remote = match (&a2a.peer, &a2a.url) {
            (Some(_), Some(_)) => {
                self.issue(
                    file,
                    "a2a".into(),
                    IssueKind::InvalidValue,
                    "give either `peer` or `url`, not both".into(),
                );
                None
            }
            (None, None) => {
                self.issue(
                    file,
                    "a2a".into(),
                    IssueKind::InvalidValue,
                    "give `peer` (a peer of the a2a_peers setting) or `url`".into(),
                );
                None
            }
            (Some(peer), None) => {
                if lumina_config::is_token(peer) {
                    Some(RemoteAgent::Peer(peer.clone()))
                } else {
                    self.issue(
                        file,
                        "a2a.peer".into(),
                        IssueKind::InvalidName,
                        format!(
                            "{peer:?} is not a peer name (1-128 characters of A-Z a-z 0-9 . _ -)"
                        ),
                    );
                    None
                }
            }
            (None, Some(url)) => match check_url(url) {
                Ok(()) => Some(RemoteAgent::Url(url.clone())),
                Err(reason) => {
                    self.issue(
                        file,
                        "a2a.url".into(),
                        IssueKind::InvalidValue,
                        reason.to_string(),
                    );
                    None
                }
            },
        };
        remote.filter(|_| fine)
    }

    /// The fields a remote member cannot use: the remote agent picks its own tools, model,
    /// turns and skills.
    fn remote_only(&mut self, file: &str, agent: &AgentFile, catalog: &SkillCatalog, rel: &Path) {
        let set = [
            ("model", agent.model.is_some()),
            ("tools", agent.tools.is_some()),
            ("max_turns_per_task", agent.max_turns_per_task.is_some()),
            ("private_skills", agent.private_skills.is_some()),
        ];
        for (field, given) in set {
            if given {
                self.issue(
                    file,
                    field.into(),
                    IssueKind::InvalidValue,
                    "has no effect on a remote A2A member (`a2a`): the remote agent uses its \
                     own; remove it"
                        .into(),
                );
            }
        }
        if !catalog.skills.is_empty() {
            self.push(Issue::new(
                rel.join("skills"),
                IssueKind::InvalidValue,
                "a remote A2A member (`a2a`) has no private skills; remove the folder".into(),
            ));
        }
    }

    fn peers(&mut self, file: &str, own: &str, list: &[String], members: &[String]) -> Vec<String> {
        let mut peers: Vec<String> = Vec::new();
        for (i, peer) in list.iter().enumerate() {
            let field = format!("communicates_with[{i}]");
            if let Err(problem) = check_name(peer) {
                let message = format!("{peer:?} is not a valid member name: {problem}");
                self.issue(file, field, IssueKind::InvalidName, message);
            } else if peer == own {
                let message = format!("`{peer}` is this member itself");
                self.issue(file, field, IssueKind::SelfReference, message);
            } else if !members.iter().any(|m| m == peer) {
                let message = format!("`{peer}` is not a member of the team");
                self.issue(file, field, IssueKind::UnknownMember, message);
            } else if peers.contains(peer) {
                let message = format!("`{peer}` is listed twice");
                self.issue(file, field, IssueKind::Duplicate, message);
            } else {
                peers.push(peer.clone());
            }
        }
        peers
    }

    fn tools(&mut self, file: &str, list: &[String]) -> ToolPatterns {
        if list.len() > MAX_TOOL_PATTERNS {
            self.issue(
                file,
                "tools".into(),
                IssueKind::TooMany,
                format!("{} patterns; at most {MAX_TOOL_PATTERNS}", list.len()),
            );
            return ToolPatterns::all();
        }
        let mut valid = true;
        for (i, pattern) in list.iter().enumerate() {
            let checked = check_label(pattern)
                .and_then(|p| no_whitespace(p, "a tool"))
                .and_then(|p| {
                    ToolPatterns::new(vec![p])
                        .map_err(|(_, reason)| LabelProblem::ToolGlob(reason.to_string()))
                });
            if let Err(reason) = checked {
                valid = false;
                self.issue(
                    file,
                    format!("tools[{i}]"),
                    IssueKind::InvalidValue,
                    reason.to_string(),
                );
            }
        }
        let compiled = valid
            .then(|| ToolPatterns::new(list.to_vec()).ok())
            .flatten();
        compiled.unwrap_or_else(ToolPatterns::all)
    }

    /// The member's `skills/` folder through the skills crate's own discovery, after making
    /// sure nothing in it is a symbolic link (which that discovery would follow).
    fn skills(&mut self, rel: &Path, source: TeamSource) -> SkillCatalog {
        let dir = self.dir.join(rel);
        match files::entry(&dir) {
            Ok(Entry::Missing) => return SkillCatalog::default(),
            Ok(Entry::Dir) => {}
            Ok(Entry::File | Entry::Other) => {
                self.push(Issue::new(
                    rel,
                    IssueKind::NotRegular,
                    "is not a folder (symbolic links are not followed)".into(),
                ));
                return SkillCatalog::default();
            }
            Err(e) => {
                self.push(Issue::new(rel, IssueKind::Unreadable, format!("{e}")));
                return SkillCatalog::default();
            }
        }
        let mut linked = false;
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let entry_rel = rel.join(entry.file_name());
            let skill_file = entry_rel.join("SKILL.md");
            let kinds = (
                files::entry(&self.dir.join(&entry_rel)),
                files::entry(&self.dir.join(&skill_file)),
            );
            let bad = match kinds {
                (Ok(Entry::Other), _) => Some(entry_rel),
                (Ok(Entry::Dir), Ok(Entry::Other)) => Some(skill_file),
                _ => None,
            };
            if let Some(bad) = bad {
                linked = true;
                self.push(Issue::new(
                    bad,
                    IssueKind::NotRegular,
                    "is a symbolic link or special file; skills in a team are not followed \
                     through links"
                        .into(),
                ));
            }
        }
        if linked {
            return SkillCatalog::default();
        }
        let catalog = SkillCatalog::from_locations(&[(skill_location(source), dir)]);
        for error in &catalog.errors {
            let (file, reason) = self.split_skill_error(rel, error);
            self.push(Issue::new(file, IssueKind::InvalidSkill, reason));
        }
        for conflict in &catalog.conflicts {
            let others: Vec<String> = conflict
                .shadowed
                .iter()
                .map(|p| self.relative(p).display().to_string())
                .collect();
            self.push(Issue::new(
                self.relative(&conflict.winner),
                IssueKind::InvalidSkill,
                format!(
                    "skill name `{}` is also used by {}",
                    conflict.name,
                    others.join(", ")
                ),
            ));
        }
        catalog
    }

    fn private_skills(
        &mut self,
        file: &str,
        rel: &Path,
        names: &[String],
        catalog: &SkillCatalog,
    ) -> Vec<Skill> {
        let mut skills: Vec<Skill> = Vec::new();
        for (i, raw) in names.iter().enumerate() {
            let field = format!("private_skills[{i}]");
            let Some(name) = normalize_name(raw) else {
                let message = format!("{raw:?} is not a valid skill name");
                self.issue(file, field, IssueKind::InvalidName, message);
                continue;
            };
            match catalog.get(&name) {
                None => {
                    let found: Vec<&str> = catalog.skills.iter().map(|s| s.name.as_str()).collect();
                    let found = if found.is_empty() {
                        "it has none".to_string()
                    } else {
                        format!("it has: {}", found.join(", "))
                    };
                    let message = format!(
                        "no skill `{name}` in {}/ ({found})",
                        rel.join("skills").display()
                    );
                    self.issue(file, field, IssueKind::UnknownSkill, message);
                }
                Some(_) if skills.iter().any(|s| s.name == name) => {
                    let message = format!("skill `{name}` is listed twice");
                    self.issue(file, field, IssueKind::Duplicate, message);
                }
                Some(skill) => skills.push(skill.clone()),
            }
        }
        skills
    }

    /// Every member must be reachable from the entry agent: work reaches a member only as a
    /// message, so one nobody can message never works.
    fn reachability(&mut self, entry: &str, agents: &[String], members: &[MemberDefinition]) {
        let edges: HashMap<&str, &[String]> = members
            .iter()
            .map(|m| (m.name.as_str(), m.communicates_with.as_slice()))
            .collect();
        let mut seen: BTreeSet<&str> = BTreeSet::from([entry]);
        let mut queue = VecDeque::from([entry]);
        while let Some(current) = queue.pop_front() {
            for next in edges.get(current).copied().unwrap_or_default() {
                if seen.insert(next.as_str()) {
                    queue.push_back(next.as_str());
                }
            }
        }
        for (i, name) in agents.iter().enumerate() {
            if !seen.contains(name.as_str()) {
                self.issue(
                    TEAM_FILE,
                    format!("agents[{i}]"),
                    IssueKind::Unreachable,
                    format!(
                        "no chain of communicates_with leads from the entry agent `{entry}` \
                         to `{name}`"
                    ),
                );
            }
        }
    }

    fn relative(&self, path: &Path) -> PathBuf {
        path.strip_prefix(self.dir).unwrap_or(path).to_path_buf()
    }

    /// The skills crate reports `<absolute SKILL.md path>: <reason>`.
    fn split_skill_error(&self, rel: &Path, error: &str) -> (PathBuf, String) {
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

/// A display name, model name or tool pattern: trimmed, non-empty, at most
/// [`MAX_LABEL_CHARS`], without control characters.
pub(crate) fn check_label(value: &str) -> Result<String, LabelProblem> {
    let value = value.trim();
    if value.is_empty() {
        return Err(LabelProblem::Empty);
    }
    if value.chars().count() > MAX_LABEL_CHARS {
        return Err(LabelProblem::TooLong);
    }
    if value.chars().any(char::is_control) {
        return Err(LabelProblem::Control);
    }
    Ok(value.to_string())
}

/// Why a label of a definition is refused (the issue's text).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LabelProblem {
    #[error("is empty")]
    Empty,
    #[error("is longer than {} characters", MAX_LABEL_CHARS)]
    TooLong,
    #[error("contains a control character")]
    Control,
    #[error("{0:?} contains whitespace; expected {1} name")]
    Whitespace(String, &'static str),
    #[error("not a valid tool glob: {0}")]
    ToolGlob(String),
}

fn no_whitespace(value: String, what: &'static str) -> Result<String, LabelProblem> {
    if value.chars().any(char::is_whitespace) {
        Err(LabelProblem::Whitespace(value, what))
    } else {
        Ok(value)
    }
}

/// `a2a.url`: an http:// or https:// URL with a host, without whitespace or control
/// characters, at most [`MAX_URL_BYTES`]. Whether it may be called is the settings' word
/// (`a2a_allowed_urls`), checked at dispatch.
fn check_url(url: &str) -> Result<(), UrlProblem> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let Some(rest) = rest else {
        return Err(UrlProblem::Scheme(url.to_owned()));
    };
    if url.len() > MAX_URL_BYTES {
        return Err(UrlProblem::TooLong);
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlProblem::Whitespace(url.to_owned()));
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.contains('@') {
        return Err(UrlProblem::Host(url.to_owned()));
    }
    Ok(())
}

/// Why an `a2a.url` is refused (the issue's text).
#[derive(Debug, thiserror::Error)]
enum UrlProblem {
    #[error("{0:?} is not an http:// or https:// URL")]
    Scheme(String),
    #[error("is longer than {MAX_URL_BYTES} bytes")]
    TooLong,
    #[error("{0:?} contains whitespace or a control character")]
    Whitespace(String),
    #[error("{0:?} has no host (or carries credentials, which belong in a2a_peers)")]
    Host(String),
}

/// Private skills are labelled with the layer their team came from.
fn skill_location(source: TeamSource) -> SkillLocation {
    match source {
        TeamSource::Project => SkillLocation::ProjectPrivate,
        TeamSource::User => SkillLocation::User,
        TeamSource::Builtin => SkillLocation::Builtin,
    }
}
