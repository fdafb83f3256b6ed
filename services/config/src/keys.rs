//! The table of settings: each key's type, which keys have a closed set of values, which
//! are also read from `LLM_*`, and which the project defaults may not set. Parsing and
//! checking of single values lives here; how layers combine lives in `layers`.

use serde_json::{Number, Value};

/// The type of one setting, used to parse environment strings and check every layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Str,
    Secret,
    Bool,
    U64,
    U32,
    Usize,
    Fraction,
    Permissions,
    Hooks,
    /// A list of strings.
    StrList,
    /// `peer` (`crate::PeerSettings`).
    Peer,
    /// `a2a_peers` (name → `crate::A2aPeer`).
    A2aPeers,
}

/// Every setting of [`crate::Settings`], in declaration order.
pub(crate) const KEYS: &[(&str, Kind)] = &[
    ("api_key", Kind::Secret),
    ("api_base_url", Kind::Str),
    ("api_model", Kind::Str),
    ("api_type", Kind::Str),
    ("max_tokens", Kind::U64),
    ("max_output_tokens", Kind::U32),
    ("fallback_api_enabled", Kind::Bool),
    ("fallback_api_key", Kind::Secret),
    ("fallback_api_base_url", Kind::Str),
    ("fallback_api_model", Kind::Str),
    ("fallback_api_type", Kind::Str),
    ("permission_mode", Kind::Str),
    ("permissions", Kind::Permissions),
    ("session_runtime_backend", Kind::Str),
    ("max_frame_bytes", Kind::Usize),
    ("shell_timeout_ms", Kind::U64),
    ("shell_max_timeout_ms", Kind::U64),
    ("shell_confinement", Kind::Str),
    ("shell_network", Kind::Bool),
    ("shell_cpu_seconds", Kind::U64),
    ("shell_memory_bytes", Kind::U64),
    ("shell_max_processes", Kind::U64),
    ("shell_max_file_bytes", Kind::U64),
    ("shell_read_paths", Kind::Str),
    ("mcp_tool_timeout_ms", Kind::U64),
    ("tool_output_cap_bytes", Kind::Usize),
    ("model_max_retries", Kind::U32),
    ("model_idle_timeout_ms", Kind::U64),
    ("compaction_threshold", Kind::Fraction),
    ("cluster_id", Kind::Str),
    ("instance_id", Kind::Str),
    ("cluster_listen_addr", Kind::Str),
    ("cluster_advertise_addr", Kind::Str),
    ("redis_url", Kind::Secret),
    ("postgres_url", Kind::Secret),
    ("jwt_issuer", Kind::Str),
    ("jwt_audience", Kind::Str),
    ("jwt_jwks_url", Kind::Str),
    ("jwt_jwks_file", Kind::Str),
    ("jwt_proxy_header", Kind::Str),
    ("cluster_lease_ttl_ms", Kind::U64),
    ("cluster_drain_timeout_ms", Kind::U64),
    ("tenant_max_connections", Kind::U32),
    ("tenant_submits_per_minute", Kind::U32),
    ("tenant_max_concurrent_runs", Kind::U32),
    ("memory_fabric_store", Kind::Str),
    ("web_search_url", Kind::Str),
    ("browser_executable", Kind::Str),
    ("hooks", Kind::Hooks),
    ("subagent_max_parallel", Kind::U32),
    ("subagent_max_depth", Kind::U32),
    ("subagent_max_total", Kind::U32),
    ("team_max_messages_per_round", Kind::U32),
    ("team_distributed", Kind::Bool),
    ("memory_context_tokens", Kind::U32),
    ("conversation_window", Kind::U32),
    ("memory_compile", Kind::Bool),
    ("memory_compile_model", Kind::Str),
    ("memory_embeddings", Kind::Str),
    ("peer", Kind::Peer),
    ("a2a_peers", Kind::A2aPeers),
    ("a2a_allowed_urls", Kind::StrList),
    ("a2a_delegate_timeout_ms", Kind::U64),
];

/// The memory-model settings (docs/design.md#memory-model-settings), read only from the
/// user's settings.json. They are deliberately not in [`KEYS`]: the environment layer reads
/// `LUMINA_<KEY>` for every entry there, and the project and command-line layers drop these
/// keys, so they reach [`crate::Settings::extra`] from settings.json alone.
/// [`crate::Settings::memory_models`] checks and types them.
pub(crate) const MEMORY_MODEL_KEYS: &[(&str, Kind)] = &[
    ("memory_bge_base_url", Kind::Str),
    ("memory_bge_api_key", Kind::Secret),
    ("memory_bge_model", Kind::Str),
    ("memory_bge_dimensions", Kind::Usize),
    ("memory_reranker_base_url", Kind::Str),
    ("memory_reranker_api_key", Kind::Secret),
    ("memory_reranker_model", Kind::Str),
    ("memory_reranker_top_n", Kind::Usize),
];

/// Keys also read from `LLM_<KEY>`: only the model settings, so that another tool's
/// `LLM_*` variables cannot change permissions or cluster wiring.
pub(crate) const LLM_ALIASED: &[&str] = &[
    "api_key",
    "api_base_url",
    "api_model",
    "api_type",
    "max_tokens",
    "max_output_tokens",
    "fallback_api_enabled",
    "fallback_api_key",
    "fallback_api_base_url",
    "fallback_api_model",
    "fallback_api_type",
];

const API_TYPES: &[(&str, &str)] = &[
    ("anthropic", "anthropic"),
    ("openai_compatible", "openai_compatible"),
    ("openai-compatible", "openai_compatible"),
    ("openai", "openai_compatible"),
    ("auto", "auto"),
];

/// Settings with a closed set of values: accepted spellings and their canonical form.
pub(crate) const CHOICES: &[(&str, &[(&str, &str)])] = &[
    ("api_type", API_TYPES),
    ("fallback_api_type", API_TYPES),
    (
        "permission_mode",
        &[
            ("ask", "ask"),
            ("default", "ask"),
            ("accept-edits", "accept-edits"),
            ("accept_edits", "accept-edits"),
            ("acceptedits", "accept-edits"),
            ("bypass", "bypass"),
            ("bypasspermissions", "bypass"),
        ],
    ),
    (
        "session_runtime_backend",
        &[("local", "local"), ("cluster", "cluster")],
    ),
    (
        "shell_confinement",
        &[("auto", "auto"), ("required", "required"), ("off", "off")],
    ),
    (
        "memory_embeddings",
        &[
            ("auto", "auto"),
            ("local", "local"),
            ("remote", "remote"),
            ("none", "none"),
            ("off", "none"),
        ],
    ),
];

/// Keys the project defaults file may not set, with the reason given in the warning.
pub(crate) const PROJECT_DENIED: &[(&str, &str)] = &[
    (
        "api_key",
        "secrets come only from user settings, environment or flags",
    ),
    (
        "fallback_api_key",
        "secrets come only from user settings, environment or flags",
    ),
    (
        "redis_url",
        "secrets come only from user settings, environment or flags",
    ),
    (
        "postgres_url",
        "secrets come only from user settings, environment or flags",
    ),
    (
        "api_base_url",
        "a project may not choose where the user's API key is sent",
    ),
    (
        "jwt_proxy_header",
        "a project may not choose where the backend takes credentials from",
    ),
    (
        "fallback_api_base_url",
        "a project may not choose where the user's API key is sent",
    ),
    (
        "web_search_url",
        "a project may not choose where the user's searches are sent",
    ),
    (
        "browser_executable",
        "a project may not choose which program the browser tools run",
    ),
    (
        "shell_confinement",
        "a project may not loosen the shell's sandbox",
    ),
    (
        "shell_network",
        "a project may not loosen the shell's sandbox",
    ),
    (
        "shell_cpu_seconds",
        "a project may not loosen the shell's sandbox",
    ),
    (
        "shell_memory_bytes",
        "a project may not loosen the shell's sandbox",
    ),
    (
        "shell_max_processes",
        "a project may not loosen the shell's sandbox",
    ),
    (
        "shell_max_file_bytes",
        "a project may not loosen the shell's sandbox",
    ),
    (
        "shell_read_paths",
        "a project may not loosen the shell's sandbox",
    ),
    (
        "peer",
        "secrets come only from user settings, environment or flags",
    ),
    (
        "a2a_peers",
        "a project may not choose where the user's data is sent",
    ),
    (
        "a2a_allowed_urls",
        "a project may not choose where the user's data is sent",
    ),
];

/// The names of all settings, e.g. for documentation and `config` listings.
pub fn setting_keys() -> impl Iterator<Item = &'static str> {
    KEYS.iter().map(|(key, _)| *key)
}
pub(crate) fn kind_of(key: &str) -> Option<Kind> {
    KEYS.iter().find(|(k, _)| *k == key).map(|(_, kind)| *kind)
}

/// Why a value does not fit its setting; `Display` says what it must be (the `expected` of
/// [`crate::Error::InvalidSetting`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidValue {
    /// The wrong type, or none of the setting's values.
    #[error("{expected}")]
    Expected { expected: String },
    /// A `hooks` key that is not a hook event.
    #[error("{}; `{event}` is not a hook event", hooks_expected())]
    HookEvent { event: String },
    #[error("{}; `{event}` must be a list", hooks_expected())]
    HookList { event: String },
    #[error("{}; `{event}[{index}]` must be an object", hooks_expected())]
    HookEntry { event: String, index: usize },
    #[error(
        "{}; `{event}[{index}]` needs a non-empty string `command`",
        hooks_expected()
    )]
    HookCommand { event: String, index: usize },
    #[error(
        "{}; `{event}[{index}]` has an unknown field `{field}`",
        hooks_expected()
    )]
    HookField {
        event: String,
        index: usize,
        field: String,
    },
    #[error(
        "{}; `{event}[{index}]`: `timeout_ms` must be a positive whole number and `matcher` a string",
        hooks_expected()
    )]
    HookValue { event: String, index: usize },
}

impl InvalidValue {
    fn expected(key: &str, kind: Kind) -> Self {
        InvalidValue::Expected {
            expected: describe(key, kind),
        }
    }
}

fn hooks_expected() -> String {
    describe("hooks", Kind::Hooks)
}

/// The value in canonical form, or what was expected. `null` is always accepted: it resets
/// the setting to its default.
pub(crate) fn check_value(
    key: &str,
    kind: Kind,
    value: Value,
) -> std::result::Result<Value, InvalidValue> {
    let ok = match (&value, kind) {
        (Value::Null, _) => true,
        (Value::String(s), Kind::Str) => {
            if let Some((_, choices)) = CHOICES.iter().find(|(k, _)| *k == key) {
                let wanted = s.trim().to_ascii_lowercase();
                return choices
                    .iter()
                    .find(|(alias, _)| *alias == wanted)
                    .map(|(_, canonical)| Value::String((*canonical).to_string()))
                    .ok_or_else(|| InvalidValue::expected(key, kind));
            }
            true
        }
        (Value::String(_), Kind::Secret) => true,
        (Value::Bool(_), Kind::Bool) => true,
        (Value::Number(n), Kind::U64) => n.as_u64().is_some(),
        (Value::Number(n), Kind::U32) => n.as_u64().is_some_and(|v| u32::try_from(v).is_ok()),
        (Value::Number(n), Kind::Usize) => n.as_u64().is_some_and(|v| usize::try_from(v).is_ok()),
        (Value::Number(n), Kind::Fraction) => n.as_f64().is_some_and(|v| v > 0.0 && v <= 1.0),
        (Value::Object(map), Kind::Hooks) => return check_hooks(map).map(|()| value),
        (Value::Array(items), Kind::StrList) => items.iter().all(Value::is_string),
        (Value::Object(_), Kind::Peer) => {
            return crate::peers::check_peer(&value)
                .map(|()| value)
                .map_err(|why| InvalidValue::Expected {
                    expected: format!("{}; {why}", describe(key, kind)),
                })
        }
        (Value::Object(_), Kind::A2aPeers) => {
            return crate::peers::check_a2a_peers(&value)
                .map(|()| value)
                .map_err(|why| InvalidValue::Expected {
                    expected: format!("{}; {why}", describe(key, kind)),
                })
        }
        (Value::Object(map), Kind::Permissions) => {
            ["allow", "deny"].iter().all(|list| match map.get(*list) {
                None | Some(Value::Null) => true,
                Some(Value::Array(items)) => items.iter().all(Value::is_string),
                Some(_) => false,
            })
        }
        _ => false,
    };
    if ok {
        Ok(value)
    } else {
        Err(InvalidValue::expected(key, kind))
    }
}

pub(crate) fn describe(key: &str, kind: Kind) -> String {
    if let Some((_, choices)) = CHOICES.iter().find(|(k, _)| *k == key) {
        let mut canonical: Vec<&str> = Vec::new();
        for (_, c) in choices.iter() {
            if !canonical.contains(c) {
                canonical.push(c);
            }
        }
        return format!("one of {}", canonical.join(", "));
    }
    match kind {
        Kind::Str | Kind::Secret => "a string".into(),
        Kind::Bool => "true or false".into(),
        Kind::U64 => format!("a whole number from 0 to {}", u64::MAX),
        Kind::U32 => format!("a whole number from 0 to {}", u32::MAX),
        Kind::Usize => format!("a whole number from 0 to {}", usize::MAX),
        Kind::Fraction => "a number greater than 0 and at most 1".into(),
        Kind::Permissions => {
            "an object with string lists `allow` and `deny`, e.g. {\"deny\": [\"shell\"]}".into()
        }
        Kind::StrList => "a list of strings".into(),
        Kind::Peer => "an object with `node`, `shared_key`, `derive_master`, `derived_key`, \
             `ed25519_private_key`, `window_secs`, `nonce_capacity` and `nodes` \
             (name → {\"ed25519_public_key\"?, \"scopes\"?, \"tenant\"?}) (docs/a2a.md)"
            .into(),
        Kind::A2aPeers => {
            "an object of peers by name, each {\"url\": \"https://…\", \"token\"?, \"sign\"?} \
             (docs/a2a.md)"
                .into()
        }
        Kind::Hooks => format!(
            "an object whose keys are hook events ({}) and whose values are lists of \
             {{\"command\": \"...\", \"timeout_ms\"?: 10000, \"matcher\"?: \"tool-glob\"}}",
            HOOK_EVENTS.join(", ")
        ),
    }
}

/// The hook events `hooks` may configure.
pub(crate) const HOOK_EVENTS: &[&str] = &[
    "session_start",
    "user_prompt_submit",
    "pre_tool_use",
    "post_tool_use",
    "stop",
];

/// Checks a `hooks` object; the error names the offending entry.
fn check_hooks(map: &serde_json::Map<String, Value>) -> std::result::Result<(), InvalidValue> {
    for (event, entries) in map {
        if !HOOK_EVENTS.contains(&event.as_str()) {
            return Err(InvalidValue::HookEvent {
                event: event.clone(),
            });
        }
        let entries = match entries {
            Value::Null => continue,
            Value::Array(entries) => entries,
            _ => {
                return Err(InvalidValue::HookList {
                    event: event.clone(),
                })
            }
        };
        for (index, entry) in entries.iter().enumerate() {
            let event = || event.clone();
            let Value::Object(entry) = entry else {
                return Err(InvalidValue::HookEntry {
                    event: event(),
                    index,
                });
            };
            match entry.get("command") {
                Some(Value::String(c)) if !c.trim().is_empty() => {}
                _ => {
                    return Err(InvalidValue::HookCommand {
                        event: event(),
                        index,
                    })
                }
            }
            for (field, value) in entry {
                let ok = match field.as_str() {
                    "command" => true,
                    "timeout_ms" => value.as_u64().is_some_and(|v| v > 0) || value.is_null(),
                    "matcher" => value.is_string() || value.is_null(),
                    _ => {
                        return Err(InvalidValue::HookField {
                            event: event(),
                            index,
                            field: field.clone(),
                        })
                    }
                };
                if !ok {
                    return Err(InvalidValue::HookValue {
                        event: event(),
                        index,
                    });
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn parse_env_value(kind: Kind, raw: &str) -> Option<Value> {
    match kind {
        Kind::Str | Kind::Secret => Some(Value::String(raw.to_string())),
        Kind::Bool => match raw.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Some(Value::Bool(true)),
            "false" | "0" | "no" | "off" => Some(Value::Bool(false)),
            _ => None,
        },
        Kind::U64 | Kind::U32 | Kind::Usize => {
            raw.parse::<u64>().ok().map(|n| Value::Number(n.into()))
        }
        Kind::Fraction => raw
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number),
        Kind::Permissions | Kind::Hooks | Kind::StrList | Kind::Peer | Kind::A2aPeers => {
            serde_json::from_str(raw).ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Settings;

    /// The key table and the struct must describe the same settings: serde lists the
    /// struct's fields when it meets an unknown one.
    #[test]
    fn key_table_matches_struct_fields() {
        let probe = serde_json::json!({ "__probe__": 1 });
        let err = serde_json::from_value::<Settings>(probe)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let fields: Vec<String> = err
            .split("expected one of ")
            .nth(1)
            .unwrap_or_default()
            .split(", ")
            .map(|f| f.trim_matches('`').to_string())
            .collect();
        let keys: Vec<String> = setting_keys().map(str::to_string).collect();
        assert_eq!(fields, keys);
        for (key, _) in MEMORY_MODEL_KEYS {
            assert!(crate::is_memory_model_key(key), "{key}");
            assert!(kind_of(key).is_none(), "{key} must stay out of KEYS");
        }
        for key in LLM_ALIASED
            .iter()
            .chain(PROJECT_DENIED.iter().map(|(k, _)| k))
        {
            assert!(kind_of(key).is_some(), "{key}");
        }
    }
}
