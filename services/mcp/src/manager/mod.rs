//! [`McpManager`]: the MCP servers of each project, shared by every session of the backend.
//!
//! Per project root the manager re-reads the two config files on each use (cheap; edits
//! apply without a restart), keeps one [`slot::ServerSlot`] per server definition (a changed
//! definition gets a fresh slot, and needs trust again when it is a project server), and
//! connects trusted servers lazily and in parallel when their tools are first asked for.

mod auth;
mod sign_in;
pub(crate) mod slot;

pub use sign_in::{PendingSignIn, SignInEnd};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lumina_config::AppRoot;
use lumina_tools::Tool;

use crate::client::TransportKind;
use crate::config::{self, ConfigError, ServerSource};
use crate::tool::{unique_tool_name, McpTool};
use crate::trust::TrustStore;
use crate::Error;
use slot::ServerSlot;

/// Manager settings (the runtime maps its settings onto these).
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    pub app_root: AppRoot,
    /// Time to connect one server (spawn/handshake/discovery). Default 30 s.
    pub connect_timeout: Duration,
    /// The `mcp_tool_timeout_ms` setting: one tool call's limit. Default 120 000.
    pub mcp_tool_timeout_ms: u64,
    /// Timeout of `tools/list` and lifecycle requests. Default 30 s.
    pub request_timeout: Duration,
    /// Restarts of a crashed/failed server allowed per minute. Default 3.
    pub max_restarts_per_minute: usize,
    /// When an HTTP server needs OAuth authorization, ask a person: a loopback listener
    /// receives the redirect and the authorization URL is logged and shown as the server's
    /// `/mcp` state. Off (headless, cluster): such servers are `failed` with "needs
    /// authorization" unless stored tokens still work. Default on.
    pub interactive_auth: bool,
    /// How long an interactive sign-in waits for the browser. Default 5 min.
    pub auth_timeout: Duration,
    /// The HTTPS URL of Lumina's OAuth Client ID Metadata Document, used as `client_id` by
    /// authorization servers that support it; without one, dynamic client registration is
    /// used. Default none.
    pub client_metadata_url: Option<String>,
}

impl ManagerOptions {
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
    pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 120_000;
    pub const DEFAULT_MAX_RESTARTS_PER_MINUTE: usize = 3;
    pub const DEFAULT_AUTH_TIMEOUT: Duration = Duration::from_secs(5 * 60);

    /// The documented defaults.
    pub fn new(app_root: AppRoot) -> Self {
        Self {
            app_root,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            mcp_tool_timeout_ms: Self::DEFAULT_TOOL_TIMEOUT_MS,
            request_timeout: Duration::from_secs(30),
            max_restarts_per_minute: Self::DEFAULT_MAX_RESTARTS_PER_MINUTE,
            interactive_auth: true,
            auth_timeout: Self::DEFAULT_AUTH_TIMEOUT,
            client_metadata_url: None,
        }
    }
}

/// A server's state in `/mcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Trusted, connection not (yet) established.
    Connecting,
    Connected,
    Failed(String),
    /// A project server the user has not trusted (with this definition).
    Untrusted,
    /// `"disabled": true` in its definition.
    Disabled,
}

/// One row of `/mcp`. `target` is the raw command line or URL (`${VAR}` unexpanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    pub name: String,
    pub source: ServerSource,
    pub transport: TransportKind,
    pub state: ServerState,
    pub protocol_version: Option<String>,
    /// Tool names as the model sees them (`mcp__<server>__<tool>`).
    pub tools: Vec<String>,
    pub target: String,
}

/// Cheap to clone; share one across sessions.
#[derive(Clone)]
pub struct McpManager {
    inner: Arc<Inner>,
}

struct Inner {
    opts: ManagerOptions,
    trust: TrustStore,
    projects: Mutex<HashMap<PathBuf, Arc<Project>>>,
}

#[derive(Default)]
struct Project {
    slots: Mutex<BTreeMap<String, Arc<ServerSlot>>>,
    errors: Mutex<Vec<ConfigError>>,
}

impl McpManager {
    pub fn new(opts: ManagerOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                trust: TrustStore::new(opts.app_root.clone()),
                opts,
                projects: Mutex::new(HashMap::new()),
            }),
        }
    }

    pub fn trust_store(&self) -> &TrustStore {
        &self.inner.trust
    }

    /// The tools of every usable server of the project, connecting servers as needed (in
    /// parallel). Servers that fail to connect contribute no tools; see [`Self::status`].
    pub async fn tools(&self, project_root: &Path) -> Vec<Arc<dyn Tool>> {
        let slots: Vec<_> = self
            .sync(project_root)
            .into_iter()
            .filter(|s| s.usable())
            .collect();
        let lists = futures::future::join_all(slots.iter().map(|s| s.tools())).await;
        let timeout = Duration::from_millis(self.inner.opts.mcp_tool_timeout_ms);
        let mut taken = HashSet::new();
        let mut out: Vec<Arc<dyn Tool>> = Vec::new();
        for (slot, list) in slots.iter().zip(lists) {
            for info in list.unwrap_or_default() {
                let Some(name) = unique_tool_name(slot.name(), &info.name, &taken) else {
                    tracing::warn!(server = %slot.name(), tool = %info.name, "skipping mcp tool: name clash");
                    continue;
                };
                taken.insert(name.clone());
                out.push(Arc::new(McpTool {
                    slot: slot.clone(),
                    info,
                    name,
                    timeout,
                }));
            }
        }
        out
    }

    /// Every configured server of the project with its state. Trusted servers not yet
    /// connected start connecting in the background.
    pub async fn status(&self, project_root: &Path) -> Vec<ServerStatus> {
        let slots = self.sync(project_root);
        for slot in slots.iter().filter(|s| s.usable() && s.is_idle()) {
            let slot = slot.clone();
            tokio::spawn(async move {
                let _ = slot.tools().await;
            });
        }
        slots
            .iter()
            .map(|s| ServerStatus {
                name: s.config.name.clone(),
                source: s.config.source,
                transport: s.transport(),
                state: s.state(),
                protocol_version: s.protocol_version(),
                tools: s
                    .tool_names()
                    .iter()
                    .map(|t| crate::tool::tool_name(&s.config.name, t))
                    .collect(),
                target: s.config.def.display(),
            })
            .collect()
    }

    /// Problems in the project's or the user's MCP config files (for `/mcp`).
    pub async fn config_errors(&self, project_root: &Path) -> Vec<String> {
        self.sync(project_root);
        let project = self.project(project_root);
        let errors = project.errors.lock().map(|e| e.clone()).unwrap_or_default();
        errors.iter().map(ToString::to_string).collect()
    }

    /// Trusts the project server `name` as currently defined; the next [`Self::tools`]
    /// connects it. User servers need no trust: a name that is not a project server is
    /// [`Error::UnknownServer`].
    pub fn trust(&self, project_root: &Path, name: &str) -> Result<(), Error> {
        let loaded = config::load(project_root, &self.inner.opts.app_root);
        // User servers are trusted already; only a project server can be trusted.
        let server = loaded
            .servers
            .iter()
            .find(|s| s.name == name && s.source == ServerSource::Project)
            .ok_or_else(|| Error::UnknownServer(name.to_string()))?;
        self.inner
            .trust
            .trust(project_root, name, &server.def)
            .map_err(|e| Error::Trust(e.to_string()))
    }

    /// The process id of a connected stdio server (diagnostics).
    pub fn server_pid(&self, project_root: &Path, name: &str) -> Option<u32> {
        let project = self.project(project_root);
        let slots = project.slots.lock().ok()?;
        slots.get(name).and_then(|s| s.process_id())
    }

    /// Closes every server of every project.
    pub async fn shutdown(&self) {
        let projects: Vec<_> = self
            .inner
            .projects
            .lock()
            .map(|mut p| p.drain().map(|(_, v)| v).collect())
            .unwrap_or_default();
        let slots: Vec<_> = projects
            .iter()
            .flat_map(|p| {
                p.slots
                    .lock()
                    .map(|mut s| std::mem::take(&mut *s).into_values().collect::<Vec<_>>())
                    .unwrap_or_default()
            })
            .collect();
        futures::future::join_all(slots.iter().map(|s| s.close())).await;
    }

    fn project(&self, project_root: &Path) -> Arc<Project> {
        let mut projects = self
            .inner
            .projects
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        projects
            .entry(project_root.to_path_buf())
            .or_default()
            .clone()
    }

    /// Re-reads the config, updates the slots (new, changed, removed definitions; trust),
    /// and returns them sorted by name.
    fn sync(&self, project_root: &Path) -> Vec<Arc<ServerSlot>> {
        let loaded = config::load(project_root, &self.inner.opts.app_root);
        let project = self.project(project_root);
        if let Ok(mut errors) = project.errors.lock() {
            *errors = loaded.errors;
        }
        let mut slots = project.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut stale = Vec::new();
        let mut next = BTreeMap::new();
        for server in loaded.servers {
            let trusted = self.inner.trust.allows(project_root, &server);
            let slot = match slots.remove(&server.name) {
                Some(slot)
                    if slot.fingerprint == server.def.fingerprint()
                        && slot.config.source == server.source =>
                {
                    slot
                }
                old => {
                    stale.extend(old);
                    Arc::new_cyclic(|me| {
                        ServerSlot::new(
                            server.clone(),
                            project_root.to_path_buf(),
                            self.inner.opts.clone(),
                            trusted,
                            me.clone(),
                        )
                    })
                }
            };
            if !slot.trusted.swap(trusted, Ordering::AcqRel) && trusted {
                tracing::info!(server = %server.name, "mcp server trusted");
            } else if !trusted && slot.is_connected() {
                stale.push(slot.clone()); // trust revoked: disconnect
            }
            next.insert(server.name, slot);
        }
        stale.extend(std::mem::take(&mut *slots).into_values());
        *slots = next;
        let current: Vec<_> = slots.values().cloned().collect();
        drop(slots);
        for slot in stale {
            tokio::spawn(async move { slot.close().await });
        }
        current
    }
}
