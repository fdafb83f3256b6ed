//! create_team: the /NewTeam template.

use lumina_config::AppRoot;
use lumina_team::{create_team, user_teams_dir, Error, TeamLocations, TeamSource};
use pretty_assertions::assert_eq;

use super::support::{entries, tree};

#[test]
fn the_template_is_a_valid_team_that_explains_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let app = AppRoot::new(tmp.path());
    let display = "Ops \"night\" crew \\ ünïcode # not a comment";
    let dir = create_team(&app, "night-ops", display).unwrap();
    assert_eq!(dir, user_teams_dir(&app).join("night-ops"));

    let team = TeamLocations::new(&app, None).load("night-ops").unwrap();
    assert_eq!(
        (team.name.as_str(), team.display_name.as_str(), team.source),
        ("night-ops", display, TeamSource::User)
    );
    assert_eq!(team.entry_agent, "leader");
    let members: Vec<(&str, Vec<String>)> = team
        .members
        .iter()
        .map(|m| (m.name.as_str(), m.communicates_with.clone()))
        .collect();
    assert_eq!(
        members,
        [
            ("leader", vec!["specialist".to_string()]),
            ("specialist", vec!["leader".to_string()]),
        ]
    );
    let files: Vec<String> = tree(&dir).into_keys().collect();
    assert_eq!(
        files,
        [
            "agents/leader/agent.yaml",
            "agents/leader/system.md",
            "agents/specialist/agent.yaml",
            "agents/specialist/system.md",
            "completion-policy.md",
            "shared-prompt.md",
            "team-system.md",
            "team.yaml",
        ]
    );
    assert!(dir.join("agents/leader/skills").is_dir());
    // Every field of both schemas is written out with a comment.
    let team_yaml = std::fs::read_to_string(dir.join("team.yaml")).unwrap();
    for field in [
        "name:",
        "display_name:",
        "entry_agent:",
        "max_iterations:",
        "max_parallel_agents:",
        "completion_policy:",
        "stop_policy:",
        "require_contract:",
        "checks:",
        "show_member_dialogue:",
        "show_tool_details:",
        "show_thinking:",
        "agents:",
    ] {
        assert!(team_yaml.contains(field), "{field}");
    }
    let agent_yaml = std::fs::read_to_string(dir.join("agents/specialist/agent.yaml")).unwrap();
    for field in [
        "name:",
        "display_name:",
        "communicates_with:",
        "# model:",
        "tools:",
        "max_turns_per_task:",
        "private_skills:",
    ] {
        assert!(agent_yaml.contains(field), "{field}");
    }
    assert!(team_yaml.matches('#').count() > 15);
    // No temporary folder is left next to it.
    assert_eq!(entries(&user_teams_dir(&app)), ["night-ops"]);
}

#[test]
fn an_existing_name_is_refused_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let app = AppRoot::new(tmp.path());
    let dir = create_team(&app, "crew", "Crew").unwrap();
    std::fs::write(dir.join("team-system.md"), "mine").unwrap();
    let before = tree(&dir);
    let err = create_team(&app, "crew", "Other").unwrap_err();
    assert!(
        matches!(&err, Error::AlreadyExists { name, path } if name == "crew" && path == &dir),
        "{err:?}"
    );
    assert_eq!(tree(&dir), before);
    assert_eq!(entries(&user_teams_dir(&app)), ["crew"]);
    // A built-in of the same name does not block a user team (it overrides it).
    lumina_team::install_builtins(&app).unwrap();
    create_team(&app, "deep-research", "My research").unwrap();
    let team = TeamLocations::new(&app, None)
        .load("deep-research")
        .unwrap();
    assert_eq!(
        (team.source, team.display_name.as_str()),
        (TeamSource::User, "My research")
    );
}

#[test]
fn bad_display_names_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let app = AppRoot::new(tmp.path());
    for display in ["", "   ", "two\nlines", &"x".repeat(201)] {
        assert!(
            matches!(
                create_team(&app, "crew", display),
                Err(Error::InvalidDisplayName(_))
            ),
            "{display:?}"
        );
    }
    assert!(!user_teams_dir(&app).join("crew").exists());
}

#[test]
fn names_that_yaml_would_read_as_other_types_still_work() {
    let tmp = tempfile::tempdir().unwrap();
    let app = AppRoot::new(tmp.path());
    for name in ["null", "true", "123", "0x1f", "1e3"] {
        create_team(&app, name, name).unwrap();
        let team = TeamLocations::new(&app, None).load(name).unwrap();
        assert_eq!(team.name, name);
    }
}
