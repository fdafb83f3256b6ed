//! `agent.yaml` `a2a`: a member that is a remote A2A agent, by peer name or URL. Every
//! mistake is an issue naming the member's `agent.yaml` and the field.

use lumina_team::{IssueKind as K, RemoteAgent};
use pretty_assertions::assert_eq;

use super::support::{at, Fixture};

const WORKER: &str = "agents/worker/agent.yaml";

fn worker(yaml: &str) -> Fixture {
    let mut f = Fixture::minimal("crew");
    f.set(WORKER, &format!("name: worker\n{yaml}"));
    f
}

#[test]
fn a_member_may_be_a_peer_or_an_url_and_needs_no_system_prompt() {
    let (_tmp, team) = worker("a2a: {peer: research}\n").load();
    let team = team.unwrap();
    let member = team.member("worker").unwrap();
    assert_eq!(member.remote, Some(RemoteAgent::Peer("research".into())));
    assert!(member.is_remote());
    assert_eq!(member.remote.as_ref().unwrap().agent(), "research");
    // Defaults still apply to what the team does with it: it talks with the leader.
    assert_eq!(member.communicates_with, ["leader"]);
    assert!(!team.member("tester").unwrap().is_remote());

    let mut f = worker("a2a:\n  url: https://agents.example.com/research\n");
    f.remove("agents/worker/system.md");
    let (_tmp, team) = f.load();
    let team = team.unwrap();
    assert_eq!(
        team.member("worker").unwrap().remote,
        Some(RemoteAgent::Url(
            "https://agents.example.com/research".into()
        ))
    );
    assert_eq!(team.member("worker").unwrap().system_prompt, "");
}

#[test]
fn a_broken_a2a_block_names_file_and_field() {
    let cases = [
        (
            "a2a: {peer: r, url: 'https://x.example'}\n",
            "a2a",
            K::InvalidValue,
        ),
        ("a2a: {}\n", "a2a", K::InvalidValue),
        (
            "a2a: {url: 'ftp://x.example'}\n",
            "a2a.url",
            K::InvalidValue,
        ),
        ("a2a: {url: 'https://'}\n", "a2a.url", K::InvalidValue),
        (
            "a2a: {url: 'https://u:p@x.example'}\n",
            "a2a.url",
            K::InvalidValue,
        ),
        (
            "a2a: {url: 'https://x.example/a b'}\n",
            "a2a.url",
            K::InvalidValue,
        ),
        ("a2a: {peer: 'no/such peer'}\n", "a2a.peer", K::InvalidName),
    ];
    for (yaml, field, kind) in cases {
        assert_eq!(worker(yaml).problems(), [at(WORKER, field, kind)], "{yaml}");
    }
    assert_eq!(worker("a2a: {host: x}\n").problems()[0].2, K::UnknownField);
    let long = format!("a2a: {{url: 'https://x.example/{}'}}\n", "a".repeat(2100));
    assert_eq!(
        worker(&long).problems(),
        [at(WORKER, "a2a.url", K::InvalidValue)]
    );
}

#[test]
fn local_only_fields_on_a_remote_member_are_errors() {
    let f = worker(
        "a2a: {peer: research}\nmodel: some-model\ntools: [read_file]\nmax_turns_per_task: 3\nprivate_skills: []\n",
    );
    assert_eq!(
        f.problems(),
        [
            at(WORKER, "model", K::InvalidValue),
            at(WORKER, "tools", K::InvalidValue),
            at(WORKER, "max_turns_per_task", K::InvalidValue),
            at(WORKER, "private_skills", K::InvalidValue),
        ]
    );
    let message = f.issues()[0].to_string();
    assert!(
        message.contains("has no effect on a remote A2A member"),
        "{message}"
    );
    // Skills in its folder are refused too.
    let mut f = worker("a2a: {peer: research}\n");
    f.set(
        "agents/worker/skills/notes/SKILL.md",
        "---\nname: notes\ndescription: Take notes.\n---\nBody.\n",
    );
    let problems = f.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].0, "agents/worker/skills");
}

#[test]
fn the_entry_agent_and_the_gates_run_here() {
    let mut f = Fixture::minimal("crew");
    f.set(
        "agents/leader/agent.yaml",
        "name: leader\na2a: {url: 'https://x.example'}\n",
    );
    let issues = f.issues();
    assert_eq!(
        issues.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
        [
            "agents/leader/agent.yaml: a2a: the entry agent `leader` cannot be a remote A2A \
          agent: it runs the team here"
        ]
    );

    let mut f = Fixture::minimal("crew");
    f.set(
        "team.yaml",
        "name: crew\nentry_agent: leader\nagents: [leader, worker, tester, qa]\n",
    );
    f.set("agents/qa/agent.yaml", "name: qa\na2a: {peer: checker}\n");
    assert_eq!(
        f.problems(),
        [at("agents/qa/agent.yaml", "a2a", K::InvalidValue)]
    );
}
