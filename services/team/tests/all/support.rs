//! Team folders written from an in-memory file map, so each test states exactly the change
//! it makes to an otherwise valid team.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lumina_team::{load_team_dir, Error, Issue, IssueKind, TeamDefinition, TeamSource};

/// A team as files: relative path → bytes.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub name: String,
    pub files: BTreeMap<String, Vec<u8>>,
    /// Empty folders to create (e.g. a member's `skills/`).
    pub dirs: Vec<String>,
}

impl Fixture {
    /// A valid team `name` with the members `leader` (entry), `worker` and `tester`, every
    /// optional field left out.
    pub fn minimal(name: &str) -> Self {
        let mut fixture = Fixture {
            name: name.to_string(),
            files: BTreeMap::new(),
            dirs: Vec::new(),
        };
        fixture.set(
            "team.yaml",
            &format!("name: {name}\nentry_agent: leader\nagents: [leader, worker, tester]\n"),
        );
        for member in ["leader", "worker", "tester"] {
            fixture.set(
                &format!("agents/{member}/agent.yaml"),
                &format!("name: {member}\n"),
            );
            fixture.set(
                &format!("agents/{member}/system.md"),
                &format!("You are the {member}.\n"),
            );
        }
        fixture
    }

    pub fn set(&mut self, path: &str, text: &str) -> &mut Self {
        self.files
            .insert(path.to_string(), text.as_bytes().to_vec());
        self
    }

    pub fn set_bytes(&mut self, path: &str, bytes: Vec<u8>) -> &mut Self {
        self.files.insert(path.to_string(), bytes);
        self
    }

    pub fn remove(&mut self, path: &str) -> &mut Self {
        self.files.remove(path);
        self
    }

    /// Writes the team into `parent/<name>/` and returns that folder.
    pub fn write(&self, parent: &Path) -> PathBuf {
        let dir = parent.join(&self.name);
        std::fs::create_dir_all(&dir).unwrap();
        for sub in &self.dirs {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        for (rel, bytes) in &self.files {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        dir
    }

    /// Writes the team into a fresh temporary folder and loads it.
    pub fn load(&self) -> (tempfile::TempDir, Result<TeamDefinition, Error>) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = self.write(tmp.path());
        let result = load_team_dir(&dir, TeamSource::User);
        (tmp, result)
    }

    /// Loads the team, which must be invalid, and returns its issues.
    pub fn issues(&self) -> Vec<Issue> {
        match self.load().1 {
            Err(Error::Invalid { issues, .. }) => issues,
            other => panic!("expected an invalid team, got {other:?}"),
        }
    }

    /// The issues as (file, field, kind): what every validation test asserts whole.
    pub fn problems(&self) -> Vec<(String, Option<String>, IssueKind)> {
        self.issues().into_iter().map(problem).collect()
    }
}

pub fn problem(issue: Issue) -> (String, Option<String>, IssueKind) {
    (issue.file.display().to_string(), issue.field, issue.kind)
}

/// `(file, Some(field), kind)`.
pub fn at(file: &str, field: &str, kind: IssueKind) -> (String, Option<String>, IssueKind) {
    (file.to_string(), Some(field.to_string()), kind)
}

/// `(file, None, kind)`: an issue about a whole file.
pub fn whole(file: &str, kind: IssueKind) -> (String, Option<String>, IssueKind) {
    (file.to_string(), None, kind)
}

/// Every file under `dir` (relative paths, `/`-separated), for comparing whole trees.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap();
                let rel = rel.components().map(|c| c.as_os_str().to_string_lossy());
                out.insert(
                    rel.collect::<Vec<_>>().join("/"),
                    std::fs::read(&path).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Names of the entries in `dir`, sorted.
pub fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
