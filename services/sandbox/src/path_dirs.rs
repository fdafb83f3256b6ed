//! Toolchains installed in the user's home and found through `PATH` (pyenv, rustup, nvm …):
//! a command that runs `python3` must reach the interpreter its `PATH` names, or the shell is
//! useless on most developer machines. Only what `PATH` points at is granted, read and
//! execute, never the home directory itself.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Version managers whose `PATH` entries (shims, `bin/`) need the manager's whole root: a
/// pyenv shim executes `pyenv`, which reads `~/.pyenv/versions/…`. None of them keeps
/// credentials in its root.
const MANAGER_ROOTS: &[&str] = &[
    ".pyenv",
    ".rbenv",
    ".nodenv",
    ".goenv",
    ".nvm",
    ".asdf",
    ".volta",
    ".sdkman",
    ".rustup",
    ".local/share/mise",
];

/// Directories that are never granted as a whole, even when `PATH` names them.
const NEVER: &[&str] = &[
    "/", "/home", "/root", "/tmp", "/var", "/run", "/proc", "/sys", "/dev",
];

/// The directories to grant for the `PATH` entries under `home`: a manager's root for an entry
/// inside one of [`MANAGER_ROOTS`], `~/.cargo/bin` and then `~/.rustup` (cargo's commands are
/// rustup proxies; `~/.cargo` itself holds the registry token, so it is not granted), else
/// the entry's own directory. Entries outside `home` are the system's (granted elsewhere, or
/// not at all); relative and missing entries, `home` itself and its ancestors are skipped.
pub(crate) fn home_toolchains(path: Option<&OsStr>, home: Option<&Path>) -> Vec<PathBuf> {
    let (Some(path), Some(home)) = (path, home) else {
        return Vec::new();
    };
    let Ok(home) = home.canonicalize() else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = Vec::new();
    let mut grant = |dir: PathBuf| {
        if !out.contains(&dir) {
            out.push(dir);
        }
    };
    for entry in std::env::split_paths(path) {
        if !entry.is_absolute() {
            continue;
        }
        let Ok(entry) = entry.canonicalize() else {
            continue;
        };
        let Ok(rel) = entry.strip_prefix(&home) else {
            continue;
        };
        if rel.as_os_str().is_empty() || NEVER.iter().any(|n| entry == Path::new(n)) {
            continue;
        }
        if let Some(root) = MANAGER_ROOTS.iter().find(|r| rel.starts_with(r)) {
            grant(home.join(root));
        } else if rel == Path::new(".cargo/bin") {
            grant(entry.clone());
            let rustup = home.join(".rustup");
            if rustup.is_dir() {
                grant(rustup);
            }
        } else if !rel.starts_with(".cargo") {
            grant(entry);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_entries_in_home_grant_their_toolchain_and_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        for d in [
            ".pyenv/shims",
            ".pyenv/versions",
            ".cargo/bin",
            ".rustup",
            ".local/bin",
            "secrets",
        ] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        let path = std::env::join_paths([
            home.join(".pyenv/shims"),
            home.join(".cargo/bin"),
            home.join(".local/bin"),
            home.clone(),
            PathBuf::from("relative/bin"),
            home.join("missing/bin"),
            PathBuf::from("/usr/bin"),
        ])
        .unwrap();
        let granted = home_toolchains(Some(path.as_os_str()), Some(&home));
        assert_eq!(
            granted,
            vec![
                home.join(".pyenv"),
                home.join(".cargo/bin"),
                home.join(".rustup"),
                home.join(".local/bin"),
            ]
        );
        assert!(!granted.iter().any(|g| home.join("secrets").starts_with(g)));
        assert!(!granted
            .iter()
            .any(|g| home.join(".cargo/credentials.toml").starts_with(g)));
    }

    #[test]
    fn no_path_or_no_home_grants_nothing() {
        assert!(home_toolchains(None, Some(Path::new("/root"))).is_empty());
        assert!(home_toolchains(Some(OsStr::new("/usr/bin")), None).is_empty());
    }
}
