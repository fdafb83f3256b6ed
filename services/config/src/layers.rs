//! Settings layers and their precedence (docs/design.md#settings-precedence), lowest first:
//! compiled defaults < `<AppRoot>/config/settings.json` < project
//! `.Lumina/CONFIG/defaults.json` < environment (`LUMINA_*`, `LLM_*` for model keys,
//! `LUMINA_*` wins) < command line.
//!
//! Every layer is a JSON object. Objects merge key by key (deep), other values replace,
//! and `null` removes a lower layer's value so the compiled default applies again. Each
//! layer is validated on its own so an error names the file or variable at fault.
//!
//! What a layer may set is narrower than the precedence suggests:
//! - memory-model keys (`memory_bge_*`, `memory_reranker_*`) come only from the user's
//!   settings.json;
//! - the project defaults file is repository content anyone can commit, so it may not set
//!   secrets (docs/design.md#secrets), the base URLs the user's keys are sent to, or loosen
//!   permissions (`permission_mode` other than `ask`, `permissions.allow`);
//! - `permissions.deny` rules accumulate across layers: no layer lifts another's deny;
//! - `hooks` lists accumulate the same way (per event, lower layer first, duplicates once),
//!   so project defaults may add hooks but not remove the user's. A project's hooks are
//!   repository content that runs commands: they apply only once the user trusted exactly
//!   that set (`crate::trust`; until then [`Settings::untrusted_project_hooks`] names them).
//!
//! Ignored keys are reported in [`Settings::warnings`].

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::keys::{
    check_value, describe, kind_of, parse_env_value, Kind, KEYS, LLM_ALIASED, PROJECT_DENIED,
};
use crate::trust::hook_commands;
use crate::{
    hooks_fingerprint, project_hooks_trusted, AppRoot, Env, Error, Result, Settings, UntrustedHooks,
};

/// `{project_root}/.Lumina/CONFIG/defaults.json`.
pub fn project_defaults_file(project_root: &Path) -> PathBuf {
    project_root
        .join(".Lumina")
        .join("CONFIG")
        .join("defaults.json")
}

/// True for the memory-model keys only the user's settings.json may set.
pub fn is_memory_model_key(key: &str) -> bool {
    key.starts_with("memory_bge_") || key.starts_with("memory_reranker_")
}

/// The environment layer: `LUMINA_<KEY>` for every setting, and `LLM_<KEY>` for the
/// model settings when the `LUMINA_` variable is unset. Blank values count as unset;
/// values are trimmed and parsed by the setting's type (`true/false/1/0/yes/no/on/off`
/// for booleans, JSON for `permissions`). `LUMINA_HOME` is not a setting.
pub fn env_layer(env: &Env) -> Result<Map<String, Value>> {
    let mut layer = Map::new();
    for &(key, kind) in KEYS {
        let upper = key.to_ascii_uppercase();
        let lumina = format!("LUMINA_{upper}");
        let llm = format!("LLM_{upper}");
        let found = match env.get_nonempty(&lumina) {
            Some(raw) => Some((lumina, raw)),
            None if LLM_ALIASED.contains(&key) => env.get_nonempty(&llm).map(|raw| (llm, raw)),
            None => None,
        };
        let Some((var, raw)) = found else { continue };
        let invalid = |expected: String| Error::InvalidEnv {
            var: var.clone(),
            expected,
        };
        let value = parse_env_value(kind, raw).ok_or_else(|| invalid(describe(key, kind)))?;
        let value = check_value(key, kind, value).map_err(|e| invalid(e.to_string()))?;
        layer.insert(key.to_string(), value);
    }
    Ok(layer)
}

/// Loads the settings: the compiled defaults overlaid by the user settings file, the
/// project defaults file (when `project_root` is given), the environment and `cli` (the
/// command-line layer, keyed like settings.json). Missing files are fine; malformed ones
/// are errors naming the file and position. Call again to pick up changes (hot reload).
pub fn load(
    app_root: &AppRoot,
    project_root: Option<&Path>,
    env: &Env,
    cli: &Map<String, Value>,
) -> Result<Settings> {
    let mut warnings = Vec::new();
    let mut untrusted_hooks = None;
    let user_file = app_root.settings_file();
    let mut merged = Map::new();

    if let Some(user) = read_layer_file(&user_file)? {
        let origin = user_file.display().to_string();
        merge(&mut merged, check_layer(user, &origin)?);
    }

    if let Some(root) = project_root {
        let file = project_defaults_file(root);
        if let Some(mut project) = read_layer_file(&file)? {
            let origin = file.display().to_string();
            strip_memory_keys(&mut project, &origin, &user_file, &mut warnings);
            strip_project_denied(&mut project, &origin, &mut warnings);
            untrusted_hooks = strip_untrusted_hooks(app_root, root, &file, &mut project);
            merge(&mut merged, check_layer(project, &origin)?);
        }
    }

    merge(&mut merged, env_layer(env)?);

    let mut cli = cli.clone();
    strip_memory_keys(&mut cli, "command line", &user_file, &mut warnings);
    merge(&mut merged, check_layer(cli, "command line")?);

    let mut known = Map::new();
    let mut extra = Map::new();
    for (key, value) in merged {
        if kind_of(&key).is_some() {
            known.insert(key, value);
        } else {
            extra.insert(key, value);
        }
    }
    let mut settings: Settings =
        serde_json::from_value(Value::Object(known)).map_err(|e| Error::InvalidSetting {
            origin: "merged settings".into(),
            key: "?".into(),
            expected: format!("decodable ({:?} error)", e.classify()),
        })?;
    settings.extra = extra;
    settings.warnings = warnings;
    settings.settings_file = Some(user_file);
    settings.untrusted_project_hooks = untrusted_hooks;
    Ok(settings)
}

/// Takes the project's hooks out of its layer unless the user trusted exactly them.
fn strip_untrusted_hooks(
    app_root: &AppRoot,
    project_root: &Path,
    file: &Path,
    project: &mut Map<String, Value>,
) -> Option<UntrustedHooks> {
    let hooks = project.get("hooks").filter(|h| !h.is_null())?;
    let fingerprint = hooks_fingerprint(hooks);
    if project_hooks_trusted(app_root, project_root, &fingerprint) {
        return None;
    }
    let commands = hook_commands(hooks);
    project.remove("hooks");
    Some(UntrustedHooks {
        file: file.to_path_buf(),
        fingerprint,
        commands,
    })
}
/// Reads a layer file; `Ok(None)` when it does not exist.
fn read_layer_file(path: &Path) -> Result<Option<Map<String, Value>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(Error::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| Error::Malformed {
        path: path.to_path_buf(),
        // Syntax and EOF messages carry only a description and the position, never the
        // text; anything else is reported by position alone.
        reason: match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => e.to_string(),
            _ => format!("at line {} column {}", e.line(), e.column()),
        },
    })?;
    match value {
        Value::Object(map) => Ok(Some(map)),
        _ => Err(Error::NotAnObject {
            path: path.to_path_buf(),
        }),
    }
}

/// Checks and normalizes the known keys of a file or command-line layer; unknown keys
/// pass through untouched (forward compatibility).
fn check_layer(mut layer: Map<String, Value>, origin: &str) -> Result<Map<String, Value>> {
    for (key, value) in layer.iter_mut() {
        let Some(kind) = kind_of(key) else { continue };
        let checked =
            check_value(key, kind, value.take()).map_err(|expected| Error::InvalidSetting {
                origin: origin.to_string(),
                key: key.clone(),
                expected: expected.to_string(),
            })?;
        *value = checked;
    }
    Ok(layer)
}
fn strip_memory_keys(
    layer: &mut Map<String, Value>,
    origin: &str,
    user_file: &Path,
    warnings: &mut Vec<String>,
) {
    let keys: Vec<String> = layer
        .keys()
        .filter(|k| is_memory_model_key(k))
        .cloned()
        .collect();
    for key in keys {
        layer.remove(&key);
        warnings.push(format!(
            "ignored `{key}` from {origin}: memory-model settings are read only from {}",
            user_file.display()
        ));
    }
}

fn strip_project_denied(layer: &mut Map<String, Value>, origin: &str, warnings: &mut Vec<String>) {
    for (key, reason) in PROJECT_DENIED {
        if layer.remove(*key).is_some() {
            warnings.push(format!("ignored `{key}` from {origin}: {reason}"));
        }
    }
    if let Some(mode) = layer.get("permission_mode").cloned() {
        let normalized = check_value("permission_mode", Kind::Str, mode);
        if normalized != Ok(Value::String("ask".into())) {
            layer.remove("permission_mode");
            warnings.push(format!(
                "ignored `permission_mode` from {origin}: a project may only set it to `ask`"
            ));
        }
    }
    let allow_set = match layer.get_mut("permissions") {
        Some(Value::Object(perms)) => perms.remove("allow").is_some(),
        // `null` would reset the user's allow rules along with everything else.
        Some(Value::Null) => layer.remove("permissions").is_some(),
        _ => false,
    };
    if allow_set {
        warnings.push(format!(
            "ignored `permissions.allow` from {origin}: a project may only add deny rules"
        ));
    }
}

fn deny_rules(map: &Map<String, Value>) -> Vec<Value> {
    map.get("permissions")
        .and_then(|p| p.get("deny"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Every hook event's list from `map`.
fn hook_lists(map: &Map<String, Value>) -> Map<String, Value> {
    map.get("hooks")
        .and_then(Value::as_object)
        .map(|hooks| {
            hooks
                .iter()
                .filter(|(_, list)| list.is_array())
                .map(|(event, list)| (event.clone(), list.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The union of two layers' hook lists, per event, lower layer first.
fn union_hooks(lower: Map<String, Value>, upper: Map<String, Value>) -> Map<String, Value> {
    let mut out = lower;
    for (event, list) in upper {
        let entry = out.entry(event).or_insert_with(|| Value::Array(Vec::new()));
        if let (Value::Array(have), Value::Array(add)) = (entry, list) {
            for hook in add {
                if !have.contains(&hook) {
                    have.push(hook);
                }
            }
        }
    }
    out
}

/// Overlays `layer` on `acc`, then restores the union of both layers' deny rules and hooks.
fn merge(acc: &mut Map<String, Value>, layer: Map<String, Value>) {
    let hooks = union_hooks(hook_lists(acc), hook_lists(&layer));
    let mut deny = deny_rules(acc);
    for rule in deny_rules(&layer) {
        if !deny.contains(&rule) {
            deny.push(rule);
        }
    }
    deep_merge(acc, layer);
    if !deny.is_empty() {
        let perms = acc
            .entry("permissions")
            .or_insert_with(|| Value::Object(Map::new()));
        if !perms.is_object() {
            *perms = Value::Object(Map::new());
        }
        if let Value::Object(perms) = perms {
            perms.insert("deny".into(), Value::Array(deny));
        }
    }
    if !hooks.is_empty() {
        acc.insert("hooks".into(), Value::Object(hooks));
    }
}

fn deep_merge(acc: &mut Map<String, Value>, layer: Map<String, Value>) {
    for (key, value) in layer {
        match (acc.get_mut(&key), value) {
            (_, Value::Null) => {
                acc.remove(&key);
            }
            (Some(Value::Object(lower)), Value::Object(upper)) => deep_merge(lower, upper),
            (_, value) => {
                acc.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_merge_replaces_scalars_and_arrays_and_null_resets() {
        let mut acc = serde_json::json!({"a": 1, "o": {"x": 1, "y": [1]}, "z": 3});
        let layer = serde_json::json!({"a": 2, "o": {"y": [2]}, "z": null});
        if let (Value::Object(acc), Value::Object(layer)) = (&mut acc, layer) {
            deep_merge(acc, layer);
        }
        assert_eq!(acc, serde_json::json!({"a": 2, "o": {"x": 1, "y": [2]}}));
    }
}
