//! Skill discovery (docs/design.md#instructions-and-skills). A skill is a folder with a
//! `SKILL.md`: front matter (`name`, `description`) and Markdown instructions. Four
//! locations, highest priority first: `{project}/skills/`,
//! `{project}/.Lumina/PROJECT_SKILLS/`, `<AppRoot>/config/skills/`,
//! `<AppRoot>/app/resources/skills/`. When two skills share a name the higher-priority one
//! wins and the conflict is reported.
//!
//! What happens to imperfect skills:
//! - **defaulted**: no front matter, or no `name` → the folder name; no `description` →
//!   the first line of the body that is not a heading (or empty). Not an error.
//! - **skipped, reported in `errors`**: unreadable, not UTF-8 or larger than
//!   [`MAX_SKILL_FILE_BYTES`]; malformed front matter (unterminated, a line that is not
//!   `key: value`, a duplicate key, a broken quote); an invalid name (see
//!   [`normalize_name`]), whether from the front matter or the folder.
//!
//! Folders without a `SKILL.md` and hidden folders are ignored: `{project}/skills/` may
//! well be a folder that has nothing to do with Lumina.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::front_matter;

/// Largest `SKILL.md` accepted; its body goes into model requests whole.
pub const MAX_SKILL_FILE_BYTES: u64 = 256 * 1024;

/// Longest skill name.
pub const MAX_SKILL_NAME_LEN: usize = 64;

/// Where a skill was found, highest priority first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkillLocation {
    /// `{project}/skills/`.
    Project,
    /// `{project}/.Lumina/PROJECT_SKILLS/`.
    ProjectPrivate,
    /// `<AppRoot>/config/skills/`.
    User,
    /// `<AppRoot>/app/resources/skills/`.
    Builtin,
}

impl SkillLocation {
    /// A short human label, also shown to the model.
    pub fn label(self) -> &'static str {
        match self {
            SkillLocation::Project => "project skills/",
            SkillLocation::ProjectPrivate => "project .Lumina/PROJECT_SKILLS/",
            SkillLocation::User => "user config/skills/",
            SkillLocation::Builtin => "built-in",
        }
    }
}

/// One discovered skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Normalized name: lowercase ASCII letters, digits, `-` and `_`.
    pub name: String,
    /// One-line description from the front matter (or defaulted, see the module docs).
    pub description: String,
    /// The `SKILL.md` file.
    pub path: PathBuf,
    pub location: SkillLocation,
    /// The Markdown instructions after the front matter.
    pub body: String,
    /// Every front-matter key as read, including `name` and `description` and keys this
    /// crate does not interpret (e.g. `allowed-tools`).
    pub metadata: BTreeMap<String, String>,
}

impl Skill {
    /// The skill's folder; relative paths in its instructions resolve against it.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(&self.path)
    }
}

/// Two or more skills with one name: `winner` is used, `shadowed` are not (paths of
/// their `SKILL.md`, highest priority first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillConflict {
    pub name: String,
    pub winner: PathBuf,
    pub shadowed: Vec<PathBuf>,
}

/// The skills available to a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillCatalog {
    /// Winning skills, sorted by name.
    pub skills: Vec<Skill>,
    /// Name clashes, sorted by name.
    pub conflicts: Vec<SkillConflict>,
    /// Problems found, each naming its file; those skills were skipped.
    pub errors: Vec<String>,
}

impl SkillCatalog {
    /// Discovers the skills of a project and a user (see the module docs).
    pub fn discover(
        project_root: &Path,
        user_skills_dir: &Path,
        builtin_skills_dir: &Path,
    ) -> Self {
        Self::from_locations(&[
            (SkillLocation::Project, project_root.join("skills")),
            (
                SkillLocation::ProjectPrivate,
                project_root.join(".Lumina").join("PROJECT_SKILLS"),
            ),
            (SkillLocation::User, user_skills_dir.to_path_buf()),
            (SkillLocation::Builtin, builtin_skills_dir.to_path_buf()),
        ])
    }

    /// Discovers skills from `locations`, highest priority first. Missing directories are
    /// fine. Within one directory, folders are read in name order, so a name clash there
    /// is decided by folder name.
    pub fn from_locations(locations: &[(SkillLocation, PathBuf)]) -> Self {
        let mut errors = Vec::new();
        let mut found: Vec<Skill> = Vec::new();
        for (location, dir) in locations {
            for skill_file in skill_files(dir, &mut errors) {
                match read_skill(&skill_file, *location) {
                    Ok(skill) => found.push(skill),
                    Err(reason) => errors.push(format!("{}: {reason}", skill_file.display())),
                }
            }
        }

        let mut by_name: BTreeMap<String, Vec<Skill>> = BTreeMap::new();
        for skill in found {
            by_name.entry(skill.name.clone()).or_default().push(skill);
        }
        let mut skills = Vec::new();
        let mut conflicts = Vec::new();
        for (name, mut candidates) in by_name {
            let shadowed: Vec<PathBuf> = candidates.drain(1..).map(|s| s.path).collect();
            let Some(winner) = candidates.pop() else {
                continue;
            };
            if !shadowed.is_empty() {
                tracing::debug!(skill = %name, winner = %winner.path.display(), "skill shadows others");
                conflicts.push(SkillConflict {
                    name,
                    winner: winner.path.clone(),
                    shadowed,
                });
            }
            skills.push(winner);
        }
        Self {
            skills,
            conflicts,
            errors,
        }
    }

    /// The skill called `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&Skill> {
        let name = name.trim().to_ascii_lowercase();
        self.skills.iter().find(|s| s.name == name)
    }
}

/// The normalized form of a skill name: trimmed and lowercased; then it must be 1 to
/// [`MAX_SKILL_NAME_LEN`] characters of `a-z`, `0-9`, `-`, `_`, starting with a letter or
/// digit. `None` when it is not a valid name.
pub fn normalize_name(raw: &str) -> Option<String> {
    let name = raw.trim().to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.len() <= MAX_SKILL_NAME_LEN
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    valid.then_some(name)
}

/// The `SKILL.md` files of the skill folders in `dir`, in folder-name order.
fn skill_files(dir: &Path, errors: &mut Vec<String>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            errors.push(format!("{}: cannot list skills: {e}", dir.display()));
            return Vec::new();
        }
    };
    let mut folders: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    folders.sort();
    folders
        .into_iter()
        .map(|folder| folder.join("SKILL.md"))
        .filter(|file| file.exists())
        .collect()
}

/// Why a `SKILL.md` is left out (reported with its path).
#[derive(Debug, thiserror::Error)]
enum SkillError {
    #[error("cannot read: {0}")]
    Read(#[source] std::io::Error),
    #[error("not a regular file")]
    NotAFile,
    #[error("larger than {} KiB; skipped", MAX_SKILL_FILE_BYTES / 1024)]
    TooLarge,
    #[error("not valid UTF-8; skipped")]
    NotUtf8,
    #[error("{0}; skipped")]
    FrontMatter(#[source] front_matter::FrontMatterError),
    /// `origin` says where the name came from (the front matter or the folder).
    #[error(
        "invalid {origin} {name:?}: use lowercase letters, digits, `-` and `_` (at most {}); \
         skipped",
        MAX_SKILL_NAME_LEN
    )]
    InvalidName { origin: &'static str, name: String },
}

fn read_skill(path: &Path, location: SkillLocation) -> Result<Skill, SkillError> {
    let meta = std::fs::metadata(path).map_err(SkillError::Read)?;
    if !meta.is_file() {
        return Err(SkillError::NotAFile);
    }
    if meta.len() > MAX_SKILL_FILE_BYTES {
        return Err(SkillError::TooLarge);
    }
    let bytes = std::fs::read(path).map_err(SkillError::Read)?;
    let text = String::from_utf8(bytes).map_err(|_| SkillError::NotUtf8)?;
    let doc = front_matter::parse(&text).map_err(SkillError::FrontMatter)?;
    let metadata = doc.fields.unwrap_or_default();

    let folder = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (raw_name, origin) = match metadata.get("name").filter(|n| !n.trim().is_empty()) {
        Some(name) => (name.as_str(), "front-matter name"),
        None => (folder.as_str(), "folder name"),
    };
    let name = normalize_name(raw_name).ok_or_else(|| SkillError::InvalidName {
        origin,
        name: raw_name.to_string(),
    })?;

    let description = metadata
        .get("description")
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| first_prose_line(&doc.body));

    Ok(Skill {
        name,
        description,
        path: path.to_path_buf(),
        location,
        body: doc.body,
        metadata,
    })
}

/// The first line of `body` that is neither blank nor a Markdown heading.
fn first_prose_line(body: &str) -> String {
    body.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap_or_default()
        .to_string()
}
