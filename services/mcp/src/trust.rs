//! Trust in project MCP servers: `<AppRoot>/data/projects/{project-id}/trust/mcp.json`.
//!
//! A project's `.mcp.json` is repository content anyone can commit, and a stdio server is a
//! command Lumina would run, so project servers only connect once the user trusted them.
//! Trust is recorded per server name with the fingerprint of the raw definition: a changed
//! definition needs trust again. User-config servers are trusted implicitly.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use lumina_config::AppRoot;
use serde::{Deserialize, Serialize};

use crate::config::{ServerConfig, ServerDef, ServerSource};

/// The project id used under `data/projects/` (shared with the memory space).
pub use lumina_config::project_id;

/// Serializes read-modify-write cycles of trust files within this process.
static WRITE_LOCK: Mutex<()> = Mutex::new(());

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    #[serde(default)]
    servers: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    fingerprint: String,
    #[serde(default)]
    trusted_at_ms: u64,
}

/// Reads and records trust decisions. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TrustStore {
    app_root: AppRoot,
}

impl TrustStore {
    pub fn new(app_root: AppRoot) -> Self {
        Self { app_root }
    }

    /// `<AppRoot>/data/projects/{project_id}/trust/mcp.json`.
    pub fn file(&self, project_root: &Path) -> PathBuf {
        self.app_root
            .project_data_dir(&project_id(project_root))
            .join("trust")
            .join("mcp.json")
    }

    /// Whether the project server `name` with exactly this definition is trusted. An
    /// unreadable or corrupt trust file trusts nothing.
    pub fn is_trusted(&self, project_root: &Path, name: &str, def: &ServerDef) -> bool {
        self.read(project_root)
            .servers
            .get(name)
            .is_some_and(|e| e.fingerprint == def.fingerprint())
    }

    /// Records trust in `name` with this definition (atomic write, mode 0600).
    pub fn trust(
        &self,
        project_root: &Path,
        name: &str,
        def: &ServerDef,
    ) -> Result<(), TrustError> {
        let _guard = WRITE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = self.read(project_root);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        file.servers.insert(
            name.to_string(),
            Entry {
                fingerprint: def.fingerprint(),
                trusted_at_ms: now,
            },
        );
        self.write(project_root, &file)
    }

    /// Forgets trust in `name`.
    pub fn revoke(&self, project_root: &Path, name: &str) -> Result<(), TrustError> {
        let _guard = WRITE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = self.read(project_root);
        if file.servers.remove(name).is_some() {
            self.write(project_root, &file)?;
        }
        Ok(())
    }

    /// Names of the project servers in `servers` that are not trusted (user servers never are).
    pub fn untrusted(&self, project_root: &Path, servers: &[ServerConfig]) -> Vec<String> {
        let file = self.read(project_root);
        servers
            .iter()
            .filter(|s| s.source == ServerSource::Project)
            .filter(|s| {
                file.servers
                    .get(&s.name)
                    .is_none_or(|e| e.fingerprint != s.def.fingerprint())
            })
            .map(|s| s.name.clone())
            .collect()
    }

    /// Whether `server` may connect: user servers always, project servers when trusted.
    pub fn allows(&self, project_root: &Path, server: &ServerConfig) -> bool {
        server.source == ServerSource::User
            || self.is_trusted(project_root, &server.name, &server.def)
    }

    fn read(&self, project_root: &Path) -> TrustFile {
        let path = self.file(project_root);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "ignoring corrupt mcp trust file");
                TrustFile::default()
            }),
            Err(_) => TrustFile::default(),
        }
    }

    fn write(&self, project_root: &Path, file: &TrustFile) -> Result<(), TrustError> {
        let path = self.file(project_root);
        let err = |source| TrustError::Write {
            path: path.clone(),
            source,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(err)?;
        let bytes = serde_json::to_vec_pretty(file).map_err(|e| err(e.into()))?;
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let tmp = dir.join(format!(
            ".mcp.json.{}.{}.tmp",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let written = opts.open(&tmp).and_then(|mut f| {
            f.write_all(&bytes)?;
            f.sync_all()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(e));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_def;
    use serde_json::json;

    #[test]
    fn trust_follows_the_definition() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let store = TrustStore::new(AppRoot::new(tmp.path()));
        let root = Path::new("/work/project");
        let def = parse_def(&json!({"command": "srv"}))?;
        let changed = parse_def(&json!({"command": "srv", "args": ["--evil"]}))?;
        assert!(!store.is_trusted(root, "a", &def));
        store.trust(root, "a", &def)?;
        assert!(store.is_trusted(root, "a", &def));
        assert!(!store.is_trusted(root, "a", &changed));
        assert!(!store.is_trusted(Path::new("/other"), "a", &def));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.file(root))?.permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        store.revoke(root, "a")?;
        assert!(!store.is_trusted(root, "a", &def));
        Ok(())
    }
}
