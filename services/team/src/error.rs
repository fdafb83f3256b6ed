//! The crate's error type and the validation issues an invalid team is reported with.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::name::NameProblem;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong with a team operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A team name that is not a safe folder name (see [`crate::check_name`]).
    #[error("invalid team name {name:?}: {problem}")]
    InvalidName { name: String, problem: NameProblem },
    /// No location holds a team of that name.
    #[error("no team named `{name}` (looked in {})", join_paths(searched))]
    NotFound {
        name: String,
        /// The folders looked at, in lookup order.
        searched: Vec<PathBuf>,
    },
    /// The team folder exists but its definition is broken; every issue found is listed.
    #[error("team `{name}` ({}) is invalid:{}", dir.display(), IssueList(issues))]
    Invalid {
        name: String,
        dir: PathBuf,
        issues: Vec<Issue>,
    },
    /// `create_team` refuses to overwrite a team.
    #[error("a team named `{name}` already exists at {}", path.display())]
    AlreadyExists { name: String, path: PathBuf },
    /// A display name `create_team` cannot use.
    #[error("invalid display name: {0}")]
    InvalidDisplayName(&'static str),
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }

    /// The validation issues, when the error is [`Error::Invalid`].
    pub fn issues(&self) -> &[Issue] {
        match self {
            Error::Invalid { issues, .. } => issues,
            _ => &[],
        }
    }
}

/// The kind of a validation issue; tests and callers match on it, people read
/// [`Issue::message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IssueKind {
    /// The YAML is not well formed (or the document is empty).
    Syntax,
    /// A key the schema does not have (`deny_unknown_fields`).
    UnknownField,
    /// A required key is absent.
    MissingField,
    /// A value of the wrong type (a list where a number belongs, `-1` for a count, ...).
    WrongType,
    /// A key given twice in one mapping.
    DuplicateKey,
    /// The YAML exceeds a parse budget: alias expansion, nesting depth, event or node count.
    InputLimit,
    /// The file is larger than [`crate::MAX_FILE_BYTES`].
    TooLarge,
    /// The file is not valid UTF-8.
    NotUtf8,
    /// A required file is absent.
    MissingFile,
    /// A symbolic link, device, FIFO or folder where a regular file (or a file where a
    /// folder) belongs. Team trees are read without following links.
    NotRegular,
    /// The file exists but could not be read.
    Unreadable,
    /// A name that is not a safe folder name.
    InvalidName,
    /// `name` differs from the folder it is in.
    NameMismatch,
    /// A value of the right type that is not allowed (`0` parallel agents, an empty
    /// command, a bad tool glob, an empty `system.md`, ...).
    InvalidValue,
    /// More entries than allowed (members, checks, ...).
    TooMany,
    /// The same entry twice in a list (members, `communicates_with`, `private_skills`).
    Duplicate,
    /// `entry_agent` is not among `agents`.
    EntryNotMember,
    /// A member listed in `agents` has no `agents/<name>/` folder.
    MissingMemberFolder,
    /// `communicates_with` names a member the team does not have.
    UnknownMember,
    /// `communicates_with` names the member itself.
    SelfReference,
    /// A member no message from the entry agent can reach through `communicates_with`.
    Unreachable,
    /// `private_skills` names a skill the member's `skills/` folder does not have.
    UnknownSkill,
    /// A `SKILL.md` in a member's `skills/` that cannot be used (malformed, two skills with
    /// one name, ...).
    InvalidSkill,
}

/// One problem in a team definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// The file (or folder), relative to the team folder: `team.yaml`,
    /// `agents/qa/agent.yaml`, `agents/qa/skills/plan/SKILL.md`.
    pub file: PathBuf,
    /// The field inside the file, in the form `loop.max_parallel_agents`, `agents[2]`,
    /// `communicates_with[0]`; `None` when the issue is about the file as a whole.
    pub field: Option<String>,
    pub kind: IssueKind,
    /// What is wrong, for people.
    pub message: String,
    /// 1-based line and column in `file`, when the YAML parser knows them.
    pub position: Option<(usize, usize)>,
}

impl Issue {
    pub(crate) fn new(file: impl Into<PathBuf>, kind: IssueKind, message: String) -> Self {
        Issue {
            file: file.into(),
            field: None,
            kind,
            message,
            position: None,
        }
    }

    pub(crate) fn at(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some((line, column)) = self.position {
            write!(f, " (line {line}, column {column})")?;
        }
        Ok(())
    }
}

struct IssueList<'a>(&'a [Issue]);

impl fmt::Display for IssueList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for issue in self.0 {
            write!(f, "\n  - {issue}")?;
        }
        Ok(())
    }
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
