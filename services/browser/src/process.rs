//! The Chromium process: found, started in its own process group with a death signal, and
//! killed with everything it started. This module holds the crate's only `unsafe`: the
//! `pre_exec` hook and one `killpg` call.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::error::{Error, Result};

/// The browser binary: the configured one, else `chromium`, `chromium-browser`,
/// `google-chrome` or `google-chrome-stable` on `PATH`.
pub fn find_executable(configured: Option<&Path>, path_var: Option<OsString>) -> Result<PathBuf> {
    if let Some(path) = configured {
        return Ok(path.to_path_buf());
    }
    let path_var = path_var.unwrap_or_default();
    for dir in std::env::split_paths(&path_var) {
        for name in [
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(Error::NoExecutable)
}

/// Starts `program` with `args` as the leader of a new process group that receives SIGKILL
/// when the thread that started it (a runtime worker) exits, so a killed backend does not
/// leave browsers behind. stderr is piped (the DevTools endpoint is read from it).
pub(crate) fn spawn(program: &Path, args: &[String]) -> io::Result<tokio::process::Child> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    // SAFETY: the hook runs in the forked child before exec and only calls prctl, which is
    // async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Sends SIGKILL to process group `pgid` (the browser and its renderer, GPU and utility
/// processes). ESRCH (all gone already) is success.
pub(crate) fn kill_group(pgid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    // 0 would be our own group and 1 init's: never a spawned child's id.
    if pgid <= 1 {
        return;
    }
    // SAFETY: killpg takes two integers and touches no memory of ours; `pgid` is the pid of
    // a child spawned with `process_group(0)` that has not been reaped yet (the caller
    // signals before waiting), so the id names that child's group.
    let rc = unsafe { libc::killpg(pgid, libc::SIGKILL) };
    if rc != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ESRCH) {
            tracing::warn!(pgid, error = %err, "failed to kill the browser's process group");
        }
    }
}

/// Whether this process runs as root (Chromium's own sandbox refuses to run as root, so it
/// is turned off there). `/proc/self` belongs to the effective user.
pub(crate) fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configured_executable_wins_and_none_on_path_is_a_clear_error() {
        let configured = Path::new("/opt/chrome/chrome");
        assert_eq!(
            find_executable(Some(configured), None).unwrap(),
            configured.to_path_buf()
        );
        let empty = tempfile::tempdir().unwrap();
        let err = find_executable(None, Some(empty.path().as_os_str().to_owned())).unwrap_err();
        assert!(matches!(err, Error::NoExecutable));
        assert!(err.to_string().contains("browser_executable"), "{err}");
    }

    #[test]
    fn chromium_is_found_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("chromium");
        std::fs::write(&bin, "").unwrap();
        let path = std::env::join_paths(["/nonexistent".as_ref(), dir.path()]).unwrap();
        assert_eq!(find_executable(None, Some(path)).unwrap(), bin);
    }
}
