//! The team's own files: names, the member list, `team.yaml`'s fields, reachability.

use super::*;

impl Checker<'_> {
    /// `name` must be a valid name and equal the folder it lives in.
    pub(super) fn own_name(&mut self, file: &str, name: &str, folder: &str, what: &str) {
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

    pub(super) fn display_name(&mut self, file: &str, given: Option<&str>, name: &str) -> String {
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
    pub(super) fn member_list(&mut self, agents: &[String]) -> Vec<String> {
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

    pub(super) fn team_fields(&mut self, team: &TeamFile, members: &[String]) {
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

    /// Every member must be reachable from the entry agent: work reaches a member only as a
    /// message, so one nobody can message never works.
    pub(super) fn reachability(
        &mut self,
        entry: &str,
        agents: &[String],
        members: &[MemberDefinition],
    ) {
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
}
