//! Built-in tools (docs/design.md#tools), the tool registry, and the permission engine.
//!
//! A tool never decides whether it may run: the runtime asks [`permission::PermissionEngine`]
//! first. A tool does confine itself to the project root ([`paths`]).
//!
//! - [`builtin`]: `read_file`, `write_file`, `edit_file`, `list_dir`, `glob`, `grep`, `shell`,
//!   `todo_write`, `web_fetch` (public addresses only), `web_search` (SearxNG JSON), the
//!   `browser_*` tools (headless Chromium through `lumina-browser`, docs/browser.md), and
//!   [`builtin_registry`] with all of them.
//! - [`permission`]: modes, allow/deny rules, session grants, [`permission::args_hash`].
//! - [`paths`]: resolution of path arguments inside the project root.

pub mod builtin;
pub mod error;
pub mod paths;
pub mod permission;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// What a tool needs from the session running it.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Absolute, canonical project root. Every path argument resolves inside it.
    pub project_root: PathBuf,
    /// `<AppRoot>/state/tool-results/<session_id>`: where full outputs are kept.
    pub results_dir: PathBuf,
    pub session_id: String,
    pub call_id: String,
    pub cancel: CancellationToken,
    /// Shell defaults; `shell{timeout_ms}` may lower or raise the timeout up to `max`.
    pub shell_timeout_ms: u64,
    pub shell_max_timeout_ms: u64,
    /// Bytes of output the model sees; the rest is in the full-output file.
    pub output_cap_bytes: usize,
    /// The `web_search_url` setting: the SearxNG-compatible endpoint `web_search` asks.
    pub web_search_url: Option<String>,
    /// How `shell` confines its commands (docs/sandbox.md).
    pub shell: ShellConfinement,
    /// The `browser_executable` setting: the Chromium the browser tools start (none:
    /// `chromium` and its usual names on `PATH`).
    pub browser_executable: Option<PathBuf>,
}

/// Whether `shell` confines its commands (the `shell_confinement` setting, resolved for the
/// profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfinementMode {
    /// Refuse commands unless the filesystem, the network and the limits can be confined
    /// (the cluster profile; `shell_confinement = required`).
    Required,
    /// Confine as far as the host allows; the result says what is missing (local `auto`).
    BestEffort,
    /// No sandbox; every result carries a warning (local `off`).
    Off,
}

/// The `shell` tool's sandbox settings for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellConfinement {
    pub mode: ConfinementMode,
    /// `shell_network`: whether a call may ask for the network.
    pub network_allowed: bool,
    pub limits: ShellLimits,
    /// Paths no command may reach even when they lie under a readable directory (the
    /// AppRoot): a call whose workspace contains one is refused.
    pub protected: Vec<PathBuf>,
    /// `shell_read_paths`: more directories commands may read and execute.
    pub read_only: Vec<PathBuf>,
}

impl Default for ShellConfinement {
    /// Best effort, no network, the default limits, nothing protected beyond the
    /// sandbox's own rules.
    fn default() -> Self {
        Self {
            mode: ConfinementMode::BestEffort,
            network_allowed: false,
            limits: ShellLimits::default(),
            protected: Vec::new(),
            read_only: Vec::new(),
        }
    }
}

impl ToolContext {
    /// Default shell timeout when the call gives none: 2 minutes.
    pub const DEFAULT_SHELL_TIMEOUT_MS: u64 = 120_000;
    /// Default upper bound for `shell{timeout_ms}`: 10 minutes.
    pub const DEFAULT_SHELL_MAX_TIMEOUT_MS: u64 = 600_000;
    /// Default bytes of tool output shown to the model.
    pub const DEFAULT_OUTPUT_CAP_BYTES: usize = 30_000;

    /// A context with the documented defaults and a fresh cancellation token.
    pub fn new(
        project_root: impl Into<PathBuf>,
        results_dir: impl Into<PathBuf>,
        session_id: impl Into<String>,
        call_id: impl Into<String>,
    ) -> Self {
        Self {
            project_root: project_root.into(),
            results_dir: results_dir.into(),
            session_id: session_id.into(),
            call_id: call_id.into(),
            cancel: CancellationToken::new(),
            shell_timeout_ms: Self::DEFAULT_SHELL_TIMEOUT_MS,
            shell_max_timeout_ms: Self::DEFAULT_SHELL_MAX_TIMEOUT_MS,
            output_cap_bytes: Self::DEFAULT_OUTPUT_CAP_BYTES,
            web_search_url: None,
            shell: ShellConfinement::default(),
            browser_executable: None,
        }
    }
}

/// Describes a tool to the model and the permission engine.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDescriptor {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// Read-only tools never modify anything; `ask` mode runs them without asking.
    pub read_only: bool,
    /// Edits files in the project (`accept-edits` mode allows these without asking).
    pub edits_files: bool,
}

/// A tool's result. Errors are results too (`is_error`), never panics or `Err`s: the model
/// sees the message and can correct itself.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// Structured extras: `diff` (unified diff of an edit), `exit_code`, `full_output_path`,
    /// `todos` (for `todo_write`), `truncated`.
    pub metadata: Value,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            metadata: Value::Null,
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            metadata: Value::Null,
        }
    }

    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }
}

#[async_trait]
pub trait Tool: Send + Sync + 'static {
    fn descriptor(&self) -> ToolDescriptor;

    /// Runs the tool. Invalid arguments produce an error output naming the problem.
    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput;

    /// A human preview for a permission dialog (a unified diff for edits, the command for
    /// shell). `None` when the arguments say it all.
    async fn preview(&self, _ctx: &ToolContext, _args: &Value) -> Option<String> {
        None
    }

    /// A top-level run of `session_id` ended: release what the tool kept for it (the
    /// browser tools close the session's browser and delete its profile). Must not block.
    fn run_ended(&self, _session_id: &str) {}
}

/// The set of tools a session offers, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; a later tool with the same name replaces the earlier one.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let name = tool.descriptor().name;
        self.tools.retain(|t| t.descriptor().name != name);
        self.tools.push(tool);
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools
            .iter()
            .find(|t| t.descriptor().name == name)
            .cloned()
    }

    pub fn descriptors(&self) -> Vec<ToolDescriptor> {
        self.tools.iter().map(|t| t.descriptor()).collect()
    }

    /// Tells every tool that a top-level run of `session_id` ended ([`Tool::run_ended`]).
    pub fn run_ended(&self, session_id: &str) {
        for tool in &self.tools {
            tool.run_ended(session_id);
        }
    }

    /// Tool names in registration order.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.descriptor().name).collect()
    }
}

pub use builtin::{builtin_registry, builtin_registry_with};
pub use error::{Error, Result};
/// The `shell` tool's resource limits (`shell_cpu_seconds`, `shell_memory_bytes`,
/// `shell_max_processes`, `shell_max_file_bytes`).
pub use lumina_sandbox::Limits as ShellLimits;
