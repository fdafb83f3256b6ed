//! Team names are safe folder names everywhere a name comes in.

use lumina_config::AppRoot;
use lumina_team::{check_team_name, create_team, Error, IssueKind, NameProblem, TeamLocations};
use pretty_assertions::assert_eq;

use super::support::{entries, Fixture};

const HOSTILE: [(&str, NameProblem); 9] = [
    ("..", NameProblem::DotPath),
    (".", NameProblem::DotPath),
    ("../escape", NameProblem::PathSeparator),
    ("a/b", NameProblem::PathSeparator),
    ("/etc", NameProblem::PathSeparator),
    ("a\\b", NameProblem::PathSeparator),
    ("bell\u{7}", NameProblem::ControlCharacter),
    ("", NameProblem::Empty),
    ("Upper", NameProblem::BadStart('U')),
];

#[test]
fn hostile_names_are_refused_with_the_reason() {
    for (name, want) in HOSTILE {
        match check_team_name(name) {
            Err(Error::InvalidName { problem, .. }) => assert_eq!(problem, want, "{name:?}"),
            other => panic!("{name:?}: {other:?}"),
        }
    }
    assert!(check_team_name("product-development").is_ok());
}

#[test]
fn lookup_and_create_refuse_them_before_touching_the_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let app = AppRoot::new(tmp.path().join("home"));
    let project = tmp.path().join("project");
    let locations = TeamLocations::new(&app, Some(&project));
    // A team folder outside every location that a traversal would reach.
    Fixture::minimal("escape").write(tmp.path());
    for (name, _) in HOSTILE {
        assert!(
            matches!(locations.load(name), Err(Error::InvalidName { .. })),
            "{name:?}"
        );
        assert!(
            matches!(locations.find(name), Err(Error::InvalidName { .. })),
            "{name:?}"
        );
        assert!(
            matches!(create_team(&app, name, "X"), Err(Error::InvalidName { .. })),
            "{name:?}"
        );
    }
    assert_eq!(entries(tmp.path()), ["escape"]);
}

#[test]
fn a_folder_with_a_bad_name_is_listed_as_invalid() {
    let tmp = tempfile::tempdir().unwrap();
    let app = AppRoot::new(tmp.path());
    let teams = lumina_team::user_teams_dir(&app);
    let mut f = Fixture::minimal("Bad Name");
    f.set(
        "team.yaml",
        "name: Bad Name\ndisplay_name: Shouty\nentry_agent: leader\nagents: [leader, worker, tester]\n",
    );
    f.write(&teams);
    let catalog = TeamLocations::new(&app, None).list();
    assert_eq!(catalog.teams.len(), 1);
    let listing = &catalog.teams[0];
    assert_eq!(
        (
            listing.name.as_str(),
            listing.display_name.as_str(),
            listing.is_valid()
        ),
        ("Bad Name", "Shouty", false)
    );
    assert_eq!(listing.issues[0].kind, IssueKind::InvalidName);
}
