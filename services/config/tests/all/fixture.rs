//! A throwaway AppRoot and project directory.

use std::path::{Path, PathBuf};

use lumina_config::{load, AppRoot, Env, Result, Settings};
use serde_json::{Map, Value};

pub struct Fixture {
    _tmp: tempfile::TempDir,
    pub root: AppRoot,
    pub project: PathBuf,
}

impl Fixture {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = AppRoot::new(tmp.path().join("home"));
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        Self {
            _tmp: tmp,
            root,
            project,
        }
    }

    pub fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn user(&self, json: Value) -> &Self {
        Self::write(&self.root.settings_file(), &json.to_string());
        self
    }

    pub fn project_defaults(&self, json: Value) -> &Self {
        Self::write(
            &lumina_config::project_defaults_file(&self.project),
            &json.to_string(),
        );
        self
    }

    pub fn load(&self, env: &[(&str, &str)], cli: Value) -> Result<Settings> {
        let cli: Map<String, Value> = match cli {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        load(
            &self.root,
            Some(&self.project),
            &Env::from_pairs(env.iter().copied()),
            &cli,
        )
    }

    /// The defaults as `load` returns them for this fixture (settings file recorded).
    pub fn defaults(&self) -> Settings {
        Settings {
            settings_file: Some(self.root.settings_file()),
            ..Settings::default()
        }
    }
}
