//! Per-run settings: the layered settings of docs/design.md#settings-precedence (re-read
//! before every turn) plus the submit's overrides, resolved into a model client, a
//! permission engine and tool limits.

use std::path::Path;
use std::time::Duration;

use lumina_config::{AppRoot, Env, MissingModel, Settings};
use lumina_model::{ApiType, ModelClient, ModelEndpoint, ModelError, ModelOptions};
use lumina_tools::permission::{PermissionEngine, PermissionMode, PermissionRules};
use lumina_tools::{ConfinementMode, ShellConfinement, ShellLimits};
use serde_json::{Map, Value};

use crate::hooks::HookSet;

/// Why a run's settings are unusable.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(transparent)]
    Load(#[from] lumina_config::Error),
    #[error("unknown permission_mode `{0}` (use ask, accept-edits or bypass)")]
    PermissionMode(String),
    #[error("permissions: {0}")]
    Permissions(#[source] lumina_tools::Error),
    /// No model is configured; the message names what to set.
    #[error(transparent)]
    NoModel(#[from] MissingModel),
    #[error("unknown api_type `{0}`")]
    ApiType(lumina_protocol::ApiType),
    /// The model client could not be built.
    #[error(transparent)]
    Client(#[from] ModelError),
}

/// Setting keys a submit may override (the CLI's flags and environment).
const OVERRIDABLE: &[&str] = &[
    "api_key",
    "api_base_url",
    "api_model",
    "api_type",
    "max_tokens",
    "max_output_tokens",
    "permission_mode",
    "fallback_api_enabled",
    "fallback_api_key",
    "fallback_api_base_url",
    "fallback_api_model",
    "fallback_api_type",
    HISTORY_FROM_SEQ,
];

/// The submit override that limits a run's history to the journal from this seq on (a
/// conversation's hot window, docs/conversation-api.md#hot-window): earlier messages
/// reach the model only through Memory Fabric recall. Not a setting: it never reaches the
/// settings layers.
pub const HISTORY_FROM_SEQ: &str = "history_from_seq";

/// Keeps only the overridable keys of a submit's `settings` object.
pub fn sanitize_overrides(value: &Value) -> crate::Result<Map<String, Value>> {
    match value {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map
            .iter()
            .filter(|(k, _)| OVERRIDABLE.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()),
        _ => Err(crate::Error::InvalidParams(
            "`settings` must be an object".into(),
        )),
    }
}

/// Everything a run step needs from settings.
#[derive(Clone)]
pub struct RunSettings {
    pub overrides: Map<String, Value>,
    pub settings: Settings,
    pub permission_mode: PermissionMode,
    pub permissions: PermissionEngine,
    pub max_tokens: u64,
    pub compaction_threshold: f64,
    pub shell_timeout_ms: u64,
    pub shell_max_timeout_ms: u64,
    pub output_cap_bytes: usize,
    pub web_search_url: Option<String>,
    /// `browser_executable`: the Chromium the browser tools start.
    pub browser_executable: Option<std::path::PathBuf>,
    /// The `shell` tool's sandbox (docs/sandbox.md).
    pub shell: ShellConfinement,
    pub hooks: HookSet,
    /// Hooks left out because their matcher is invalid (reported as warnings).
    pub hook_problems: Vec<String>,
    /// The `history_from_seq` override (0 = the whole history).
    pub history_from_seq: u64,
}

impl RunSettings {
    /// Loads the layered settings for a project with a submit's overrides on top.
    pub fn load(
        app_root: &AppRoot,
        project_root: &Path,
        env: &Env,
        overrides: Map<String, Value>,
    ) -> Result<RunSettings, SettingsError> {
        let history_from_seq = overrides
            .get(HISTORY_FROM_SEQ)
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let mut layered = overrides.clone();
        layered.remove(HISTORY_FROM_SEQ);
        let settings = lumina_config::load(app_root, Some(project_root), env, &layered)?;
        let permission_mode: PermissionMode = settings
            .permission_mode
            .parse()
            .map_err(|_| SettingsError::PermissionMode(settings.permission_mode.clone()))?;
        let rules = PermissionRules {
            allow: settings.permissions.allow.clone(),
            deny: settings.permissions.deny.clone(),
        };
        let permissions = PermissionEngine::new(&rules)
            .map_err(SettingsError::Permissions)?
            .with_project_root(project_root);
        let (hooks, hook_problems) = HookSet::from_settings(&settings.hooks);
        Ok(RunSettings {
            overrides,
            history_from_seq,
            web_search_url: settings.web_search_url.clone(),
            browser_executable: settings
                .browser_executable
                .as_deref()
                .filter(|p| !p.trim().is_empty())
                .map(std::path::PathBuf::from),
            shell: shell_confinement(&settings, app_root),
            hooks,
            hook_problems,
            permission_mode,
            permissions,
            max_tokens: settings.max_tokens,
            compaction_threshold: settings.compaction_threshold,
            shell_timeout_ms: settings.shell_timeout_ms,
            shell_max_timeout_ms: settings.shell_max_timeout_ms,
            output_cap_bytes: settings.tool_output_cap_bytes,
            settings,
        })
    }

    /// Checks that a model is configured; the error names what to set.
    pub fn check_model(&self) -> Result<(), SettingsError> {
        self.settings.model_endpoints()?;
        Ok(())
    }

    pub fn model_name(&self) -> String {
        self.settings.api_model.clone().unwrap_or_default()
    }

    /// The configured `api_type` (as `model.requested` records it).
    pub fn api_type(&self) -> lumina_protocol::ApiType {
        self.settings.api_type.clone()
    }

    /// Builds the streaming client (primary + optional fallback).
    pub fn model_client(&self) -> Result<ModelClient, SettingsError> {
        let models = self.settings.model_endpoints()?;
        let endpoint = |e: &lumina_config::EndpointSettings| -> Result<_, SettingsError> {
            Ok(ModelEndpoint {
                api_type: ApiType::parse(e.api_type.as_str())
                    .ok_or_else(|| SettingsError::ApiType(e.api_type.clone()))?,
                base_url: e.base_url.clone(),
                model: e.model.clone(),
                api_key: e.api_key.clone(),
            })
        };
        let primary = endpoint(&models.primary)?;
        let fallback = models.fallback.as_ref().map(endpoint).transpose()?;
        let options = ModelOptions {
            max_output_tokens: self.settings.max_output_tokens,
            idle_timeout: Duration::from_millis(self.settings.model_idle_timeout_ms),
            max_retries: self.settings.model_max_retries,
            ..ModelOptions::default()
        };
        cached_client(primary, fallback, options)
    }
}

/// `shell_confinement` and the limits, resolved for the profile: the cluster profile never
/// runs a command unconfined (`auto` and `off` mean `required` there), the local one
/// confines as far as the host allows under `auto`. The AppRoot is protected: a project
/// that contains it cannot run commands confined.
pub fn shell_confinement(settings: &Settings, app_root: &AppRoot) -> ShellConfinement {
    let cluster = settings.session_runtime_backend == "cluster";
    let mode = match (settings.shell_confinement.as_str(), cluster) {
        ("required", _) | (_, true) => ConfinementMode::Required,
        ("off", false) => ConfinementMode::Off,
        _ => ConfinementMode::BestEffort,
    };
    ShellConfinement {
        mode,
        network_allowed: settings.shell_network,
        limits: ShellLimits {
            cpu_seconds: settings.shell_cpu_seconds,
            address_space_bytes: settings.shell_memory_bytes,
            processes: settings.shell_max_processes,
            file_size_bytes: settings.shell_max_file_bytes,
        },
        protected: vec![app_root.path().to_path_buf()],
        read_only: settings
            .shell_read_paths
            .as_deref()
            .map(|paths| {
                std::env::split_paths(paths)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Clients built so far. Settings are re-read every step, but building a client (its HTTP
/// connection pool and TLS configuration) on every step would throw away warm connections;
/// a client is reused while its endpoints and options are unchanged.
fn cached_client(
    primary: ModelEndpoint,
    fallback: Option<ModelEndpoint>,
    options: ModelOptions,
) -> Result<ModelClient, SettingsError> {
    static CLIENTS: std::sync::OnceLock<std::sync::Mutex<Vec<ModelClient>>> =
        std::sync::OnceLock::new();
    let cache = CLIENTS.get_or_init(Default::default);
    let mut clients = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(client) = clients.iter().find(|c| {
        *c.primary() == primary && c.fallback() == fallback.as_ref() && *c.options() == options
    }) {
        return Ok(client.clone());
    }
    let client = ModelClient::new(primary, fallback, options)?;
    // A handful of distinct configurations at most; drop the oldest beyond that.
    if clients.len() >= 8 {
        clients.remove(0);
    }
    clients.push(client.clone());
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn mode(confinement: &str, backend: &str) -> ConfinementMode {
        let settings = Settings {
            shell_confinement: confinement.into(),
            session_runtime_backend: backend.into(),
            ..Settings::default()
        };
        shell_confinement(&settings, &AppRoot::new("/srv/lumina")).mode
    }

    #[test]
    fn the_cluster_profile_always_requires_confinement() {
        assert_eq!(mode("auto", "local"), ConfinementMode::BestEffort);
        assert_eq!(mode("off", "local"), ConfinementMode::Off);
        assert_eq!(mode("required", "local"), ConfinementMode::Required);
        for setting in ["auto", "off", "required"] {
            assert_eq!(
                mode(setting, "cluster"),
                ConfinementMode::Required,
                "{setting}"
            );
        }
    }

    #[test]
    fn limits_and_the_app_root_come_from_the_settings() {
        let settings = Settings {
            shell_network: true,
            shell_cpu_seconds: 5,
            shell_memory_bytes: 6,
            shell_max_processes: 7,
            shell_max_file_bytes: 8,
            shell_read_paths: Some("/opt/a::/home/me/.cargo".into()),
            ..Settings::default()
        };
        let shell = shell_confinement(&settings, &AppRoot::new("/srv/lumina"));
        assert_eq!(
            shell,
            ShellConfinement {
                mode: ConfinementMode::BestEffort,
                network_allowed: true,
                limits: ShellLimits {
                    cpu_seconds: 5,
                    address_space_bytes: 6,
                    processes: 7,
                    file_size_bytes: 8,
                },
                protected: vec![std::path::PathBuf::from("/srv/lumina")],
                read_only: vec![
                    std::path::PathBuf::from("/opt/a"),
                    std::path::PathBuf::from("/home/me/.cargo"),
                ],
            }
        );
    }
}
