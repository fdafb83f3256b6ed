//! The built-in teams load, validate and have the shape the issue asks for.

use std::collections::BTreeSet;

use lumina_config::AppRoot;
use lumina_team::{install_builtins, TeamDefinition, TeamLocations, TeamSource, BUILTIN_TEAMS};
use pretty_assertions::assert_eq;

use super::support::tree;

fn installed(name: &str) -> (tempfile::TempDir, TeamDefinition) {
    let tmp = tempfile::tempdir().unwrap();
    let app = AppRoot::new(tmp.path());
    install_builtins(&app).unwrap();
    let team = TeamLocations::new(&app, None).load(name).unwrap();
    (tmp, team)
}

fn names(team: &TeamDefinition) -> Vec<&str> {
    team.members.iter().map(|m| m.name.as_str()).collect()
}

fn peers<'a>(team: &'a TeamDefinition, member: &str) -> Vec<&'a str> {
    let member = team.member(member).unwrap();
    member
        .communicates_with
        .iter()
        .map(String::as_str)
        .collect()
}

fn skills<'a>(team: &'a TeamDefinition, member: &str) -> Vec<&'a str> {
    let member = team.member(member).unwrap();
    member.skills.iter().map(|s| s.name.as_str()).collect()
}

/// The leader talks with everyone and everyone with the leader.
fn assert_leader_hub(team: &TeamDefinition) {
    let leader = team.entry().unwrap();
    let others: Vec<&str> = names(team)
        .into_iter()
        .filter(|n| *n != leader.name)
        .collect();
    assert_eq!(peers(team, &leader.name), others);
    for other in others {
        assert!(team.can_message(other, &leader.name), "{other}");
    }
}

#[test]
fn product_development_loads_and_validates() {
    let (_tmp, team) = installed("product-development");
    assert_eq!(team.source, TeamSource::Builtin);
    assert_eq!(team.display_name, "Product development");
    assert_eq!(team.entry_agent, "team-leader");
    assert_eq!(
        names(&team),
        [
            "team-leader",
            "research",
            "ux-design",
            "frontend",
            "backend",
            "qa",
            "reviewer",
            "devops"
        ]
    );
    assert!(team.gates.require_contract);
    // The task-policy and follow-up gates are on (docs/teams.md, "Gates").
    assert_eq!(
        team.gates.task_policy,
        lumina_team::TaskPolicy {
            require_criteria: true,
            max_task_chars: 8000
        }
    );
    assert!(team.gates.follow_ups);
    assert_leader_hub(&team);
    assert_eq!(peers(&team, "qa"), ["team-leader", "frontend", "backend"]);
    assert_eq!(peers(&team, "reviewer"), ["team-leader"]);
    assert_eq!(skills(&team, "qa"), ["test-plan"]);
    assert_eq!(skills(&team, "reviewer"), ["review-checklist"]);
    assert!(team.member("research").unwrap().allows_tool("web_search"));
    assert!(!team
        .member("team-leader")
        .unwrap()
        .allows_tool("write_file"));
    assert!(team.member("backend").unwrap().allows_tool("shell"));
    assert!(!team.member("reviewer").unwrap().allows_tool("edit_file"));
    for text in [
        &team.team_system,
        &team.shared_prompt,
        &team.completion_policy,
    ] {
        assert!(text.len() > 200, "{text}");
    }
    assert!(team.completion_policy.contains("QA"));
    assert!(team.members.iter().all(|m| m.system_prompt.len() > 400));
}

#[test]
fn deep_research_loads_and_validates() {
    let (_tmp, team) = installed("deep-research");
    assert_eq!(team.entry_agent, "team-leader");
    assert_eq!(
        names(&team),
        [
            "team-leader",
            "scope-planner",
            "search-strategist",
            "source-reader",
            "evidence-analyst",
            "report-writer",
            "qa",
            "reviewer"
        ]
    );
    assert_leader_hub(&team);
    for researcher in ["search-strategist", "source-reader"] {
        let member = team.member(researcher).unwrap();
        assert!(member.allows_tool("web_search"), "{researcher}");
        assert!(member.allows_tool("web_fetch"), "{researcher}");
        assert!(!member.allows_tool("shell"), "{researcher}");
    }
    let writer = team.member("report-writer").unwrap();
    assert!(writer.allows_tool("write_file"));
    assert_eq!(skills(&team, "report-writer"), ["report-export"]);
    assert_eq!(skills(&team, "source-reader"), ["source-notes"]);
    let export = &writer.skills[0];
    assert!(export.body.contains("report.md") && export.body.contains("evidence.md"));
    assert!(writer.system_prompt.contains("[S3]"));
    assert!(team
        .completion_policy
        .contains("research/<topic-slug>/evidence.md"));
}

#[test]
fn every_file_under_builtin_is_embedded_and_nothing_else() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("builtin");
    let mut on_disk = BTreeSet::new();
    for team in std::fs::read_dir(&root).unwrap() {
        let team = team.unwrap().path();
        let name = team.file_name().unwrap().to_string_lossy().into_owned();
        for (rel, bytes) in tree(&team) {
            on_disk.insert((name.clone(), rel, bytes));
        }
    }
    let embedded: BTreeSet<_> = BUILTIN_TEAMS
        .iter()
        .flat_map(|t| {
            t.files.iter().map(|f| {
                (
                    t.name.to_string(),
                    f.path.to_string(),
                    f.contents.as_bytes().to_vec(),
                )
            })
        })
        .collect();
    assert_eq!(embedded, on_disk);
}
