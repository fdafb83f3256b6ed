//! The permission engine: whether a tool call runs, is refused, or needs the user.
//!
//! Order of precedence in [`PermissionEngine::decide`]:
//! 1. a matching deny rule refuses (`by: "rule"`), whatever the mode or earlier approvals;
//! 2. a session grant for exactly this tool and argument hash allows (`"session_grant"`);
//! 3. a matching allow rule allows (`"rule"`);
//! 4. the mode (`"mode"`): `bypass` allows everything; read-only tools and the
//!    [`ALWAYS_SAFE_TOOLS`] run in every mode; `accept-edits` also allows tools that edit
//!    files; anything else is [`Verdict::Ask`].
//!
//! An approval binds to the tool name and [`args_hash`] of its arguments, so a changed
//! argument needs a new approval (docs/design.md#permissions).

mod rule;
mod shell_words;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};

use rule::Purpose;
pub use rule::Rule;

use crate::error::{Error, Result};
use crate::ToolDescriptor;

/// Tools that run without asking although they are not read-only: they touch neither files
/// nor processes (`todo_write` only updates the session's task list). Kept here rather than
/// as a descriptor flag so a third-party (MCP) tool cannot declare itself safe. Deny rules
/// still apply to them.
pub const ALWAYS_SAFE_TOOLS: &[&str] = &["todo_write"];

/// How much the user is asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PermissionMode {
    /// Ask before anything that is not read-only.
    #[default]
    Ask,
    /// Allow file edits; ask for the rest (shell, network, MCP).
    AcceptEdits,
    /// Allow everything except what deny rules refuse.
    Bypass,
}

impl PermissionMode {
    /// The canonical (kebab-case) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::AcceptEdits => "accept-edits",
            Self::Bypass => "bypass",
        }
    }
}

impl FromStr for PermissionMode {
    type Err = Error;

    /// Accepts `ask`, `accept-edits` / `accept_edits` / `acceptEdits`, `bypass` /
    /// `bypassPermissions` (the last spellings are Claude Code's).
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "ask" | "default" => Ok(Self::Ask),
            "accept-edits" | "accept_edits" | "acceptEdits" => Ok(Self::AcceptEdits),
            "bypass" | "bypassPermissions" | "bypass-permissions" | "bypass_permissions" => {
                Ok(Self::Bypass)
            }
            other => Err(Error::InvalidMode(other.to_string())),
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for PermissionMode {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for PermissionMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Allow and deny rules as they appear in settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PermissionRules {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// The engine's answer for one call. `by` is what the `permission.resolved` event reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow { by: &'static str },
    Deny { by: &'static str, reason: String },
    Ask,
}

/// Parsed rules plus the project root used to normalize path arguments.
#[derive(Debug, Clone, Default)]
pub struct PermissionEngine {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    project_root: Option<PathBuf>,
}

impl PermissionEngine {
    /// Parses every rule; fails on the first invalid one.
    pub fn new(rules: &PermissionRules) -> Result<Self> {
        let (engine, errors) = Self::build(rules);
        match errors.into_iter().next() {
            Some(first) => Err(first),
            None => Ok(engine),
        }
    }

    /// Parses every rule, keeping the valid ones and returning the invalid ones so settings
    /// can warn instead of refusing to start.
    pub fn build(rules: &PermissionRules) -> (Self, Vec<Error>) {
        let mut errors = Vec::new();
        let mut parse_all = |list: &[String]| -> Vec<Rule> {
            list.iter()
                .filter_map(|text| Rule::parse(text).map_err(|e| errors.push(e)).ok())
                .collect()
        };
        let allow = parse_all(&rules.allow);
        let deny = parse_all(&rules.deny);
        (
            Self {
                allow,
                deny,
                project_root: None,
            },
            errors,
        )
    }

    /// Path rules are relative to this root. With it, path arguments are resolved exactly as
    /// the tools resolve them (symlinks followed, so a link to `.env` meets `read_file(.env)`);
    /// without it only lexical normalization applies.
    pub fn with_project_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.project_root = Some(root.into());
        self
    }

    /// Decides one call; see the module docs for the order.
    pub fn decide(
        &self,
        mode: PermissionMode,
        descriptor: &ToolDescriptor,
        args: &Value,
        session_grants: &HashSet<(String, String)>,
    ) -> Verdict {
        let tool = descriptor.name.as_str();
        let root = self.project_root.as_deref();

        if let Some(rule) = self
            .deny
            .iter()
            .find(|r| r.matches(tool, args, root, Purpose::Deny))
        {
            return Verdict::Deny {
                by: "rule",
                reason: format!("denied by rule `{}`", rule.as_str()),
            };
        }
        if !session_grants.is_empty()
            && session_grants.contains(&(tool.to_string(), args_hash(tool, args)))
        {
            return Verdict::Allow {
                by: "session_grant",
            };
        }
        if self
            .allow
            .iter()
            .any(|r| r.matches(tool, args, root, Purpose::Allow))
        {
            return Verdict::Allow { by: "rule" };
        }

        let safe = descriptor.read_only || ALWAYS_SAFE_TOOLS.contains(&tool);
        match mode {
            PermissionMode::Bypass => Verdict::Allow { by: "mode" },
            _ if safe => Verdict::Allow { by: "mode" },
            PermissionMode::AcceptEdits if descriptor.edits_files => Verdict::Allow { by: "mode" },
            PermissionMode::Ask | PermissionMode::AcceptEdits => Verdict::Ask,
        }
    }
}

/// The hash an approval binds to: sha256 (hex) of the tool name, a NUL byte, and the
/// arguments as [`canonical_json`]. Key order and formatting do not change it; any value
/// change does.
pub fn args_hash(tool: &str, args: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(tool.as_bytes());
    hasher.update([0u8]);
    hasher.update(canonical_json(args).as_bytes());
    hex::encode(hasher.finalize())
}

/// JSON with object keys sorted recursively (by UTF-8 bytes) and no whitespace. Written by
/// hand because serde_json's key order depends on a cargo feature another crate may enable.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        // Scalars have a single compact rendering already.
        scalar => out.push_str(&scalar.to_string()),
    }
}
