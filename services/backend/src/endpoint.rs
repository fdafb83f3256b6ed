//! The local endpoint file `<AppRoot>/state/run/backend.json` (mode 0600): how clients find a
//! running local backend. A file whose pid is dead (or not a `lumina-backend`) is stale and is
//! replaced; the file is removed on clean exit.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Contents of `backend.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    /// `ws://127.0.0.1:<port>/v1/ws`.
    pub url: String,
    /// The bearer token every WebSocket upgrade must carry.
    pub token: String,
    pub pid: u32,
    pub protocol: u32,
    /// Unix milliseconds.
    pub started_at: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("a backend is already running for this AppRoot (pid {pid}, {url})")]
    AlreadyRunning { pid: u32, url: String },
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Whether `pid` is a live `lumina-backend` process.
pub fn is_live_backend(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmdline) => String::from_utf8_lossy(&cmdline).contains("lumina-backend"),
        Err(_) => false,
    }
}

/// The port of an endpoint URL (`ws://127.0.0.1:<port>/v1/ws`).
pub fn port_of(url: &str) -> Option<u16> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next()?;
    let (_, port) = authority.rsplit_once(':')?;
    port.parse().ok().filter(|p| *p != 0)
}

/// Reads the endpoint file, if any (unreadable or malformed files count as absent).
pub fn read(path: &Path) -> Option<Endpoint> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Writes the endpoint file unless a live backend already owns it. Stale files are replaced.
pub fn claim(path: &Path, endpoint: &Endpoint) -> Result<(), EndpointError> {
    if let Some(existing) = read(path) {
        if existing.pid != endpoint.pid && is_live_backend(existing.pid) {
            return Err(EndpointError::AlreadyRunning {
                pid: existing.pid,
                url: existing.url,
            });
        }
        tracing::info!(
            stale_pid = existing.pid,
            "replacing stale backend endpoint file"
        );
    }
    let io_err = |source| EndpointError::Io {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err)?;
    }
    let tmp = tmp_path(path);
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io_err)?;
    let json = serde_json::to_vec_pretty(endpoint).unwrap_or_default();
    file.write_all(&json).map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    std::fs::rename(&tmp, path).map_err(io_err)?;
    Ok(())
}

/// Removes the endpoint file if it still names this process.
pub fn release(path: &Path, pid: u32) {
    if read(path).is_some_and(|e| e.pid == pid) {
        if let Err(err) = std::fs::remove_file(path) {
            tracing::warn!(error = %err, "could not remove the endpoint file");
        }
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn endpoint(pid: u32) -> Endpoint {
        Endpoint {
            url: "ws://127.0.0.1:1/v1/ws".into(),
            token: "t".into(),
            pid,
            protocol: 3,
            started_at: 0,
        }
    }

    #[test]
    fn writes_0600_and_replaces_stale_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/backend.json");
        // A pid that cannot be a live backend.
        claim(&path, &endpoint(u32::MAX - 1)).unwrap();
        let mine = endpoint(std::process::id());
        claim(&path, &mine).unwrap();
        assert_eq!(read(&path), Some(mine));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        release(&path, std::process::id());
        assert!(!path.exists());
    }

    #[test]
    fn the_port_of_an_endpoint_url() {
        assert_eq!(port_of("ws://127.0.0.1:4100/v1/ws"), Some(4100));
        assert_eq!(port_of("ws://[::1]:80/v1/ws"), Some(80));
        assert_eq!(port_of("ws://127.0.0.1/v1/ws"), None);
        assert_eq!(port_of("ws://127.0.0.1:0/v1/ws"), None);
        assert_eq!(port_of("garbage"), None);
    }

    #[test]
    fn release_leaves_another_process_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("backend.json");
        claim(&path, &endpoint(u32::MAX - 1)).unwrap();
        release(&path, std::process::id());
        assert!(path.exists());
    }
}
