//! Trust in a project's hooks. Hooks in `.Lumina/CONFIG/defaults.json` are repository
//! content that runs commands, so they apply only after the user trusted exactly that set:
//! `data/projects/{project-id}/trust/hooks.json` records the sha256 of the project's `hooks`
//! object, and any change to it needs trust again. User hooks (settings.json, environment)
//! never need trust.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::{project_id, AppRoot, Error, Result};

/// Project hooks that were left out because they are not trusted (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UntrustedHooks {
    /// The project defaults file they come from.
    pub file: PathBuf,
    /// sha256 (hex) of the canonical `hooks` object: what trusting records.
    pub fingerprint: String,
    /// The hooks' commands, as shown to the user.
    pub commands: Vec<String>,
}

fn trust_file(app_root: &AppRoot, project_root: &Path) -> PathBuf {
    app_root
        .project_data_dir(&project_id(project_root))
        .join("trust")
        .join("hooks.json")
}

/// sha256 of the canonical JSON of a `hooks` value (serde_json maps are sorted).
pub fn hooks_fingerprint(hooks: &Value) -> String {
    hex::encode(Sha256::digest(hooks.to_string().as_bytes()))
}

/// The commands of a `hooks` object (`{event: [{command, …}]}`), in order.
pub(crate) fn hook_commands(hooks: &Value) -> Vec<String> {
    hooks
        .as_object()
        .into_iter()
        .flat_map(|events| events.values())
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|h| h.get("command").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// Whether the project's hooks with this fingerprint were trusted.
pub fn project_hooks_trusted(app_root: &AppRoot, project_root: &Path, fingerprint: &str) -> bool {
    std::fs::read_to_string(trust_file(app_root, project_root))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|v| {
            v.get("fingerprint")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .is_some_and(|trusted| trusted == fingerprint)
}

/// Records trust in the project's hooks with this fingerprint (atomic, 0600).
pub fn trust_project_hooks(
    app_root: &AppRoot,
    project_root: &Path,
    fingerprint: &str,
) -> Result<()> {
    let path = trust_file(app_root, project_root);
    let io = |action: &'static str, source| Error::Io {
        action,
        path: path.clone(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io("create", e))?;
    let tmp = dir.join(format!(".hooks.json.{}", std::process::id()));
    let body = json!({
        "project_root": project_root.display().to_string(),
        "fingerprint": fingerprint,
    });
    write_private(&tmp, body.to_string().as_bytes()).map_err(|e| io("write", e))?;
    std::fs::rename(&tmp, &path).map_err(|e| io("write", e))
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_bound_to_the_exact_hooks() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let app = AppRoot::new(tmp.path().join("app"));
        let project = tmp.path().join("p");
        let hooks = json!({"stop": [{"command": "echo hi"}]});
        let fp = hooks_fingerprint(&hooks);
        assert!(!project_hooks_trusted(&app, &project, &fp));
        trust_project_hooks(&app, &project, &fp).unwrap_or_else(|e| panic!("{e}"));
        assert!(project_hooks_trusted(&app, &project, &fp));
        let changed = hooks_fingerprint(&json!({"stop": [{"command": "echo bye"}]}));
        assert!(!project_hooks_trusted(&app, &project, &changed));
        assert_eq!(hook_commands(&hooks), vec!["echo hi".to_string()]);
    }
}
