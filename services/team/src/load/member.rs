//! One member: its `agent.yaml`, a remote member's `a2a` block, peers and tools.

use super::*;

impl Checker<'_> {
    /// Loads `agents/<name>/`; `None` when its `agent.yaml` could not be read (other issues
    /// of the member are still collected).
    pub(super) fn member(
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
    pub(super) fn remote(
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
    pub(super) fn remote_only(
        &mut self,
        file: &str,
        agent: &AgentFile,
        catalog: &SkillCatalog,
        rel: &Path,
    ) {
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

    pub(super) fn peers(
        &mut self,
        file: &str,
        own: &str,
        list: &[String],
        members: &[String],
    ) -> Vec<String> {
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

    pub(super) fn tools(&mut self, file: &str, list: &[String]) -> ToolPatterns {
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
}
