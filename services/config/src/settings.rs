//! The typed settings every component reads, with their compiled defaults, and the
//! model endpoints derived from them. How the layers are merged lives in `layers`.

use std::path::PathBuf;

use lumina_protocol::ApiType;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::Secret;

/// Permission rules. `allow` is replaced by a higher layer; `deny` rules accumulate over
/// all layers, so no layer can lift a lower layer's deny rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Permissions {
    /// Rules for tool calls that run without asking. Default: none.
    pub allow: Vec<String>,
    /// Rules for tool calls that are always refused. Default: none.
    pub deny: Vec<String>,
}

/// One hook: a command run with `sh -c` in the project root, the event's JSON on stdin.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct HookEntry {
    pub command: String,
    /// Milliseconds before the hook's process group is killed. Default: 10000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Tool-name glob (`pre_tool_use`, `post_tool_use`); none matches every tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
}

/// Hooks by event. Lists from the user settings and the project defaults add up (user
/// hooks first); a higher layer cannot remove a lower layer's hooks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Hooks {
    pub session_start: Vec<HookEntry>,
    pub user_prompt_submit: Vec<HookEntry>,
    pub pre_tool_use: Vec<HookEntry>,
    pub post_tool_use: Vec<HookEntry>,
    pub stop: Vec<HookEntry>,
}

impl Hooks {
    pub fn is_empty(&self) -> bool {
        self.session_start.is_empty()
            && self.user_prompt_submit.is_empty()
            && self.pre_tool_use.is_empty()
            && self.post_tool_use.is_empty()
            && self.stop.is_empty()
    }
}

/// All runtime settings after merging the layers (see [`crate::load`]). Secrets are
/// [`Secret`]s and `Debug` never prints them.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Key of the primary model API. Default: none; required to run a model.
    pub api_key: Option<Secret>,
    /// Base URL of the primary model API. Default: none; required.
    pub api_base_url: Option<String>,
    /// Model name of the primary model. Default: none; required.
    pub api_model: Option<String>,
    /// Wire format: `anthropic`, `openai_compatible` or `auto`. Default: `auto`.
    pub api_type: ApiType,
    /// Context window in tokens, used for accounting and the compaction threshold; not
    /// sent to the provider. Default: 200000.
    pub max_tokens: u64,
    /// Completion limit sent to the provider. Default: 8192.
    pub max_output_tokens: u32,
    /// Whether the fallback model is used after the primary's retries are exhausted.
    /// Default: false.
    pub fallback_api_enabled: bool,
    /// Key of the fallback model API. Default: none.
    pub fallback_api_key: Option<Secret>,
    /// Base URL of the fallback model API. Default: none.
    pub fallback_api_base_url: Option<String>,
    /// Model name of the fallback model. Default: none.
    pub fallback_api_model: Option<String>,
    /// Wire format of the fallback. Default: none, meaning the primary's `api_type`.
    pub fallback_api_type: Option<ApiType>,
    /// Permission mode: `ask`, `accept-edits` or `bypass`. Default: `ask`.
    pub permission_mode: String,
    /// Allow and deny rules for tool calls. Default: empty.
    pub permissions: Permissions,
    /// `local` or `cluster` (fail-closed, docs/design.md#cluster-profile). Default:
    /// `local`.
    pub session_runtime_backend: String,
    /// Largest WebSocket frame accepted, in bytes. Default: 4194304 (4 MiB).
    pub max_frame_bytes: usize,
    /// Default `shell` tool timeout in milliseconds. Default: 120000.
    pub shell_timeout_ms: u64,
    /// Largest `timeout_ms` a `shell` call may ask for. Default: 600000.
    pub shell_max_timeout_ms: u64,
    /// How `shell` commands are confined (docs/sandbox.md): `auto` (the cluster profile
    /// requires confinement and refuses commands where the host cannot provide it; the
    /// local profile confines as far as the kernel allows and says what is missing),
    /// `required` (refuse where the filesystem or the network cannot be confined) or `off`
    /// (no sandbox, with a warning in every result; ignored by the cluster profile, which
    /// never runs a command unconfined). Not settable by project defaults. Default: `auto`.
    pub shell_confinement: String,
    /// Whether a `shell` call may ask for the network (`shell{network: true}`, shown in its
    /// permission request); without it every command runs without network. Not settable by
    /// project defaults. Default: false.
    pub shell_network: bool,
    /// CPU seconds per process of a confined command (0: no limit). Default: 600.
    pub shell_cpu_seconds: u64,
    /// Address space per process of a confined command, bytes (0: no limit).
    /// Default: 8589934592 (8 GiB).
    pub shell_memory_bytes: u64,
    /// Processes a confined command may run at once (a pids cgroup per command, and
    /// `RLIMIT_NPROC`) (0: no limit). Default: 1024.
    pub shell_max_processes: u64,
    /// Largest file a confined command may write, bytes (0: no limit).
    /// Default: 4294967296 (4 GiB).
    pub shell_max_file_bytes: u64,
    /// More directories confined commands may read and execute, separated by `:` (e.g. a
    /// toolchain in a home directory: `/home/me/.cargo:/home/me/.rustup`). One that
    /// contains the AppRoot makes every command refused. Not settable by project defaults.
    /// Default: none.
    pub shell_read_paths: Option<String>,
    /// Time an MCP tool call may take before it is cancelled (`notifications/cancelled`)
    /// and the model gets a timeout error, in milliseconds. Read at start-up. Default: 120000.
    pub mcp_tool_timeout_ms: u64,
    /// Bytes of tool output the model sees; the rest goes to `state/tool-results`.
    /// Default: 30000.
    pub tool_output_cap_bytes: usize,
    /// Retries of a failed model request after the first attempt. Default: 2.
    pub model_max_retries: u32,
    /// Longest silence in a model stream before it counts as stalled, in milliseconds.
    /// Default: 90000.
    pub model_idle_timeout_ms: u64,
    /// Fraction of `max_tokens` at which the context is compacted, in (0, 1].
    /// Default: 0.8.
    pub compaction_threshold: f64,
    /// Cluster name shared by all instances. Default: none.
    pub cluster_id: Option<String>,
    /// This instance's identity in the cluster. Default: none.
    pub instance_id: Option<String>,
    /// Address the cluster server listens on, e.g. `0.0.0.0:8080`. Default: none.
    pub cluster_listen_addr: Option<String>,
    /// Address other instances use to reach this one. Default: none.
    pub cluster_advertise_addr: Option<String>,
    /// Redis URL (may contain a password). Default: none.
    pub redis_url: Option<Secret>,
    /// PostgreSQL URL (may contain a password). Default: none.
    pub postgres_url: Option<Secret>,
    /// Expected JWT `iss`. Default: none.
    pub jwt_issuer: Option<String>,
    /// Expected JWT `aud`. Default: none.
    pub jwt_audience: Option<String>,
    /// JWKS URL for verifying JWTs. Default: none.
    pub jwt_jwks_url: Option<String>,
    /// Local JWKS file, instead of `jwt_jwks_url`. Default: none.
    pub jwt_jwks_file: Option<String>,
    /// A request header set by an authenticating reverse proxy (oauth2-proxy's
    /// `X-Forwarded-Access-Token`, say) that carries the user's JWT; the cluster backend
    /// then also accepts the JWT from it wherever it accepts a bearer JWT, the console's
    /// WebSocket upgrade included (docs/console.md). Only behind a proxy that strips the
    /// header from clients. Default: none (ignored).
    pub jwt_proxy_header: Option<String>,
    /// Liveness TTL of a cluster instance, ms: its registry entry, and so every session
    /// lease it holds, lapses this long after its last heartbeat (one every TTL/4), and a
    /// dead owner's sessions move at once after that. Default: 2000.
    pub cluster_lease_ttl_ms: u64,
    /// How long a drain waits for running turns before interrupting them, ms.
    /// Default: 30000.
    pub cluster_drain_timeout_ms: u64,
    /// WebSocket connections one tenant may hold on one instance (0: no limit). Default: 0.
    pub tenant_max_connections: u32,
    /// `session.submit` calls one tenant may make per minute — across the cluster in the
    /// cluster profile (a Redis window), in the process locally (0: no limit). Default: 0.
    pub tenant_submits_per_minute: u32,
    /// Runs of one tenant running at once on one instance; a submit that would start
    /// another is refused (follow-ups and steering of a running session are not) (0: no
    /// limit). Default: 0.
    pub tenant_max_concurrent_runs: u32,
    /// Memory Fabric store, e.g. `postgres` in the cluster. Default: none (the profile's
    /// own store).
    pub memory_fabric_store: Option<String>,
    /// Base URL of a SearxNG-compatible search endpoint for `web_search`
    /// (`GET {url}/search?q=…&format=json`). Default: none (`web_search` reports that).
    pub web_search_url: Option<String>,
    /// The Chromium (or Chrome) binary the browser tools start (docs/browser.md). Not
    /// settable by project defaults. Default: none (`chromium`, `chromium-browser`,
    /// `google-chrome` or `google-chrome-stable` on `PATH`).
    pub browser_executable: Option<String>,
    /// Commands run on session start, prompt submit, before and after tool calls and when a
    /// run stops. Default: none.
    pub hooks: Hooks,
    /// Sub-agents (`agent` tool) running at once in a session; a call beyond it gets an
    /// error result. Default: 4.
    pub subagent_max_parallel: u32,
    /// Deepest sub-agent: 1 = children of a top-level run only, 2 = grandchildren too.
    /// Default: 2.
    pub subagent_max_depth: u32,
    /// Sub-agents one top-level run (with all its descendants) may start. Default: 8.
    pub subagent_max_total: u32,
    /// Messages (`team_message`) all members of an agent team may send in one round
    /// together; one more gets an error result. Default: 24.
    pub team_max_messages_per_round: u32,
    /// Cluster profile only: an agent team's member tasks run on other live instances
    /// (dispatched over the Streams RPC, written under the session's fence) instead of all
    /// on the session's owner (docs/teams.md#distributed-members). Default: false.
    pub team_distributed: bool,
    /// Tokens of earlier evidence the Memory Fabric adds to the system prompt of a run's
    /// first step (when a memory store is configured). 0 disables it. Default: 1500.
    pub memory_context_tokens: u32,
    /// Messages of a conversation's hot window (docs/conversation-api.md#hot-window): a
    /// Conversation API run sees these last messages plus Memory Fabric recall. Default: 20.
    pub conversation_window: u32,
    /// Semantic compile of the Memory Fabric (docs/design.md#memory-write-path, steps 2–3):
    /// after a run ends, a background job sends the project's new evidence to
    /// `memory_compile_model` and stores the grounded nodes it proposes (when a memory
    /// store is configured). Default: false.
    pub memory_compile: bool,
    /// The model the semantic compile asks, on the session's endpoint. Default: none (the
    /// session's `api_model`).
    pub memory_compile_model: Option<String>,
    /// Which embedding model gives the Memory Fabric its dense vectors (read at start-up):
    /// `auto` (the remote model when `memory_bge_base_url` is set, else the local
    /// all-MiniLM-L6-v2 when its files are in `<AppRoot>/cache/models/all-MiniLM-L6-v2`,
    /// else none), `local`, `remote` or `none` (lexical recall only). A configured model
    /// that cannot be used is logged and recall stays lexical. Default: `auto`.
    ///
    /// The remote model and the reranker are memory-model settings, read only from the
    /// user's settings.json (never from project defaults, the environment or flags); see
    /// [`MemoryModels`] for each key and its default.
    pub memory_embeddings: String,
    /// This deployment in the signed peer channel (docs/a2a.md#the-signed-peer-channel):
    /// node name, signing key, the nodes it accepts signed calls from. Not settable by
    /// project defaults. Default: none (no signing, no signed call accepted).
    pub peer: crate::PeerSettings,
    /// The remote A2A agents `a2a_delegate` and remote team members may call, by name
    /// (docs/a2a.md#delegation). Not settable by project defaults. Default: none.
    pub a2a_peers: std::collections::BTreeMap<String, crate::A2aPeer>,
    /// URL prefixes `a2a_delegate{agent}` may name directly instead of a configured peer
    /// (e.g. `https://agents.example.com/`). Not settable by project defaults. Default: none.
    pub a2a_allowed_urls: Vec<String>,
    /// How long an `a2a_delegate` call follows the remote task before it returns "still
    /// working" with the task id (a later call with `task_id` picks it up), ms.
    /// Default: 600000.
    pub a2a_delegate_timeout_ms: u64,

    /// Merged keys this build does not know (newer settings, and the memory-model keys
    /// `memory_bge_*`/`memory_reranker_*` that only user settings.json may set). May hold
    /// secrets: `Debug` prints only their names.
    #[serde(skip)]
    pub extra: Map<String, Value>,
    /// Keys that were ignored while loading and why (e.g. a secret in the project
    /// defaults). Callers log these.
    #[serde(skip)]
    pub warnings: Vec<String>,
    /// The user settings file these settings were loaded with, for messages.
    #[serde(skip)]
    pub settings_file: Option<PathBuf>,
    /// The project's hooks when they were left out because nobody trusted them yet
    /// (`crate::trust`).
    #[serde(skip)]
    pub untrusted_project_hooks: Option<crate::UntrustedHooks>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            api_key: None,
            api_base_url: None,
            api_model: None,
            api_type: ApiType::Auto,
            max_tokens: 200_000,
            max_output_tokens: 8192,
            fallback_api_enabled: false,
            fallback_api_key: None,
            fallback_api_base_url: None,
            fallback_api_model: None,
            fallback_api_type: None,
            permission_mode: "ask".into(),
            permissions: Permissions::default(),
            session_runtime_backend: "local".into(),
            max_frame_bytes: 4 * 1024 * 1024,
            shell_timeout_ms: 120_000,
            shell_max_timeout_ms: 600_000,
            shell_confinement: "auto".into(),
            shell_network: false,
            shell_cpu_seconds: 600,
            shell_memory_bytes: 8 << 30,
            shell_max_processes: 1024,
            shell_max_file_bytes: 4 << 30,
            shell_read_paths: None,
            mcp_tool_timeout_ms: 120_000,
            tool_output_cap_bytes: 30_000,
            model_max_retries: 2,
            model_idle_timeout_ms: 90_000,
            compaction_threshold: 0.8,
            cluster_id: None,
            instance_id: None,
            cluster_listen_addr: None,
            cluster_advertise_addr: None,
            redis_url: None,
            postgres_url: None,
            jwt_issuer: None,
            jwt_audience: None,
            jwt_jwks_url: None,
            jwt_jwks_file: None,
            jwt_proxy_header: None,
            cluster_lease_ttl_ms: 2_000,
            cluster_drain_timeout_ms: 30_000,
            tenant_max_connections: 0,
            tenant_submits_per_minute: 0,
            tenant_max_concurrent_runs: 0,
            memory_fabric_store: None,
            web_search_url: None,
            browser_executable: None,
            hooks: Hooks::default(),
            subagent_max_parallel: 4,
            subagent_max_depth: 2,
            subagent_max_total: 8,
            team_max_messages_per_round: 24,
            team_distributed: false,
            memory_context_tokens: 1500,
            conversation_window: 20,
            memory_compile: false,
            memory_compile_model: None,
            memory_embeddings: "auto".into(),
            peer: crate::PeerSettings::default(),
            a2a_peers: Default::default(),
            a2a_allowed_urls: Vec::new(),
            a2a_delegate_timeout_ms: 600_000,
            extra: Map::new(),
            warnings: Vec::new(),
            settings_file: None,
            untrusted_project_hooks: None,
        }
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let extra_keys: Vec<&String> = self.extra.keys().collect();
        f.debug_struct("Settings")
            .field("api_key", &self.api_key)
            .field("api_base_url", &self.api_base_url)
            .field("api_model", &self.api_model)
            .field("api_type", &self.api_type)
            .field("max_tokens", &self.max_tokens)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("fallback_api_enabled", &self.fallback_api_enabled)
            .field("fallback_api_key", &self.fallback_api_key)
            .field("fallback_api_base_url", &self.fallback_api_base_url)
            .field("fallback_api_model", &self.fallback_api_model)
            .field("fallback_api_type", &self.fallback_api_type)
            .field("permission_mode", &self.permission_mode)
            .field("permissions", &self.permissions)
            .field("session_runtime_backend", &self.session_runtime_backend)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("shell_timeout_ms", &self.shell_timeout_ms)
            .field("shell_max_timeout_ms", &self.shell_max_timeout_ms)
            .field("shell_confinement", &self.shell_confinement)
            .field("shell_network", &self.shell_network)
            .field("shell_cpu_seconds", &self.shell_cpu_seconds)
            .field("shell_memory_bytes", &self.shell_memory_bytes)
            .field("shell_max_processes", &self.shell_max_processes)
            .field("shell_max_file_bytes", &self.shell_max_file_bytes)
            .field("shell_read_paths", &self.shell_read_paths)
            .field("mcp_tool_timeout_ms", &self.mcp_tool_timeout_ms)
            .field("tool_output_cap_bytes", &self.tool_output_cap_bytes)
            .field("model_max_retries", &self.model_max_retries)
            .field("model_idle_timeout_ms", &self.model_idle_timeout_ms)
            .field("compaction_threshold", &self.compaction_threshold)
            .field("cluster_id", &self.cluster_id)
            .field("instance_id", &self.instance_id)
            .field("cluster_listen_addr", &self.cluster_listen_addr)
            .field("cluster_advertise_addr", &self.cluster_advertise_addr)
            .field("redis_url", &self.redis_url)
            .field("postgres_url", &self.postgres_url)
            .field("jwt_issuer", &self.jwt_issuer)
            .field("jwt_audience", &self.jwt_audience)
            .field("jwt_jwks_url", &self.jwt_jwks_url)
            .field("jwt_jwks_file", &self.jwt_jwks_file)
            .field("jwt_proxy_header", &self.jwt_proxy_header)
            .field("cluster_lease_ttl_ms", &self.cluster_lease_ttl_ms)
            .field("cluster_drain_timeout_ms", &self.cluster_drain_timeout_ms)
            .field("tenant_max_connections", &self.tenant_max_connections)
            .field("tenant_submits_per_minute", &self.tenant_submits_per_minute)
            .field(
                "tenant_max_concurrent_runs",
                &self.tenant_max_concurrent_runs,
            )
            .field("memory_fabric_store", &self.memory_fabric_store)
            .field("web_search_url", &self.web_search_url)
            .field("browser_executable", &self.browser_executable)
            .field("hooks", &self.hooks)
            .field("subagent_max_parallel", &self.subagent_max_parallel)
            .field("subagent_max_depth", &self.subagent_max_depth)
            .field("subagent_max_total", &self.subagent_max_total)
            .field(
                "team_max_messages_per_round",
                &self.team_max_messages_per_round,
            )
            .field("team_distributed", &self.team_distributed)
            .field("memory_context_tokens", &self.memory_context_tokens)
            .field("conversation_window", &self.conversation_window)
            .field("memory_compile", &self.memory_compile)
            .field("memory_compile_model", &self.memory_compile_model)
            .field("memory_embeddings", &self.memory_embeddings)
            .field("peer", &self.peer)
            .field("a2a_peers", &self.a2a_peers)
            .field("a2a_allowed_urls", &self.a2a_allowed_urls)
            .field("a2a_delegate_timeout_ms", &self.a2a_delegate_timeout_ms)
            .field("extra_keys", &extra_keys)
            .field("warnings", &self.warnings)
            .field("settings_file", &self.settings_file)
            .field("untrusted_project_hooks", &self.untrusted_project_hooks)
            .finish()
    }
}

/// One model endpoint, complete.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointSettings {
    /// `anthropic`, `openai_compatible` or `auto`.
    pub api_type: ApiType,
    pub base_url: String,
    pub model: String,
    pub api_key: Secret,
}

/// The primary model and, when enabled and complete, the fallback.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSettings {
    pub primary: EndpointSettings,
    pub fallback: Option<EndpointSettings>,
}

/// The model configuration is incomplete. `missing` holds the setting keys to set, in a
/// fixed order; `Display` names both the environment variables and the settings keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct MissingModel {
    pub missing: Vec<&'static str>,
    pub settings_file: Option<PathBuf>,
}

impl std::fmt::Display for MissingModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let file = self
            .settings_file
            .as_ref()
            .map_or_else(|| "settings.json".to_string(), |p| p.display().to_string());
        let (fallback, primary): (Vec<&str>, Vec<&str>) = self
            .missing
            .iter()
            .partition(|key| key.starts_with("fallback_"));
        let mut parts = Vec::new();
        if !primary.is_empty() {
            parts.push(format!(
                "no model configured: set {} (or {} in {file})",
                env_names(&primary),
                primary.join(", ")
            ));
        }
        if !fallback.is_empty() {
            parts.push(format!(
                "fallback model enabled but incomplete: set {} (or {} in {file}), \
                 or set fallback_api_enabled to false",
                env_names(&fallback),
                fallback.join(", ")
            ));
        }
        f.write_str(&parts.join("; "))
    }
}

/// "LUMINA_A, LUMINA_B and LUMINA_C".
fn env_names(keys: &[&str]) -> String {
    let names: Vec<String> = keys
        .iter()
        .map(|k| format!("LUMINA_{}", k.to_ascii_uppercase()))
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

fn present(value: Option<&str>) -> Option<String> {
    value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

impl Settings {
    /// The model endpoints to use. No model, URL or key is built in: the primary needs
    /// `api_key`, `api_base_url` and `api_model`. The fallback is used only when
    /// `fallback_api_enabled` is true; then its key, URL and model are required too (an
    /// enabled but incomplete fallback is reported, not silently dropped), and its type
    /// defaults to the primary's.
    pub fn model_endpoints(&self) -> Result<ModelSettings, MissingModel> {
        let mut missing = Vec::new();
        let key = self
            .api_key
            .as_ref()
            .filter(|k| !k.expose().trim().is_empty());
        let base_url = present(self.api_base_url.as_deref());
        let model = present(self.api_model.as_deref());
        if key.is_none() {
            missing.push("api_key");
        }
        if base_url.is_none() {
            missing.push("api_base_url");
        }
        if model.is_none() {
            missing.push("api_model");
        }

        let mut fallback = None;
        if self.fallback_api_enabled {
            let key = self
                .fallback_api_key
                .as_ref()
                .filter(|k| !k.expose().trim().is_empty());
            let base_url = present(self.fallback_api_base_url.as_deref());
            let model = present(self.fallback_api_model.as_deref());
            if key.is_none() {
                missing.push("fallback_api_key");
            }
            if base_url.is_none() {
                missing.push("fallback_api_base_url");
            }
            if model.is_none() {
                missing.push("fallback_api_model");
            }
            if let (Some(key), Some(base_url), Some(model)) = (key, base_url, model) {
                fallback = Some(EndpointSettings {
                    api_type: self
                        .fallback_api_type
                        .clone()
                        .filter(|t| !t.as_str().trim().is_empty())
                        .unwrap_or_else(|| self.api_type.clone()),
                    base_url,
                    model,
                    api_key: Secret::new(key.expose().trim()),
                });
            }
        }

        match (key, base_url, model) {
            (Some(key), Some(base_url), Some(model)) if missing.is_empty() => Ok(ModelSettings {
                primary: EndpointSettings {
                    api_type: self.api_type.clone(),
                    base_url,
                    model,
                    api_key: Secret::new(key.expose().trim()),
                },
                fallback,
            }),
            _ => Err(MissingModel {
                missing,
                settings_file: self.settings_file.clone(),
            }),
        }
    }
}
