//! Every kind of validation error, each naming its file, its field and what is wrong.

use lumina_team::{Error, Issue, IssueKind as K};
use pretty_assertions::assert_eq;
use std::path::PathBuf;

use super::support::{at, whole, Fixture};

const TEAM: &str = "team.yaml";
const WORKER: &str = "agents/worker/agent.yaml";

fn team_yaml(extra: &str) -> String {
    format!("name: crew\nentry_agent: leader\nagents: [leader, worker, tester]\n{extra}")
}

fn with_team(extra: &str) -> Fixture {
    let mut f = Fixture::minimal("crew");
    f.set(TEAM, &team_yaml(extra));
    f
}

fn with_worker(yaml: &str) -> Fixture {
    let mut f = Fixture::minimal("crew");
    f.set(WORKER, yaml);
    f
}

#[test]
fn the_minimal_fixture_is_valid() {
    let (_tmp, team) = Fixture::minimal("crew").load();
    assert_eq!(team.unwrap().name, "crew");
}

#[test]
fn unknown_fields_are_errors_with_their_path() {
    assert_eq!(
        with_team("colour: blue\n").problems(),
        [at(TEAM, "colour", K::UnknownField)]
    );
    assert_eq!(
        with_team("loop:\n  max_parallel_agents: 2\n  speed: 3\n").problems(),
        [at(TEAM, "loop.speed", K::UnknownField)]
    );
    assert_eq!(
        with_team("gates: {require_contract: true, check: [ls]}\n").problems(),
        [at(TEAM, "gates.check", K::UnknownField)]
    );
    assert_eq!(
        with_worker("name: worker\nskills: [x]\n").problems(),
        [at(WORKER, "skills", K::UnknownField)]
    );
}

#[test]
fn an_unknown_field_is_reported_whole() {
    let issues = with_team("transcript:\n  show_everything: true\n").issues();
    assert_eq!(
        issues,
        [Issue {
            file: PathBuf::from(TEAM),
            field: Some("transcript.show_everything".into()),
            kind: K::UnknownField,
            message: "unknown field `show_everything`, expected one of show_member_dialogue, \
                      show_tool_details, show_thinking"
                .into(),
            position: Some((5, 3)),
        }]
    );
    assert_eq!(
        issues[0].to_string(),
        "team.yaml: transcript.show_everything: unknown field `show_everything`, expected one \
         of show_member_dialogue, show_tool_details, show_thinking (line 5, column 3)"
    );
}

#[test]
fn wrong_types_name_the_field() {
    let cases = [
        (
            "loop: {max_parallel_agents: many}\n",
            "loop.max_parallel_agents",
        ),
        ("loop: {max_iterations: -1}\n", "loop.max_iterations"),
        ("loop: {max_iterations: 1.5}\n", "loop.max_iterations"),
        (
            "loop: {completion_policy: whenever}\n",
            "loop.completion_policy",
        ),
        ("loop: {stop_policy: [recover]}\n", "loop.stop_policy"),
        ("gates: {require_contract: yes}\n", "gates.require_contract"),
        ("gates: {checks: cargo test}\n", "gates.checks"),
        ("gates: {checks: [ls, [nested]]}\n", "gates.checks[1]"),
        (
            "transcript: {show_thinking: 1}\n",
            "transcript.show_thinking",
        ),
        ("display_name: [a, b]\n", "display_name"),
    ];
    for (extra, field) in cases {
        assert_eq!(
            with_team(extra).problems(),
            [at(TEAM, field, K::WrongType)],
            "{extra}"
        );
    }
    let mut f = Fixture::minimal("crew");
    f.set(
        TEAM,
        "name: crew\nentry_agent: leader\nagents: [leader, {worker: 1}]\n",
    );
    assert_eq!(f.problems(), [at(TEAM, "agents[1]", K::WrongType)]);
    assert_eq!(
        with_worker("name: worker\nmax_turns_per_task: lots\n").problems(),
        [at(WORKER, "max_turns_per_task", K::WrongType)]
    );
    assert_eq!(
        with_worker("name: worker\ncommunicates_with: leader\n").problems(),
        [at(WORKER, "communicates_with", K::WrongType)]
    );
}

#[test]
fn missing_required_fields_are_named() {
    let mut f = Fixture::minimal("crew");
    f.set(TEAM, "name: crew\nagents: [leader, worker, tester]\n");
    assert_eq!(f.problems(), [at(TEAM, "entry_agent", K::MissingField)]);
    f.set(TEAM, "name: crew\nentry_agent: leader\n");
    assert_eq!(f.problems(), [at(TEAM, "agents", K::MissingField)]);
    assert_eq!(
        with_worker("display_name: Worker\n").problems(),
        [at(WORKER, "name", K::MissingField)]
    );
}

#[test]
fn entry_agent_must_be_a_member() {
    let mut f = Fixture::minimal("crew");
    f.set(
        TEAM,
        "name: crew\nentry_agent: boss\nagents: [leader, worker, tester]\n",
    );
    // With no entry agent, the default communicates_with leaves nobody reachable, but
    // reachability is only judged once the rest is valid.
    assert_eq!(f.problems(), [at(TEAM, "entry_agent", K::EntryNotMember)]);
}

#[test]
fn a_member_folder_must_exist() {
    let mut f = Fixture::minimal("crew");
    f.remove("agents/tester/agent.yaml")
        .remove("agents/tester/system.md");
    let issues = f.issues();
    assert_eq!(
        issues,
        [Issue {
            file: PathBuf::from(TEAM),
            field: Some("agents[2]".into()),
            kind: K::MissingMemberFolder,
            message: "member `tester` has no folder agents/tester/".into(),
            position: None,
        }]
    );
}

#[test]
fn member_files_must_exist_and_system_md_must_say_something() {
    let mut f = Fixture::minimal("crew");
    f.remove(WORKER).set("agents/tester/system.md", " \n\n");
    f.remove("agents/leader/system.md");
    assert_eq!(
        f.problems(),
        [
            whole("agents/leader/system.md", K::MissingFile),
            whole(WORKER, K::MissingFile),
            whole("agents/tester/system.md", K::InvalidValue),
        ]
    );
    let mut f = Fixture::minimal("crew");
    f.remove(TEAM);
    assert_eq!(f.problems(), [whole(TEAM, K::MissingFile)]);
}

#[test]
fn communicates_with_names_members_other_than_itself() {
    let f = with_worker("name: worker\ncommunicates_with: [ghost, worker, leader, leader]\n");
    assert_eq!(
        f.problems(),
        [
            at(WORKER, "communicates_with[0]", K::UnknownMember),
            at(WORKER, "communicates_with[1]", K::SelfReference),
            at(WORKER, "communicates_with[3]", K::Duplicate),
        ]
    );
    let f = with_worker("name: worker\ncommunicates_with: [Leader]\n");
    assert_eq!(
        f.problems(),
        [at(WORKER, "communicates_with[0]", K::InvalidName)]
    );
}

#[test]
fn every_member_must_be_reachable_from_the_entry_agent() {
    let mut f = Fixture::minimal("crew");
    f.set(
        "agents/leader/agent.yaml",
        "name: leader\ncommunicates_with: [worker]\n",
    );
    // tester talks to the leader by default, but nobody talks to tester.
    assert_eq!(f.problems(), [at(TEAM, "agents[2]", K::Unreachable)]);
    // Through a chain is fine.
    f.set(
        WORKER,
        "name: worker\ncommunicates_with: [leader, tester]\n",
    );
    assert!(f.load().1.is_ok());
}

#[test]
fn private_skills_must_exist_in_the_member_skills_folder() {
    let mut f = with_worker("name: worker\nprivate_skills: [plan, missing, plan]\n");
    f.set(
        "agents/worker/skills/plan/SKILL.md",
        "---\nname: plan\ndescription: Plans\n---\nSteps.\n",
    );
    let issues = f.issues();
    assert_eq!(
        issues
            .iter()
            .map(|i| (i.field.clone(), i.kind))
            .collect::<Vec<_>>(),
        [
            (Some("private_skills[1]".into()), K::UnknownSkill),
            (Some("private_skills[2]".into()), K::Duplicate),
        ]
    );
    assert_eq!(
        issues[0].message,
        "no skill `missing` in agents/worker/skills/ (it has: plan)"
    );
    // Without a skills folder at all.
    let f = with_worker("name: worker\nprivate_skills: [plan]\n");
    assert_eq!(
        f.problems(),
        [at(WORKER, "private_skills[0]", K::UnknownSkill)]
    );
}

#[test]
fn a_broken_private_skill_names_its_skill_file() {
    let mut f = Fixture::minimal("crew");
    f.set(
        "agents/worker/skills/bad/SKILL.md",
        "---\ndescription: \"never closed\n---\n",
    );
    assert_eq!(
        f.problems(),
        [whole("agents/worker/skills/bad/SKILL.md", K::InvalidSkill)]
    );
}

#[test]
fn counts_must_be_positive_and_bounded() {
    assert_eq!(
        with_team("loop: {max_parallel_agents: 0}\n").problems(),
        [at(TEAM, "loop.max_parallel_agents", K::InvalidValue)]
    );
    assert_eq!(
        with_team("loop: {max_parallel_agents: 1000}\n").problems(),
        [at(TEAM, "loop.max_parallel_agents", K::InvalidValue)]
    );
    assert_eq!(
        with_worker("name: worker\nmax_turns_per_task: 0\n").problems(),
        [at(WORKER, "max_turns_per_task", K::InvalidValue)]
    );
    let many: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    let mut f = Fixture::minimal("crew");
    f.set(
        TEAM,
        &format!(
            "name: crew\nentry_agent: m0\nagents: [{}]\n",
            many.join(", ")
        ),
    );
    let problems = f.problems();
    assert_eq!(problems[0], at(TEAM, "agents", K::TooMany));
}

#[test]
fn duplicate_members_and_bad_member_names() {
    let mut f = Fixture::minimal("crew");
    f.set(
        TEAM,
        "name: crew\nentry_agent: leader\nagents: [leader, worker, worker, tester, ../x]\n",
    );
    assert_eq!(
        f.problems(),
        [
            at(TEAM, "agents[2]", K::Duplicate),
            at(TEAM, "agents[4]", K::InvalidName),
        ]
    );
    let mut f = Fixture::minimal("crew");
    f.set(TEAM, "name: crew\nentry_agent: leader\nagents: []\n");
    assert_eq!(
        f.problems(),
        [
            at(TEAM, "agents", K::InvalidValue),
            at(TEAM, "entry_agent", K::EntryNotMember),
        ]
    );
}

#[test]
fn names_must_match_their_folders() {
    let mut f = Fixture::minimal("crew");
    f.set(
        TEAM,
        "name: other\nentry_agent: leader\nagents: [leader, worker, tester]\n",
    );
    f.set(WORKER, "name: tester\n");
    assert_eq!(
        f.problems(),
        [
            at(TEAM, "name", K::NameMismatch),
            at(WORKER, "name", K::NameMismatch)
        ]
    );
}

#[test]
fn oversized_and_non_utf8_files_are_refused() {
    let big = "x".repeat(256 * 1024 + 1);
    let mut f = Fixture::minimal("crew");
    f.set("agents/worker/system.md", &big);
    f.set_bytes(
        "agents/tester/agent.yaml",
        b"name: tester\n# \xff\xfe\n".to_vec(),
    );
    f.set("shared-prompt.md", &big);
    let issues = f.issues();
    assert_eq!(
        issues.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
        [
            "agents/worker/system.md: is larger than 256 KiB",
            "agents/tester/agent.yaml: is not valid UTF-8 (first bad byte at offset 15)",
            "shared-prompt.md: is larger than 256 KiB",
        ]
    );
    assert_eq!(
        issues.iter().map(|i| i.kind).collect::<Vec<_>>(),
        [K::TooLarge, K::NotUtf8, K::TooLarge]
    );
    let mut f = Fixture::minimal("crew");
    f.set(TEAM, &format!("{}# {big}\n", team_yaml("")));
    assert_eq!(f.problems(), [whole(TEAM, K::TooLarge)]);
    // Exactly at the cap is fine.
    let mut f = Fixture::minimal("crew");
    f.set("team-system.md", &"y".repeat(256 * 1024));
    assert!(f.load().1.is_ok());
}

#[test]
fn values_of_the_right_type_can_still_be_wrong() {
    assert_eq!(
        with_team("gates: {checks: [cargo test, '  ']}\n").problems(),
        [at(TEAM, "gates.checks[1]", K::InvalidValue)]
    );
    assert_eq!(
        with_team("display_name: \"a\\tb\"\n").problems(),
        [at(TEAM, "display_name", K::InvalidValue)]
    );
    assert_eq!(
        with_worker("name: worker\ntools: [read_file, '[a-', web fetch]\n").problems(),
        [
            at(WORKER, "tools[1]", K::InvalidValue),
            at(WORKER, "tools[2]", K::InvalidValue),
        ]
    );
    assert_eq!(
        with_worker("name: worker\nmodel: ''\n").problems(),
        [at(WORKER, "model", K::InvalidValue)]
    );
}

#[test]
fn yaml_syntax_errors_and_duplicate_keys() {
    let mut f = Fixture::minimal("crew");
    f.set(
        TEAM,
        "name: crew\nentry_agent: leader\nagents: [leader, worker\n",
    );
    let issues = f.issues();
    assert_eq!(issues.len(), 1);
    assert_eq!(
        (issues[0].kind, issues[0].file.clone()),
        (K::Syntax, TEAM.into())
    );
    assert!(issues[0].position.is_some(), "{issues:?}");

    f.set(TEAM, &team_yaml("name: again\n"));
    assert_eq!(f.problems()[0].2, K::DuplicateKey);

    f.set(TEAM, "# only a comment\n");
    let issues = f.issues();
    assert_eq!((issues[0].kind, issues[0].field.clone()), (K::Syntax, None));
    assert_eq!(
        issues[0].message,
        "the document is empty; expected a mapping of fields"
    );
}

#[test]
fn all_problems_are_reported_at_once() {
    let mut f = Fixture::minimal("crew");
    f.set(
        TEAM,
        "name: crew\nentry_agent: leader\nloop: {max_parallel_agents: 0}\n\
         agents: [leader, worker, tester, absent]\n",
    );
    f.set(WORKER, "name: worker\ncommunicates_with: [worker]\n");
    f.set(
        "agents/tester/agent.yaml",
        "name: tester\nprivate_skills: [nope]\n",
    );
    let err = f.load().1.unwrap_err();
    assert_eq!(
        err.issues()
            .iter()
            .cloned()
            .map(super::support::problem)
            .collect::<Vec<_>>(),
        [
            at(TEAM, "loop.max_parallel_agents", K::InvalidValue),
            at(WORKER, "communicates_with[0]", K::SelfReference),
            at(
                "agents/tester/agent.yaml",
                "private_skills[0]",
                K::UnknownSkill
            ),
            at(TEAM, "agents[3]", K::MissingMemberFolder),
        ]
    );
    let Error::Invalid { name, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(name, "crew");
    let text = err.to_string();
    assert!(
        text.contains("\n  - team.yaml: agents[3]: member `absent` has no folder agents/absent/"),
        "{text}"
    );
}

#[cfg(unix)]
#[test]
fn symbolic_links_are_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("secret.txt");
    std::fs::write(&secret, "private key").unwrap();
    let mut f = Fixture::minimal("crew");
    f.remove("agents/worker/system.md");
    let dir = f.write(tmp.path());
    std::os::unix::fs::symlink(&secret, dir.join("agents/worker/system.md")).unwrap();
    std::fs::create_dir_all(dir.join("agents/tester/skills")).unwrap();
    std::os::unix::fs::symlink(tmp.path(), dir.join("agents/tester/skills/linked")).unwrap();
    let err = lumina_team::load_team_dir(&dir, lumina_team::TeamSource::Project).unwrap_err();
    assert_eq!(
        err.issues()
            .iter()
            .cloned()
            .map(super::support::problem)
            .collect::<Vec<_>>(),
        [
            whole("agents/worker/system.md", K::NotRegular),
            whole("agents/tester/skills/linked", K::NotRegular),
        ]
    );
    assert!(!err.to_string().contains("private key"));

    // A linked `agents/` folder is refused as a whole.
    let elsewhere = tmp.path().join("elsewhere");
    let other = Fixture::minimal("other").write(tmp.path());
    std::fs::rename(other.join("agents"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, other.join("agents")).unwrap();
    let err = lumina_team::load_team_dir(&other, lumina_team::TeamSource::Project).unwrap_err();
    assert_eq!(
        err.issues()
            .iter()
            .cloned()
            .map(super::support::problem)
            .collect::<Vec<_>>(),
        [whole("agents", K::NotRegular)]
    );
}
