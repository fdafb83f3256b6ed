//! Where teams live and how a name is found: the project's `.Lumina/TEAM/<name>/`, then the
//! user's `<AppRoot>/config/teams/<name>/`, then the built-in
//! `<AppRoot>/app/resources/teams/<name>/`. The first folder that exists wins, valid or
//! not: a broken project team is reported as broken, never silently replaced by the user's
//! or the built-in team of the same name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lumina_config::AppRoot;
use serde::Deserialize;

use crate::definition::TeamDefinition;
use crate::error::{Error, Issue, Result};
use crate::files::{self, Entry};
use crate::load::load_team_dir;
use crate::name::check_name;

/// Which layer a team comes from, highest priority first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TeamSource {
    /// `<project>/.Lumina/TEAM/`.
    Project,
    /// `<AppRoot>/config/teams/`.
    User,
    /// `<AppRoot>/app/resources/teams/` (written by [`crate::install_builtins`]).
    Builtin,
}

impl TeamSource {
    /// The wire and display name: `project`, `user`, `builtin`.
    pub fn as_str(self) -> &'static str {
        match self {
            TeamSource::Project => "project",
            TeamSource::User => "user",
            TeamSource::Builtin => "builtin",
        }
    }
}

/// `<project>/.Lumina/TEAM/`.
pub fn project_teams_dir(project_root: &Path) -> PathBuf {
    project_root.join(".Lumina").join("TEAM")
}

/// `<AppRoot>/config/teams/`.
pub fn user_teams_dir(app_root: &AppRoot) -> PathBuf {
    app_root.config_dir().join("teams")
}

/// `<AppRoot>/app/resources/teams/`.
pub fn builtin_teams_dir(app_root: &AppRoot) -> PathBuf {
    app_root.app_dir().join("resources").join("teams")
}

/// The folders teams are looked up in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamLocations {
    /// The project's team folder; `None` outside a project.
    pub project: Option<PathBuf>,
    pub user: PathBuf,
    pub builtin: PathBuf,
}

impl TeamLocations {
    /// The standard locations for `app_root` and, when given, the project at
    /// `project_root`.
    pub fn new(app_root: &AppRoot, project_root: Option<&Path>) -> Self {
        TeamLocations {
            project: project_root.map(project_teams_dir),
            user: user_teams_dir(app_root),
            builtin: builtin_teams_dir(app_root),
        }
    }

    /// The folders in lookup order.
    pub fn dirs(&self) -> Vec<(TeamSource, &Path)> {
        let mut dirs = Vec::with_capacity(3);
        if let Some(project) = &self.project {
            dirs.push((TeamSource::Project, project.as_path()));
        }
        dirs.push((TeamSource::User, self.user.as_path()));
        dirs.push((TeamSource::Builtin, self.builtin.as_path()));
        dirs
    }

    /// The folder the team `name` is loaded from, or `None` when no location has it.
    pub fn find(&self, name: &str) -> Result<Option<(TeamSource, PathBuf)>> {
        check_team_name(name)?;
        for (source, dir) in self.dirs() {
            let path = dir.join(name);
            match files::entry(&path).map_err(|e| Error::io("inspect", &path, e))? {
                Entry::Missing => continue,
                _ => return Ok(Some((source, path))),
            }
        }
        Ok(None)
    }

    /// Loads and validates the team `name` from the first location that has it.
    pub fn load(&self, name: &str) -> Result<TeamDefinition> {
        let _installing = self.builtin_read_lock();
        match self.find(name)? {
            Some((source, dir)) => load_team_dir(&dir, source),
            None => Err(Error::NotFound {
                name: name.to_string(),
                searched: self.dirs().into_iter().map(|(_, d)| d.join(name)).collect(),
            }),
        }
    }

    /// Every team of every location, by name; a broken team is listed with its error.
    pub fn list(&self) -> TeamCatalog {
        let _installing = self.builtin_read_lock();
        let mut errors = Vec::new();
        let mut by_name: BTreeMap<String, Vec<(TeamSource, PathBuf)>> = BTreeMap::new();
        for (source, dir) in self.dirs() {
            let entries = match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    errors.push(format!("{}: cannot list teams: {e}", dir.display()));
                    continue;
                }
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                // Hidden entries include install_builtins' and create_team's temporary
                // folders and the install lock.
                if name.starts_with('.') {
                    continue;
                }
                let path = entry.path();
                if matches!(files::entry(&path), Ok(Entry::File) | Ok(Entry::Missing)) {
                    continue;
                }
                by_name.entry(name).or_default().push((source, path));
            }
        }
        let teams = by_name
            .into_iter()
            .filter_map(|(name, mut found)| {
                let shadows = found.iter().skip(1).map(|(s, _)| *s).collect();
                let (source, path) = found.drain(..1).next()?;
                Some(listing(name, source, path, shadows))
            })
            .collect();
        TeamCatalog { teams, errors }
    }
}

impl TeamLocations {
    /// A shared lock on the built-in folder's install lock, held while reading, so a
    /// concurrent [`crate::install_builtins`] (which holds it exclusively while it swaps a
    /// team folder) is never observed half-way. `None` when nothing was ever installed.
    fn builtin_read_lock(&self) -> Option<std::fs::File> {
        let path = self.builtin.join(INSTALL_LOCK);
        let file = std::fs::File::open(&path).ok()?;
        match file.lock_shared() {
            Ok(()) => Some(file),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot lock built-in teams");
                None
            }
        }
    }
}

/// The lock file in the built-in teams folder.
pub(crate) const INSTALL_LOCK: &str = ".install.lock";

/// Every team available, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TeamCatalog {
    pub teams: Vec<TeamListing>,
    /// Locations that exist but could not be listed.
    pub errors: Vec<String>,
}

impl TeamCatalog {
    pub fn get(&self, name: &str) -> Option<&TeamListing> {
        self.teams.iter().find(|t| t.name == name)
    }
}

/// One team as listed: the winner among the locations that have a folder of its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamListing {
    /// The folder name.
    pub name: String,
    /// From `team.yaml` when it can be read, else the name.
    pub display_name: String,
    pub source: TeamSource,
    /// The team folder.
    pub path: PathBuf,
    /// Why the team cannot be used; `None` when it is valid.
    pub error: Option<String>,
    /// The validation issues behind `error`, when it is a validation error.
    pub issues: Vec<Issue>,
    /// Lower-priority locations that also have a team of this name, which this one hides.
    pub shadows: Vec<TeamSource>,
}

impl TeamListing {
    pub fn is_valid(&self) -> bool {
        self.error.is_none()
    }
}

fn listing(
    name: String,
    source: TeamSource,
    path: PathBuf,
    shadows: Vec<TeamSource>,
) -> TeamListing {
    let (display_name, error, issues) = match load_team_dir(&path, source) {
        Ok(team) => (team.display_name, None, Vec::new()),
        Err(e) => (
            lenient_display_name(&path).unwrap_or_else(|| name.clone()),
            Some(e.to_string()),
            e.issues().to_vec(),
        ),
    };
    TeamListing {
        name,
        display_name,
        source,
        path,
        error,
        issues,
        shadows,
    }
}

/// The display name of a team whose definition is broken, if `team.yaml` still says it.
fn lenient_display_name(dir: &Path) -> Option<String> {
    #[derive(Deserialize)]
    struct Names {
        display_name: Option<String>,
    }
    let text = files::read_text(dir, Path::new("team.yaml")).ok()??;
    let names: Names = crate::yaml::parse(&text, Path::new("team.yaml")).ok()?;
    crate::load::check_label(&names.display_name?).ok()
}

/// Checks that `name` can be a team's folder name ([`Error::InvalidName`] otherwise).
pub fn check_team_name(name: &str) -> Result<()> {
    check_name(name).map_err(|problem| Error::InvalidName {
        name: name.to_string(),
        problem,
    })
}
