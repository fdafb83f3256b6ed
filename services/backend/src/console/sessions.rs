//! The console's cookie sessions (docs/console.md#sign-in). The local profile keeps them in
//! `<AppRoot>/state/run/console-sessions.json` (mode 0600) as well as in memory, so a backend
//! restarted on the same port (after a crash, say) still accepts a signed-in page's cookie.
//! The file holds the SHA-256 digest of each cookie value and its expiry (wall clock), never a
//! value that works as a cookie; expired entries are dropped when it is read and written.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    sessions: Vec<StoredSession>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredSession {
    /// Hex SHA-256 of the cookie value.
    sha256: String,
    /// Unix milliseconds.
    expires_at_ms: i64,
}

/// Live cookie sessions: digest → expiry (Unix ms).
pub struct Sessions {
    live: Mutex<HashMap<String, i64>>,
    file: Option<PathBuf>,
    cap: usize,
}

fn digest(cookie: &str) -> String {
    hex::encode(Sha256::digest(cookie.as_bytes()))
}

fn now_ms() -> i64 {
    lumina_journal::now_ms()
}

impl Sessions {
    /// Sessions that end with the process.
    pub fn in_memory(cap: usize) -> Self {
        Self {
            live: Mutex::new(HashMap::new()),
            file: None,
            cap,
        }
    }

    /// Sessions kept in `file` too: those a previous process wrote and that have not
    /// expired are live again. An unreadable or malformed file counts as empty (everyone
    /// signs in again), with a warning.
    pub fn persistent(file: PathBuf, cap: usize) -> Self {
        let mut live = HashMap::new();
        match std::fs::read(&file) {
            Ok(bytes) => match serde_json::from_slice::<Stored>(&bytes) {
                Ok(stored) => {
                    let now = now_ms();
                    live.extend(
                        stored
                            .sessions
                            .into_iter()
                            .filter(|s| s.expires_at_ms > now)
                            .map(|s| (s.sha256, s.expires_at_ms)),
                    );
                }
                Err(err) => tracing::warn!(
                    path = %file.display(),
                    error = %err,
                    "console sessions file is malformed; signed-in pages must sign in again"
                ),
            },
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => tracing::warn!(
                path = %file.display(),
                error = %err,
                "cannot read the console sessions file; signed-in pages must sign in again"
            ),
        }
        Self {
            live: Mutex::new(live),
            file: Some(file),
            cap,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, i64>> {
        self.live
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a session for `cookie`, lasting `ttl`.
    pub fn insert(&self, cookie: &str, ttl: Duration) {
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.insert_until(cookie, now_ms().saturating_add(ttl_ms));
    }

    fn insert_until(&self, cookie: &str, expires_at_ms: i64) {
        let mut live = self.lock();
        prune(&mut live, self.cap);
        live.insert(digest(cookie), expires_at_ms);
        self.save(&live);
    }

    /// Ends the session of `cookie` (sign out).
    pub fn remove(&self, cookie: &str) {
        let mut live = self.lock();
        if live.remove(&digest(cookie)).is_some() {
            self.save(&live);
        }
    }

    /// Whether `cookie` names a session that has not expired.
    pub fn is_live(&self, cookie: &str) -> bool {
        self.lock()
            .get(&digest(cookie))
            .is_some_and(|expires| *expires > now_ms())
    }

    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.lock().len()
    }

    /// Writes the live sessions (under the lock, so writes do not interleave). A failure
    /// is logged: the sessions still work until this process ends.
    fn save(&self, live: &HashMap<String, i64>) {
        let Some(path) = &self.file else {
            return;
        };
        let now = now_ms();
        let stored = Stored {
            sessions: live
                .iter()
                .filter(|(_, expires)| **expires > now)
                .map(|(sha256, expires)| StoredSession {
                    sha256: sha256.clone(),
                    expires_at_ms: *expires,
                })
                .collect(),
        };
        if let Err(err) = write_private(path, &stored) {
            tracing::warn!(
                path = %path.display(),
                error = %err,
                "cannot write the console sessions file; a restarted backend will ask to sign in again"
            );
        }
    }
}

/// Drops expired entries, then the soonest-expiring ones beyond `cap - 1` (room for one
/// more).
fn prune(live: &mut HashMap<String, i64>, cap: usize) {
    let now = now_ms();
    live.retain(|_, expires| *expires > now);
    while live.len() >= cap.max(1) {
        let oldest = live
            .iter()
            .min_by_key(|(_, expires)| **expires)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(key) => live.remove(&key),
            None => break,
        };
    }
}

/// Writes `value` as JSON to `path` through a 0600 temporary file and a rename, so a reader
/// never sees half a file and no other user can read it at any point.
fn write_private(path: &Path, value: &Stored) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(name);
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(&serde_json::to_vec(value).map_err(std::io::Error::other)?)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn sessions_survive_a_new_process_without_their_cookie_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("run/console-sessions.json");
        let first = Sessions::persistent(file.clone(), 8);
        first.insert("cookie-one", Duration::from_secs(60));
        first.insert("cookie-two", Duration::from_secs(60));
        first.remove("cookie-two");

        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("cookie-one"), "{text}");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let second = Sessions::persistent(file, 8);
        assert!(second.is_live("cookie-one"));
        assert!(
            !second.is_live("cookie-two"),
            "a signed-out session stays out"
        );
        assert!(!second.is_live("cookie-three"));
    }

    #[test]
    fn expired_sessions_are_refused_and_not_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("console-sessions.json");
        let sessions = Sessions::persistent(file.clone(), 8);
        sessions.insert_until("old", now_ms() - 1);
        sessions.insert("new", Duration::from_secs(60));
        assert!(!sessions.is_live("old"));
        // Written by a process whose clock said it was still valid.
        let stored = Stored {
            sessions: vec![StoredSession {
                sha256: digest("stale"),
                expires_at_ms: now_ms() - 1000,
            }],
        };
        write_private(&file, &stored).unwrap();
        let reread = Sessions::persistent(file, 8);
        assert_eq!(reread.count(), 0);
        assert!(!reread.is_live("stale"));
    }

    #[test]
    fn a_malformed_file_means_sign_in_again_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("console-sessions.json");
        std::fs::write(&file, "{not json").unwrap();
        let sessions = Sessions::persistent(file.clone(), 8);
        assert_eq!(sessions.count(), 0);
        sessions.insert("fresh", Duration::from_secs(60));
        assert!(Sessions::persistent(file, 8).is_live("fresh"));
    }

    #[test]
    fn sessions_are_bounded() {
        let sessions = Sessions::in_memory(4);
        for i in 0..10 {
            sessions.insert(&format!("c{i}"), Duration::from_secs(60 + i));
        }
        assert!(sessions.count() <= 4);
        assert!(sessions.is_live("c9"));
    }
}
