//! The AppRoot: one directory owning everything Lumina stores for a user, split into five
//! ownership layers (docs/design.md#approot) so each can be replaced, backed up or wiped on
//! its own: `app/` (replaceable program resources), `config/` (what the user edits),
//! `data/` (durable user data), `state/` (runtime state and logs), `cache/` (rebuildable).

use std::path::{Path, PathBuf};

use crate::{Env, Error, Result};

/// A project's identifier: the first 16 hex characters of the sha256 of its canonical root
/// path. Names its `data/projects/{id}/` directory and its Memory Fabric space.
pub fn project_id(project_root: &Path) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(project_root.display().to_string().as_bytes());
    hex::encode(&digest[..8])
}

/// Name of the environment variable that relocates the AppRoot. It is not a setting.
pub const LUMINA_HOME: &str = "LUMINA_HOME";

/// The resolved AppRoot directory. All well-known paths are derived from it here, so no
/// other crate spells a layout path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AppRoot {
    root: PathBuf,
}

impl AppRoot {
    /// Wraps `root` as is (tests and callers that already resolved it).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Resolves the AppRoot: `explicit` (the `--app-root` flag) > `LUMINA_HOME` >
    /// `~/.lumina`. A blank `LUMINA_HOME` counts as unset; a leading `~/` is expanded;
    /// relative paths are made absolute against the current directory. The home
    /// directory is `HOME` from `env`, else the platform's notion of it.
    pub fn resolve(explicit: Option<&Path>, env: &Env) -> Result<AppRoot> {
        let chosen = match (explicit, env.get_nonempty(LUMINA_HOME)) {
            (Some(path), _) => expand_tilde(path, env)?,
            (None, Some(home)) => expand_tilde(Path::new(home), env)?,
            (None, None) => home_dir(env)?.join(".lumina"),
        };
        let root = std::path::absolute(&chosen).map_err(|source| Error::Io {
            action: "resolve",
            path: chosen.clone(),
            source,
        })?;
        Ok(Self { root })
    }

    /// The AppRoot directory itself.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// `app/`: atomically replaceable program resources (built-in skills, teams).
    pub fn app_dir(&self) -> PathBuf {
        self.root.join("app")
    }

    /// `config/`: what the user edits (settings, instructions, skills, teams, MCP).
    pub fn config_dir(&self) -> PathBuf {
        self.root.join("config")
    }

    /// `data/`: durable user data (memory, sessions, per-project records).
    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// `state/`: runtime state (endpoint file, logs, tool results, migration reports).
    pub fn state_dir(&self) -> PathBuf {
        self.root.join("state")
    }

    /// `cache/`: anything that can be rebuilt or downloaded again.
    pub fn cache_dir(&self) -> PathBuf {
        self.root.join("cache")
    }

    /// `config/settings.json`, the user settings layer.
    pub fn settings_file(&self) -> PathBuf {
        self.config_dir().join("settings.json")
    }

    /// `config/instructions/`, user-level LUMINA.md and AGENTS.md.
    pub fn instructions_dir(&self) -> PathBuf {
        self.config_dir().join("instructions")
    }

    /// `config/skills/`, the user's own skills.
    pub fn user_skills_dir(&self) -> PathBuf {
        self.config_dir().join("skills")
    }

    /// `app/resources/skills/`, skills shipped with the program.
    pub fn builtin_skills_dir(&self) -> PathBuf {
        self.app_dir().join("resources").join("skills")
    }

    /// `data/sessions/`, session journals.
    pub fn sessions_dir(&self) -> PathBuf {
        self.data_dir().join("sessions")
    }

    /// `state/run/`, files describing running processes.
    pub fn run_dir(&self) -> PathBuf {
        self.state_dir().join("run")
    }

    /// `state/run/backend.json`, the local backend's endpoint and token (mode 0600).
    pub fn backend_file(&self) -> PathBuf {
        self.run_dir().join("backend.json")
    }

    /// `state/run/console-sessions.json`, the web console's signed-in sessions (digests and
    /// expiry, mode 0600), so a restarted local backend keeps them.
    pub fn console_sessions_file(&self) -> PathBuf {
        self.run_dir().join("console-sessions.json")
    }

    /// `state/tool-results/`, full outputs of tool calls whose output was capped.
    pub fn tool_results_dir(&self) -> PathBuf {
        self.state_dir().join("tool-results")
    }

    /// `state/logs/`.
    pub fn logs_dir(&self) -> PathBuf {
        self.state_dir().join("logs")
    }

    /// `cache/models/`, downloaded model files.
    pub fn models_dir(&self) -> PathBuf {
        self.cache_dir().join("models")
    }

    /// `data/projects/{project_id}/` (project manifest, MCP trust, team data).
    /// `project_id` must be an identifier the caller derived, never a raw path.
    pub fn project_data_dir(&self, project_id: &str) -> PathBuf {
        self.data_dir().join("projects").join(project_id)
    }

    /// `data/projects/{project_id}/rag.sqlite`, the project's document index
    /// (`rag_ingest` / `rag_search`, docs/rag.md), apart from the Memory Fabric's files.
    pub fn rag_db(&self, project_id: &str) -> PathBuf {
        self.project_data_dir(project_id).join("rag.sqlite")
    }

    /// Creates the five layers. `config/`, `data/` and `state/` hold keys, tokens and
    /// conversations, so on unix they are restricted to the owner (0700), also when they
    /// already existed with wider permissions.
    pub fn ensure_dirs(&self) -> Result<()> {
        for (dir, private) in [
            (self.app_dir(), false),
            (self.config_dir(), true),
            (self.data_dir(), true),
            (self.state_dir(), true),
            (self.cache_dir(), false),
        ] {
            std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
                action: "create directory",
                path: dir.clone(),
                source,
            })?;
            if private {
                restrict_to_owner(&dir)?;
            }
        }
        Ok(())
    }
}

#[cfg(unix)]
fn restrict_to_owner(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|source| {
        Error::Io {
            action: "restrict permissions of",
            path: dir.to_path_buf(),
            source,
        }
    })
}

#[cfg(not(unix))]
fn restrict_to_owner(_dir: &Path) -> Result<()> {
    Ok(())
}

fn home_dir(env: &Env) -> Result<PathBuf> {
    env.get_nonempty("HOME")
        .map(PathBuf::from)
        .or_else(dirs_next::home_dir)
        .ok_or(Error::NoHomeDir)
}

fn expand_tilde(path: &Path, env: &Env) -> Result<PathBuf> {
    match path.strip_prefix("~") {
        Ok(rest) => Ok(home_dir(env)?.join(rest)),
        Err(_) => Ok(path.to_path_buf()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn flag_beats_lumina_home_beats_home() {
        let env = Env::from_pairs([("HOME", "/h"), ("LUMINA_HOME", "/lh")]);
        let flag = AppRoot::resolve(Some(Path::new("/flag")), &env).ok();
        assert_eq!(flag, Some(AppRoot::new("/flag")));
        assert_eq!(AppRoot::resolve(None, &env).ok(), Some(AppRoot::new("/lh")));
        let env = Env::from_pairs([("HOME", "/h"), ("LUMINA_HOME", " ")]);
        assert_eq!(
            AppRoot::resolve(None, &env).ok(),
            Some(AppRoot::new("/h/.lumina"))
        );
    }

    #[test]
    fn tilde_and_relative_paths_are_resolved() {
        let env = Env::from_pairs([("HOME", "/h"), ("LUMINA_HOME", "~/lum")]);
        assert_eq!(
            AppRoot::resolve(None, &env).ok(),
            Some(AppRoot::new("/h/lum"))
        );
        let rel = AppRoot::resolve(Some(Path::new("rel")), &env).ok();
        assert!(rel.is_some_and(|r| r.path().is_absolute() && r.path().ends_with("rel")));
    }

    #[test]
    fn well_known_paths() {
        let r = AppRoot::new("/r");
        let got = [
            r.app_dir(),
            r.config_dir(),
            r.data_dir(),
            r.state_dir(),
            r.cache_dir(),
            r.settings_file(),
            r.instructions_dir(),
            r.user_skills_dir(),
            r.builtin_skills_dir(),
            r.sessions_dir(),
            r.run_dir(),
            r.backend_file(),
            r.console_sessions_file(),
            r.tool_results_dir(),
            r.logs_dir(),
            r.models_dir(),
            r.project_data_dir("p1"),
        ];
        let want = [
            "/r/app",
            "/r/config",
            "/r/data",
            "/r/state",
            "/r/cache",
            "/r/config/settings.json",
            "/r/config/instructions",
            "/r/config/skills",
            "/r/app/resources/skills",
            "/r/data/sessions",
            "/r/state/run",
            "/r/state/run/backend.json",
            "/r/state/run/console-sessions.json",
            "/r/state/tool-results",
            "/r/state/logs",
            "/r/cache/models",
            "/r/data/projects/p1",
        ]
        .map(PathBuf::from);
        assert_eq!(got, want);
    }

    #[test]
    fn ensure_dirs_creates_layers_private_where_needed() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|source| Error::Io {
            action: "create",
            path: PathBuf::new(),
            source,
        })?;
        let root = AppRoot::new(tmp.path().join("home"));
        root.ensure_dirs()?;
        root.ensure_dirs()?; // idempotent
        for dir in [
            root.app_dir(),
            root.config_dir(),
            root.data_dir(),
            root.state_dir(),
            root.cache_dir(),
        ] {
            assert!(dir.is_dir(), "{}", dir.display());
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: PathBuf| {
                std::fs::metadata(p)
                    .map(|m| m.permissions().mode() & 0o777)
                    .unwrap_or(0)
            };
            assert_eq!(mode(root.state_dir()), 0o700);
            assert_eq!(mode(root.config_dir()), 0o700);
            assert_eq!(mode(root.data_dir()), 0o700);
        }
        Ok(())
    }
}
