//! A validated team: what [`crate::load_team_dir`] returns and the team runtime consumes.

use std::fmt;
use std::path::PathBuf;

use globset::{Glob, GlobSet, GlobSetBuilder};
use lumina_skills::Skill;

use crate::lookup::TeamSource;
use crate::spec::{GateConfig, LoopConfig, TranscriptConfig};

/// A team definition that passed validation, with every default applied.
#[derive(Debug, Clone, PartialEq)]
pub struct TeamDefinition {
    pub name: String,
    pub display_name: String,
    pub source: TeamSource,
    /// The team folder.
    pub dir: PathBuf,
    /// The member that receives the user's task and talks back to the user.
    pub entry_agent: String,
    pub loop_config: LoopConfig,
    pub gates: GateConfig,
    pub transcript: TranscriptConfig,
    /// In the order of `team.yaml` `agents`.
    pub members: Vec<MemberDefinition>,
    /// `team-system.md`: the team's charter, given to every member. Empty when absent.
    pub team_system: String,
    /// `shared-prompt.md`: conventions every member follows (formats, tone, where files go).
    /// Empty when absent.
    pub shared_prompt: String,
    /// `completion-policy.md`: what "done" means, for the entry agent and the gate. Empty
    /// when absent.
    pub completion_policy: String,
}

impl TeamDefinition {
    /// The member called `name`.
    pub fn member(&self, name: &str) -> Option<&MemberDefinition> {
        self.members.iter().find(|m| m.name == name)
    }

    /// The entry member (always present in a validated definition).
    pub fn entry(&self) -> Option<&MemberDefinition> {
        self.member(&self.entry_agent)
    }

    /// Whether `from` may send a message to `to`.
    pub fn can_message(&self, from: &str, to: &str) -> bool {
        self.member(from)
            .is_some_and(|m| m.communicates_with.iter().any(|n| n == to))
    }
}

/// One member of a validated team.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberDefinition {
    pub name: String,
    pub display_name: String,
    /// Members this one may message (defaults applied; never itself).
    pub communicates_with: Vec<String>,
    /// A model override; `None` uses the session's model.
    pub model: Option<String>,
    pub tools: ToolPatterns,
    pub max_turns_per_task: u32,
    /// `system.md`: the member's own prompt.
    pub system_prompt: String,
    /// The private skills enabled for this member, in `private_skills` order (or by name
    /// when all are enabled by default).
    pub skills: Vec<Skill>,
    /// The member's folder, `<team>/agents/<name>/`.
    pub dir: PathBuf,
    /// `a2a`: the member is a remote A2A agent; its `tools`, `model`, turn limit, skills
    /// and `system.md` are the remote agent's business.
    pub remote: Option<RemoteAgent>,
}

/// Where a remote member (`agent.yaml` `a2a`) runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteAgent {
    /// A peer of the `a2a_peers` setting, by name.
    Peer(String),
    /// An agent URL (allowed only under an `a2a_allowed_urls` prefix).
    Url(String),
}

impl RemoteAgent {
    /// What `a2a_delegate` would be given as `agent`: the peer's name or the URL.
    pub fn agent(&self) -> &str {
        match self {
            RemoteAgent::Peer(name) | RemoteAgent::Url(name) => name,
        }
    }
}

impl MemberDefinition {
    /// Whether the member is a remote A2A agent.
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// Whether the member may use the tool called `tool`.
    pub fn allows_tool(&self, tool: &str) -> bool {
        self.tools.matches(tool)
    }
}

/// The tool names and globs of `agent.yaml` `tools`, compiled. Globs are case-sensitive;
/// `*` and `?` match any characters of a tool name, `[...]` a character class.
#[derive(Clone)]
pub struct ToolPatterns {
    patterns: Vec<String>,
    set: GlobSet,
}

impl ToolPatterns {
    /// Compiles `patterns`; the error names the index and the reason of the first bad one.
    pub fn new(patterns: Vec<String>) -> Result<Self, (usize, String)> {
        let mut builder = GlobSetBuilder::new();
        for (i, pattern) in patterns.iter().enumerate() {
            let glob = Glob::new(pattern).map_err(|e| (i, e.kind().to_string()))?;
            builder.add(glob);
        }
        let set = builder.build().map_err(|e| (0, e.to_string()))?;
        Ok(ToolPatterns { patterns, set })
    }

    /// Every tool (`["*"]`), the default.
    pub fn all() -> Self {
        // `*` always compiles; the fallback only exists to avoid a panic path.
        Self::new(vec!["*".into()]).unwrap_or_else(|_| ToolPatterns {
            patterns: vec!["*".into()],
            set: GlobSet::empty(),
        })
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    pub fn matches(&self, tool: &str) -> bool {
        self.set.is_match(tool)
    }
}

impl PartialEq for ToolPatterns {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl fmt::Debug for ToolPatterns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ToolPatterns").field(&self.patterns).finish()
    }
}
