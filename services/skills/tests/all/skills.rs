//! Discovery: locations, priority, conflicts, defaults and errors.

use std::path::{Path, PathBuf};

use lumina_skills::{Skill, SkillCatalog, SkillConflict, SkillLocation, MAX_SKILL_FILE_BYTES};
use pretty_assertions::assert_eq;

use crate::write;

struct Dirs {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    user: PathBuf,
    builtin: PathBuf,
}

impl Dirs {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        Self {
            project: tmp.path().join("project"),
            user: tmp.path().join("home/config/skills"),
            builtin: tmp.path().join("home/app/resources/skills"),
            _tmp: tmp,
        }
    }

    fn project_skills(&self) -> PathBuf {
        self.project.join("skills")
    }

    fn project_private(&self) -> PathBuf {
        self.project.join(".Lumina/PROJECT_SKILLS")
    }

    /// Writes `{dir}/{folder}/SKILL.md` and returns its path.
    fn skill(&self, dir: &Path, folder: &str, text: &str) -> PathBuf {
        let path = dir.join(folder).join("SKILL.md");
        write(&path, text);
        path
    }

    fn discover(&self) -> SkillCatalog {
        SkillCatalog::discover(&self.project, &self.user, &self.builtin)
    }
}

fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

#[test]
fn no_directories_no_skills() {
    assert_eq!(Dirs::new().discover(), SkillCatalog::default());
}

#[test]
fn higher_priority_locations_win_and_conflicts_are_reported() {
    let d = Dirs::new();
    let p = d.skill(
        &d.project_skills(),
        "review",
        &skill_md("review", "project review", "P"),
    );
    let pp = d.skill(
        &d.project_private(),
        "review",
        &skill_md("review", "private review", "PP"),
    );
    let u = d.skill(&d.user, "rev", &skill_md("Review", "user review", "U"));
    let b = d.skill(
        &d.builtin,
        "review",
        &skill_md("review", "builtin review", "B"),
    );
    let b_only = d.skill(
        &d.builtin,
        "commit",
        &skill_md("commit", "builtin commit", "C"),
    );
    let u_only = d.skill(&d.user, "deploy", &skill_md("deploy", "user deploy", "D"));

    let catalog = d.discover();
    let names: Vec<(&str, SkillLocation, &Path)> = catalog
        .skills
        .iter()
        .map(|s| (s.name.as_str(), s.location, s.path.as_path()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("commit", SkillLocation::Builtin, b_only.as_path()),
            ("deploy", SkillLocation::User, u_only.as_path()),
            ("review", SkillLocation::Project, p.as_path()),
        ]
    );
    assert_eq!(
        catalog.conflicts,
        vec![SkillConflict {
            name: "review".into(),
            winner: p,
            shadowed: vec![pp, u, b],
        }]
    );
    assert_eq!(catalog.errors, Vec::<String>::new());
    assert_eq!(catalog.get("REVIEW").map(|s| s.body.as_str()), Some("P"));
    assert_eq!(catalog.get("missing"), None);
}

#[test]
fn each_location_is_searched() {
    for (pick, location) in [
        (0, SkillLocation::Project),
        (1, SkillLocation::ProjectPrivate),
        (2, SkillLocation::User),
        (3, SkillLocation::Builtin),
    ] {
        let d = Dirs::new();
        let dirs = [
            d.project_skills(),
            d.project_private(),
            d.user.clone(),
            d.builtin.clone(),
        ];
        d.skill(&dirs[pick], "x", &skill_md("x", "d", "b"));
        let catalog = d.discover();
        assert_eq!(catalog.skills.len(), 1);
        assert_eq!(catalog.skills[0].location, location);
    }
}

#[test]
fn a_whole_skill_is_read_with_defaults_for_missing_fields() {
    let d = Dirs::new();
    let full = d.skill(
        &d.user,
        "ignored-folder-name",
        "---\nname: Lint\ndescription: >\n  Run the linters\n  and fix.\nallowed-tools: shell\n---\n\n# Lint\nRun `make lint`.\n",
    );
    let bare = d.skill(&d.user, "notes", "# Notes skill\n\nKeep notes tidy.\nMore.");
    let catalog = d.discover();
    assert_eq!(catalog.errors, Vec::<String>::new());
    let metadata = [
        ("allowed-tools", "shell"),
        ("description", "Run the linters and fix."),
        ("name", "Lint"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(
        catalog.skills,
        vec![
            Skill {
                name: "lint".into(),
                description: "Run the linters and fix.".into(),
                path: full,
                location: SkillLocation::User,
                body: "# Lint\nRun `make lint`.".into(),
                metadata,
            },
            Skill {
                name: "notes".into(),
                description: "Keep notes tidy.".into(),
                path: bare,
                location: SkillLocation::User,
                body: "# Notes skill\n\nKeep notes tidy.\nMore.".into(),
                metadata: Default::default(),
            },
        ]
    );
}

#[test]
fn broken_skills_are_skipped_and_reported() {
    let d = Dirs::new();
    let dir = d.project_skills();
    let unterminated = d.skill(
        &dir,
        "a-open",
        "---\nname: open\ndescription: never closed\n",
    );
    let bad_line = d.skill(&dir, "b-bad", "---\nname: bad\nthis is not yaml\n---\nbody");
    let bad_name = d.skill(&dir, "c-name", &skill_md("has space", "d", "b"));
    let bad_folder = d.skill(&dir, "Bad Folder", "no front matter");
    let big = d.skill(
        &dir,
        "d-big",
        &"x".repeat(MAX_SKILL_FILE_BYTES as usize + 1),
    );
    let not_utf8 = dir.join("e-bin/SKILL.md");
    write(&not_utf8, "");
    std::fs::write(&not_utf8, [0xff, 0xfe, 0x00]).unwrap();
    d.skill(&dir, "ok", &skill_md("ok", "fine", "b"));
    std::fs::create_dir_all(dir.join("no-skill-md")).unwrap();
    d.skill(&dir, ".hidden", &skill_md("hidden", "d", "b"));
    write(&dir.join("README.md"), "a file, not a skill folder");

    let catalog = d.discover();
    let names: Vec<&str> = catalog.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["ok"]);
    let shown = |p: &Path| p.display().to_string();
    assert_eq!(
        catalog.errors,
        vec![
            // Folders are read in byte order: uppercase first.
            format!("{}: invalid folder name \"Bad Folder\": use lowercase letters, digits, `-` and `_` (at most 64); skipped", shown(&bad_folder)),
            format!("{}: front matter opened with `---` on line 1 is never closed with `---`; skipped", shown(&unterminated)),
            format!("{}: front matter line 3: expected `key: value`; skipped", shown(&bad_line)),
            format!("{}: invalid front-matter name \"has space\": use lowercase letters, digits, `-` and `_` (at most 64); skipped", shown(&bad_name)),
            format!("{}: larger than 256 KiB; skipped", shown(&big)),
            format!("{}: not valid UTF-8; skipped", shown(&not_utf8)),
        ]
    );
}

#[test]
fn a_clash_inside_one_location_is_decided_by_folder_name() {
    let d = Dirs::new();
    let first = d.skill(&d.user, "a", &skill_md("same", "first", "1"));
    let second = d.skill(&d.user, "b", &skill_md("same", "second", "2"));
    let catalog = d.discover();
    assert_eq!(
        catalog.get("same").map(|s| s.description.as_str()),
        Some("first")
    );
    assert_eq!(
        catalog.conflicts,
        vec![SkillConflict {
            name: "same".into(),
            winner: first,
            shadowed: vec![second],
        }]
    );
}

#[test]
fn a_location_that_is_not_a_directory_is_reported() {
    let d = Dirs::new();
    write(&d.user, "a file where the user's skills folder should be");
    d.skill(&d.builtin, "x", &skill_md("x", "d", "b"));
    let catalog = d.discover();
    assert_eq!(catalog.skills.len(), 1);
    assert_eq!(catalog.errors.len(), 1);
    assert!(
        catalog.errors[0].starts_with(&format!("{}: cannot list skills: ", d.user.display())),
        "{:?}",
        catalog.errors
    );
}
