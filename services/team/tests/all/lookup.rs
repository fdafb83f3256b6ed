//! Lookup order (project > user > built-in) and listing.

use std::path::{Path, PathBuf};

use lumina_config::AppRoot;
use lumina_team::{Error, IssueKind, TeamLocations, TeamSource};
use pretty_assertions::assert_eq;

use super::support::Fixture;

struct Layers {
    _tmp: tempfile::TempDir,
    app: AppRoot,
    project: PathBuf,
}

impl Layers {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let app = AppRoot::new(tmp.path().join("home"));
        let project = tmp.path().join("project");
        Layers {
            _tmp: tmp,
            app,
            project,
        }
    }

    fn dir(&self, source: TeamSource) -> PathBuf {
        match source {
            TeamSource::Project => self.project.join(".Lumina").join("TEAM"),
            TeamSource::User => self.app.path().join("config").join("teams"),
            TeamSource::Builtin => self.app.path().join("app/resources/teams"),
        }
    }

    /// A valid team `name` in `source` whose display name says where it is.
    fn put(&self, source: TeamSource, name: &str) -> PathBuf {
        let mut f = Fixture::minimal(name);
        f.set(
            "team.yaml",
            &format!(
                "name: {name}\ndisplay_name: {name} from {}\nentry_agent: leader\n\
                 agents: [leader, worker, tester]\n",
                source.as_str()
            ),
        );
        f.write(&self.dir(source))
    }

    fn locations(&self) -> TeamLocations {
        TeamLocations::new(&self.app, Some(&self.project))
    }
}

fn loaded_from(locations: &TeamLocations, name: &str) -> (TeamSource, String) {
    let team = locations.load(name).unwrap();
    (team.source, team.display_name)
}

#[test]
fn project_overrides_user_overrides_builtin() {
    let layers = Layers::new();
    let locations = layers.locations();
    assert_eq!(
        locations.dirs(),
        [
            (
                TeamSource::Project,
                layers.dir(TeamSource::Project).as_path()
            ),
            (TeamSource::User, layers.dir(TeamSource::User).as_path()),
            (
                TeamSource::Builtin,
                layers.dir(TeamSource::Builtin).as_path()
            ),
        ]
    );

    layers.put(TeamSource::Builtin, "crew");
    assert_eq!(
        loaded_from(&locations, "crew"),
        (TeamSource::Builtin, "crew from builtin".into())
    );
    layers.put(TeamSource::User, "crew");
    assert_eq!(
        loaded_from(&locations, "crew"),
        (TeamSource::User, "crew from user".into())
    );
    let project_dir = layers.put(TeamSource::Project, "crew");
    assert_eq!(
        loaded_from(&locations, "crew"),
        (TeamSource::Project, "crew from project".into())
    );
    assert_eq!(
        locations.find("crew").unwrap(),
        Some((TeamSource::Project, project_dir))
    );
    // Outside a project the user's wins.
    let no_project = TeamLocations::new(&layers.app, None);
    assert_eq!(
        loaded_from(&no_project, "crew"),
        (TeamSource::User, "crew from user".into())
    );
}

#[test]
fn a_broken_higher_layer_is_reported_not_skipped() {
    let layers = Layers::new();
    layers.put(TeamSource::Builtin, "crew");
    let user = layers.put(TeamSource::User, "crew");
    std::fs::write(
        user.join("team.yaml"),
        "name: crew\nentry_agent: nobody\nagents: [leader]\n",
    )
    .unwrap();
    let err = layers.locations().load("crew").unwrap_err();
    let Error::Invalid { dir, issues, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(dir, &user);
    assert_eq!(issues[0].kind, IssueKind::EntryNotMember);
}

#[test]
fn a_missing_team_names_every_place_looked() {
    let layers = Layers::new();
    let err = layers.locations().load("ghost").unwrap_err();
    let Error::NotFound { name, searched } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(name, "ghost");
    assert_eq!(
        searched,
        &[
            layers.dir(TeamSource::Project).join("ghost"),
            layers.dir(TeamSource::User).join("ghost"),
            layers.dir(TeamSource::Builtin).join("ghost"),
        ]
    );
}

#[test]
fn listing_shows_every_team_once_with_source_validity_and_shadows() {
    let layers = Layers::new();
    layers.put(TeamSource::Builtin, "alpha");
    layers.put(TeamSource::User, "alpha");
    layers.put(TeamSource::Builtin, "beta");
    layers.put(TeamSource::Project, "gamma");
    let broken = layers.put(TeamSource::User, "delta");
    std::fs::remove_file(broken.join("agents/worker/system.md")).unwrap();
    // Not teams: hidden folders (temporary installs), plain files.
    let user = layers.dir(TeamSource::User);
    std::fs::create_dir_all(user.join(".alpha.tmp-1-2-3")).unwrap();
    std::fs::write(user.join("README.md"), "my teams").unwrap();

    let catalog = layers.locations().list();
    assert_eq!(catalog.errors, Vec::<String>::new());
    let rows: Vec<_> = catalog
        .teams
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.display_name.as_str(),
                t.source,
                t.is_valid(),
                t.shadows.clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "alpha",
                "alpha from user",
                TeamSource::User,
                true,
                vec![TeamSource::Builtin]
            ),
            (
                "beta",
                "beta from builtin",
                TeamSource::Builtin,
                true,
                vec![]
            ),
            ("delta", "delta from user", TeamSource::User, false, vec![]),
            (
                "gamma",
                "gamma from project",
                TeamSource::Project,
                true,
                vec![]
            ),
        ]
    );
    let delta = catalog.get("delta").unwrap();
    assert_eq!(delta.path, broken);
    assert_eq!(
        delta
            .issues
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>(),
        ["agents/worker/system.md: is missing"]
    );
    assert!(
        delta
            .error
            .as_deref()
            .is_some_and(|e| e.contains("agents/worker/system.md: is missing")),
        "{delta:?}"
    );
}

#[test]
fn listing_a_team_whose_yaml_is_garbage_falls_back_to_its_name() {
    let layers = Layers::new();
    let dir = layers.put(TeamSource::User, "junk");
    std::fs::write(dir.join("team.yaml"), "{{{{").unwrap();
    let catalog = layers.locations().list();
    let junk = catalog.get("junk").unwrap();
    assert_eq!(
        (junk.display_name.as_str(), junk.is_valid()),
        ("junk", false)
    );
    assert_eq!(junk.issues[0].kind, IssueKind::Syntax);
}

#[test]
fn nothing_anywhere_lists_nothing() {
    let layers = Layers::new();
    let catalog = layers.locations().list();
    assert_eq!((catalog.teams.len(), catalog.errors.len()), (0, 0));
    assert!(!Path::new(&layers.dir(TeamSource::User)).exists());
}
