//! Token storage: `<AppRoot>/data/mcp/oauth/<sha256(server url)>.json`, mode 0600 in a 0700
//! directory, replaced atomically (temp file + rename). It holds what a restart needs to
//! keep using a server without a new sign-in: discovery results, the dynamic client
//! registration and the tokens. Pre-registered secrets stay in the configuration.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use lumina_config::AppRoot;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use url::Url;

use super::discovery::Discovered;
use super::error::AuthError;
use super::registration::{ClientInfo, ClientKind};
use super::token::Tokens;

const VERSION: u32 = 1;
/// Distinguishes concurrent writers' temp files within the process.
static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// What the file holds. `Debug` redacts (tokens and secrets are [`lumina_config::Secret`]s).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    pub version: u32,
    pub discovered: Option<Discovered>,
    pub client: Option<ClientInfo>,
    pub tokens: Option<Tokens>,
}

/// One server's token file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenStore {
    path: PathBuf,
}

impl TokenStore {
    /// The file for `server_url` under `app_root`.
    pub fn for_server(app_root: &AppRoot, server_url: &Url) -> Self {
        let name = hex::encode(Sha256::digest(server_url.as_str().as_bytes()));
        Self::at(
            app_root
                .data_dir()
                .join("mcp")
                .join("oauth")
                .join(format!("{name}.json")),
        )
    }

    pub fn at(path: PathBuf) -> Self {
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored state; a missing, unreadable or corrupt file holds nothing.
    pub fn load(&self) -> Stored {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Stored::default(),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot read the mcp oauth token file");
                return Stored::default();
            }
        };
        match serde_json::from_slice::<Stored>(&bytes) {
            Ok(s) if s.version == VERSION => s,
            Ok(_) => Stored::default(),
            Err(e) => {
                // Only where and what kind: serde's message may quote a value (a token).
                tracing::warn!(
                    path = %self.path.display(), line = e.line(), column = e.column(),
                    kind = ?e.classify(), "ignoring a corrupt mcp oauth token file"
                );
                Stored::default()
            }
        }
    }

    /// Replaces the file atomically with `stored` (pre-registered clients are left out).
    pub fn save(&self, stored: &Stored) -> Result<(), AuthError> {
        let mut stored = stored.clone();
        stored.version = VERSION;
        if stored
            .client
            .as_ref()
            .is_some_and(|c| c.kind == ClientKind::PreRegistered)
        {
            stored.client = None;
        }
        let fail = |e: std::io::Error| {
            AuthError::failed(format!(
                "cannot write the token file {}: {e}",
                self.path.display()
            ))
        };
        let dir = self
            .path
            .parent()
            .ok_or_else(|| AuthError::failed("the token file has no directory"))?;
        create_private_dir(dir).map_err(fail)?;
        let json = serde_json::to_vec_pretty(&stored)
            .map_err(|e| AuthError::failed(format!("cannot encode the token file: {e}")))?;
        let tmp = dir.join(format!(
            ".{}.{}.{}.tmp",
            self.path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id(),
            TMP_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = private_file(&tmp)?;
            f.write_all(&json)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(fail)
    }

    /// Deletes the file (sign-out).
    pub fn clear(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::create(path)
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumina_config::Secret;

    fn tokens() -> Tokens {
        Tokens {
            access_token: Secret::new("at-very-secret"),
            refresh_token: Some(Secret::new("rt-very-secret")),
            expires_at: Some(42),
            scopes: vec!["s".into()],
            issued_at: None,
        }
    }

    #[test]
    fn round_trip_private_and_redacted() {
        let tmp = tempfile::tempdir().unwrap();
        let root = AppRoot::new(tmp.path());
        let url = Url::parse("https://mcp.example.com/mcp").unwrap();
        let store = TokenStore::for_server(&root, &url);
        assert!(store.path().starts_with(tmp.path().join("data/mcp/oauth")));
        assert_eq!(store.load(), Stored::default());
        let stored = Stored {
            version: 0,
            discovered: None,
            client: None,
            tokens: Some(tokens()),
        };
        store.save(&stored).unwrap();
        let back = store.load();
        assert_eq!(back.tokens, stored.tokens);
        let debug = format!("{back:?}");
        assert!(!debug.contains("very-secret"), "{debug}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
            let dir = std::fs::metadata(store.path().parent().unwrap()).unwrap();
            assert_eq!(dir.permissions().mode() & 0o077, 0);
        }
        // Overwrites keep the mode; no temp files are left behind.
        store.save(&Stored::default()).unwrap();
        let names: Vec<_> = std::fs::read_dir(store.path().parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1);
        std::fs::write(store.path(), "{broken").unwrap();
        assert_eq!(store.load(), Stored::default());
    }
}
