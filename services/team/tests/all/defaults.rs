//! What a team with every optional field left out looks like.

use lumina_team::{
    CompletionPolicy, GateConfig, LoopConfig, StopPolicy, TaskPolicy, TeamSource, TranscriptConfig,
    DEFAULT_MAX_PARALLEL_AGENTS, DEFAULT_MAX_TURNS_PER_TASK,
};
use pretty_assertions::assert_eq;

use super::support::Fixture;

#[test]
fn optional_fields_take_their_documented_defaults() {
    let mut f = Fixture::minimal("crew");
    f.set(
        "agents/worker/skills/b-skill/SKILL.md",
        "---\nname: b-skill\ndescription: B\n---\nDo B.\n",
    );
    f.set(
        "agents/worker/skills/a-skill/SKILL.md",
        "---\nname: a-skill\ndescription: A\n---\nDo A.\n",
    );
    let (_tmp, team) = f.load();
    let team = team.unwrap();

    assert_eq!(team.display_name, "crew");
    assert_eq!(team.source, TeamSource::User);
    assert_eq!(
        team.loop_config,
        LoopConfig {
            max_iterations: 0,
            max_parallel_agents: DEFAULT_MAX_PARALLEL_AGENTS,
            completion_policy: CompletionPolicy::LeaderAndGates,
            stop_policy: StopPolicy::Recover,
        }
    );
    assert_eq!(
        team.gates,
        GateConfig {
            require_contract: false,
            checks: vec![],
            task_policy: TaskPolicy {
                require_criteria: false,
                max_task_chars: 0,
            },
            follow_ups: false,
        }
    );
    assert_eq!(
        team.transcript,
        TranscriptConfig {
            show_member_dialogue: true,
            show_tool_details: false,
            show_thinking: false,
        }
    );
    assert_eq!(
        (
            team.team_system.as_str(),
            team.shared_prompt.as_str(),
            team.completion_policy.as_str()
        ),
        ("", "", "")
    );

    let summary: Vec<_> = team
        .members
        .iter()
        .map(|m| {
            (
                m.name.as_str(),
                m.display_name.as_str(),
                m.communicates_with.clone(),
                m.model.clone(),
                m.tools.patterns().to_vec(),
                m.max_turns_per_task,
                m.skills.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
            )
        })
        .collect();
    let all = vec!["*".to_string()];
    let leader = vec!["leader".to_string()];
    assert_eq!(
        summary,
        [
            (
                "leader",
                "leader",
                vec!["worker".to_string(), "tester".to_string()],
                None,
                all.clone(),
                DEFAULT_MAX_TURNS_PER_TASK,
                vec![],
            ),
            (
                "worker",
                "worker",
                leader.clone(),
                None,
                all.clone(),
                DEFAULT_MAX_TURNS_PER_TASK,
                vec!["a-skill".to_string(), "b-skill".to_string()],
            ),
            (
                "tester",
                "tester",
                leader,
                None,
                all,
                DEFAULT_MAX_TURNS_PER_TASK,
                vec![],
            ),
        ]
    );
    assert_eq!(team.entry().map(|m| m.name.as_str()), Some("leader"));
    assert!(team.can_message("leader", "tester"));
    assert!(team.can_message("tester", "leader"));
    assert!(!team.can_message("tester", "worker"));
    assert!(team.members[1].allows_tool("mcp__github__create_issue"));
    assert_eq!(team.members[1].system_prompt, "You are the worker.\n");
    assert_eq!(team.members[1].skills[0].body, "Do A.");
}

#[test]
fn given_fields_are_used_as_written() {
    let mut f = Fixture::minimal("crew");
    f.set(
        "team.yaml",
        "name: crew\ndisplay_name: '  The Crew  '\nentry_agent: leader\n\
         loop: {max_iterations: 7, max_parallel_agents: 2, completion_policy: leader, \
         stop_policy: stop_on_failure}\n\
         gates:\n  require_contract: true\n  follow_ups: true\n  task_policy: {require_criteria: true, max_task_chars: 2000}\n\
         \x20 checks:\n    - cargo test\n    - |\n      make lint\n      make docs\n\
         transcript: {show_member_dialogue: false, show_tool_details: true, show_thinking: true}\n\
         agents: [leader, worker, tester]\n",
    );
    f.set(
        "agents/worker/agent.yaml",
        "name: worker\ndisplay_name: Worker Bee\ncommunicates_with: [leader, tester]\n\
         model: small-model-1\ntools: [read_file, 'web_*']\nmax_turns_per_task: 5\n\
         private_skills: [Only]\n",
    );
    f.set(
        "agents/worker/skills/only/SKILL.md",
        "---\nname: only\n---\nJust this.\n",
    );
    f.set("agents/worker/skills/other/SKILL.md", "Other.\n");
    f.set("team-system.md", "\u{feff}Charter.\n");
    let (_tmp, team) = f.load();
    let team = team.unwrap();
    assert_eq!(team.display_name, "The Crew");
    assert_eq!(
        team.loop_config,
        LoopConfig {
            max_iterations: 7,
            max_parallel_agents: 2,
            completion_policy: CompletionPolicy::Leader,
            stop_policy: StopPolicy::StopOnFailure,
        }
    );
    assert_eq!(
        team.gates,
        GateConfig {
            require_contract: true,
            checks: vec!["cargo test".into(), "make lint\nmake docs\n".into()],
            task_policy: TaskPolicy {
                require_criteria: true,
                max_task_chars: 2000,
            },
            follow_ups: true,
        }
    );
    assert_eq!(
        team.transcript,
        TranscriptConfig {
            show_member_dialogue: false,
            show_tool_details: true,
            show_thinking: true,
        }
    );
    assert_eq!(team.team_system, "Charter.\n");
    let worker = team.member("worker").unwrap();
    assert_eq!(worker.display_name, "Worker Bee");
    assert_eq!(worker.communicates_with, ["leader", "tester"]);
    assert_eq!(worker.model.as_deref(), Some("small-model-1"));
    assert_eq!(worker.max_turns_per_task, 5);
    assert_eq!(
        worker
            .skills
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["only"]
    );
    let allowed: Vec<bool> = [
        "read_file",
        "web_fetch",
        "web_search",
        "shell",
        "read_file2",
    ]
    .iter()
    .map(|t| worker.allows_tool(t))
    .collect();
    assert_eq!(allowed, [true, true, true, false, false]);
    // The leader's default still covers every other member.
    assert_eq!(
        team.member("leader").unwrap().communicates_with,
        ["worker", "tester"]
    );
}
