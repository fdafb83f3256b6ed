//! The teams shipped inside the binary (`services/team/builtin/<name>/`, embedded with
//! `include_str!`) and their installation into `<AppRoot>/app/resources/teams/`.
//!
//! Installation is atomic per team: the files are written into a hidden temporary folder
//! next to the target and renamed into place, so a reader sees the old version, the new
//! version, never a mixture. Installers hold `.install.lock` in the teams folder exclusively
//! (an advisory file lock, released by the OS when a process dies), so two processes
//! installing at once do the work once; [`crate::TeamLocations`] holds it shared while it
//! reads, so it never sees the instant between moving the old folder aside and the new one
//! in. A team already identical to the embedded one is left alone;
//! temporary folders left by a crashed installer are removed by the next one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lumina_config::AppRoot;

use crate::error::{Error, Result};
use crate::files::{self, Entry};
use crate::fsutil::{hidden_sibling, remove_any, sync_dir, write_tree};
use crate::lookup::{builtin_teams_dir, INSTALL_LOCK};

/// A team shipped with the program.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinTeam {
    pub name: &'static str,
    /// Paths relative to the team folder, with `/` separators.
    pub files: &'static [BuiltinFile],
}

#[derive(Debug, Clone, Copy)]
pub struct BuiltinFile {
    pub path: &'static str,
    pub contents: &'static str,
}

macro_rules! builtin_team {
    ($name:literal: $($path:literal),+ $(,)?) => {
        BuiltinTeam {
            name: $name,
            files: &[$(BuiltinFile {
                path: $path,
                contents: include_str!(concat!("../builtin/", $name, "/", $path)),
            }),+],
        }
    };
}

/// The built-in teams.
pub const BUILTIN_TEAMS: &[BuiltinTeam] = &[
    builtin_team!("product-development":
        "team.yaml",
        "team-system.md",
        "shared-prompt.md",
        "completion-policy.md",
        "agents/team-leader/agent.yaml",
        "agents/team-leader/system.md",
        "agents/research/agent.yaml",
        "agents/research/system.md",
        "agents/ux-design/agent.yaml",
        "agents/ux-design/system.md",
        "agents/frontend/agent.yaml",
        "agents/frontend/system.md",
        "agents/backend/agent.yaml",
        "agents/backend/system.md",
        "agents/qa/agent.yaml",
        "agents/qa/system.md",
        "agents/qa/skills/test-plan/SKILL.md",
        "agents/reviewer/agent.yaml",
        "agents/reviewer/system.md",
        "agents/reviewer/skills/review-checklist/SKILL.md",
        "agents/devops/agent.yaml",
        "agents/devops/system.md",
    ),
    builtin_team!("deep-research":
        "team.yaml",
        "team-system.md",
        "shared-prompt.md",
        "completion-policy.md",
        "agents/team-leader/agent.yaml",
        "agents/team-leader/system.md",
        "agents/scope-planner/agent.yaml",
        "agents/scope-planner/system.md",
        "agents/search-strategist/agent.yaml",
        "agents/search-strategist/system.md",
        "agents/source-reader/agent.yaml",
        "agents/source-reader/system.md",
        "agents/source-reader/skills/source-notes/SKILL.md",
        "agents/evidence-analyst/agent.yaml",
        "agents/evidence-analyst/system.md",
        "agents/report-writer/agent.yaml",
        "agents/report-writer/system.md",
        "agents/report-writer/skills/report-export/SKILL.md",
        "agents/qa/agent.yaml",
        "agents/qa/system.md",
        "agents/reviewer/agent.yaml",
        "agents/reviewer/system.md",
    ),
];

/// What [`install_builtins`] did, by team name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstallReport {
    /// Written (absent or different before).
    pub installed: Vec<String>,
    /// Already identical to the embedded version.
    pub unchanged: Vec<String>,
}

/// Writes every built-in team to `<AppRoot>/app/resources/teams/<name>/` (see the module
/// docs). Idempotent and safe to run from several processes or threads at once. Folders of
/// other names there are left alone.
pub fn install_builtins(app_root: &AppRoot) -> Result<InstallReport> {
    install_into(&builtin_teams_dir(app_root), BUILTIN_TEAMS)
}

fn install_into(dir: &Path, teams: &[BuiltinTeam]) -> Result<InstallReport> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
    let lock_path = dir.join(INSTALL_LOCK);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io("open", &lock_path, e))?;
    lock.lock().map_err(|e| Error::io("lock", &lock_path, e))?;

    remove_leftovers(dir);
    let mut report = InstallReport::default();
    for team in teams {
        let target = dir.join(team.name);
        if is_installed(&target, team) {
            report.unchanged.push(team.name.to_string());
        } else {
            replace(&target, team)?;
            tracing::info!(team = team.name, dir = %target.display(), "built-in team installed");
            report.installed.push(team.name.to_string());
        }
    }
    sync_dir(dir);
    // Dropping the handle releases the lock; unlock first so an error here is visible.
    lock.unlock()
        .map_err(|e| Error::io("unlock", &lock_path, e))?;
    Ok(report)
}

/// Temporary folders of an installer that died (only installers, which hold the lock,
/// create them).
fn remove_leftovers(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && (name.contains(".tmp-") || name.contains(".old-")) {
            if let Err(e) = remove_any(&entry.path()) {
                tracing::warn!(path = %entry.path().display(), error = %e, "cannot remove leftover");
            }
        }
    }
}

/// Whether `target` holds exactly the team's files (no more, no fewer, same bytes).
fn is_installed(target: &Path, team: &BuiltinTeam) -> bool {
    let mut found = BTreeMap::new();
    if !collect_files(target, Path::new(""), 0, &mut found) {
        return false;
    }
    found.len() == team.files.len()
        && team.files.iter().all(|file| {
            found
                .get(&PathBuf::from(file.path))
                .is_some_and(|path| same_contents(path, file.contents))
        })
}

/// Every regular file under `dir`, by path relative to the team folder; `false` when the
/// tree holds anything else (a link, a special file) or is deeper than a team can be.
fn collect_files(
    dir: &Path,
    rel: &Path,
    depth: usize,
    found: &mut BTreeMap<PathBuf, PathBuf>,
) -> bool {
    if depth > 8 || files::entry(dir).ok() != Some(Entry::Dir) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let entry_rel = rel.join(entry.file_name());
        match files::entry(&path) {
            Ok(Entry::File) => {
                found.insert(entry_rel, path);
            }
            Ok(Entry::Dir) => {
                if !collect_files(&path, &entry_rel, depth + 1, found) {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

fn same_contents(path: &Path, contents: &str) -> bool {
    let len_matches = std::fs::metadata(path).is_ok_and(|m| m.len() == contents.len() as u64);
    len_matches && std::fs::read(path).is_ok_and(|bytes| bytes == contents.as_bytes())
}

fn replace(target: &Path, team: &BuiltinTeam) -> Result<()> {
    let tmp = hidden_sibling(target, "tmp");
    let files: Vec<(PathBuf, &str)> = team
        .files
        .iter()
        .map(|f| (PathBuf::from(f.path), f.contents))
        .collect();
    if let Err(e) = write_tree(&tmp, &files, &[]) {
        let _ = remove_any(&tmp);
        return Err(e);
    }
    let present = files::entry(target).map_err(|e| Error::io("inspect", target, e))?;
    if present == Entry::Missing {
        return std::fs::rename(&tmp, target).map_err(|e| {
            let _ = remove_any(&tmp);
            Error::io("install", target, e)
        });
    }
    let old = hidden_sibling(target, "old");
    if let Err(e) = std::fs::rename(target, &old) {
        let _ = remove_any(&tmp);
        return Err(Error::io("move aside", target, e));
    }
    if let Err(e) = std::fs::rename(&tmp, target) {
        // Put the previous version back rather than leave no team at all.
        let _ = std::fs::rename(&old, target);
        let _ = remove_any(&tmp);
        return Err(Error::io("install", target, e));
    }
    if let Err(e) = remove_any(&old) {
        tracing::warn!(path = %old.display(), error = %e, "cannot remove the previous version");
    }
    Ok(())
}
