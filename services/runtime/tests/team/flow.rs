//! The product-development flow against the scripted model, with both API types.

use std::collections::BTreeMap;

use lumina_protocol::team::TeamTaskEnded;
use lumina_protocol::{Event, EventFrame, TaskStatus};
use lumina_team::TeamLocations;
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

const WORKERS: [&str; 4] = ["research", "ux-design", "frontend", "backend"];

fn leader(turn: Turn) -> Turn {
    turn.matching(LEADER)
}

fn as_member(name: &str, turn: Turn) -> Turn {
    // Slow streams so that the members of a round overlap in time.
    let mut turn = turn.matching(member(name));
    turn.chunk_delay_ms = 15;
    turn
}

fn dispatch(agent: &str) -> (String, serde_json::Value) {
    // The built-in team's task policy: every task names the criteria it serves.
    let criteria = if agent == "backend" {
        json!([1, 2])
    } else {
        json!([1])
    };
    (
        "team_dispatch".to_string(),
        json!({"agent": agent, "task": format!("TASK-{agent}: do your part of the feature"), "criteria": criteria}),
    )
}

fn script() -> Vec<Turn> {
    let mut round1 = Turn::default();
    for agent in WORKERS {
        let (name, args) = dispatch(agent);
        round1 = round1.with_tool_call(name, args);
    }
    let qa_task = |n: u32| {
        Turn::tool_call(
            "team_dispatch",
            json!({"agent": "qa", "task": format!("TASK-qa-{n}: verify every criterion"), "criteria": [1, 2]}),
        )
    };
    let mut turns = vec![
        leader(Turn::tool_call(
            "team_contract",
            json!({"goal": "a greeting endpoint", "acceptance_criteria": ["GET /hello answers hi", "it has a test"]}),
        )),
        leader(round1),
        leader(qa_task(1)),
        leader(Turn::tool_call(
            "team_complete",
            json!({"summary": "too early"}),
        )),
        leader(Turn::tool_call(
            "team_dispatch",
            json!({"agent": "backend", "task": "TASK-backend-fix: add the missing test", "criteria": [2]}),
        )),
        leader(qa_task(2).with_tool_call(
            "team_dispatch",
            json!({"agent": "reviewer", "task": "TASK-reviewer: review the change", "criteria": [1, 2]}),
        )),
        leader(Turn::tool_call(
            "team_complete",
            json!({"summary": "greeting endpoint shipped"}),
        )),
    ];
    for agent in WORKERS {
        if agent == "backend" {
            turns.push(as_member(
                agent,
                Turn::tool_call(
                    "write_file",
                    json!({"path": "hello.txt", "content": "hi\n"}),
                ),
            ));
        }
        turns.push(as_member(
            agent,
            Turn::text(format!("{agent} finished its part")),
        ));
    }
    turns.push(as_member(
        "qa",
        Turn::tool_call(
            "team_verdict",
            json!({"passed": false, "output": "criterion 2 fails: no test for GET /hello"}),
        ),
    ));
    turns.push(as_member("qa", Turn::text("QA: criterion 2 fails")));
    turns.push(as_member("backend", Turn::text("added the test")));
    turns.push(as_member(
        "qa",
        Turn::tool_call(
            "team_verdict",
            json!({"passed": true, "output": "both criteria hold"}),
        ),
    ));
    turns.push(as_member("qa", Turn::text("QA: all criteria pass")));
    turns.push(as_member(
        "reviewer",
        Turn::tool_call(
            "team_verdict",
            json!({"passed": true, "output": "approved"}),
        ),
    ));
    turns.push(as_member("reviewer", Turn::text("review: approved")));
    turns
}

/// `[start, end]` in ms of every member task, from its run's events on its stream.
fn task_spans(frames: &[EventFrame]) -> BTreeMap<String, (String, i64, i64)> {
    let mut spans: BTreeMap<String, (String, i64, i64)> = BTreeMap::new();
    for frame in frames.iter().filter(|f| f.stream.matches('/').count() == 2) {
        let agent = frame.stream.rsplit('/').next().unwrap().to_string();
        match &frame.event {
            Event::RunStarted { run_id, .. } => {
                spans.insert(run_id.clone(), (agent, frame.ts_ms, i64::MAX));
            }
            Event::RunCompleted { run_id, .. } | Event::RunFailed { run_id, .. } => {
                spans.get_mut(run_id).unwrap().2 = frame.ts_ms;
            }
            _ => {}
        }
    }
    spans
}

async fn product_development(api_type: &str) {
    let server = ScriptedModelServer::start(script()).unwrap();
    let world = World::new(&server, api_type);
    let runtime = world.runtime();
    let session = new_session(&runtime, &world.project).await;
    let entered = session.team_enter("product-development").await.unwrap();
    assert!(entered.created);
    assert_eq!(entered.entry_agent, "team-leader");
    submit(&session, "k1", "Build a greeting endpoint").await;
    wait_for(&session, "the leader's run to end", run_ended).await;
    let frames = events(&session).await;
    assert_contiguous(&frames);

    // The run completed with team_complete's summary.
    let end = frames.iter().rev().find(|f| f.stream == "main").unwrap();
    assert!(
        matches!(&end.event, Event::RunCompleted { result, .. } if result == "greeting endpoint shipped"),
        "{:?}",
        end.event
    );
    let board = format!("team/{}", entered.team_run_id);
    let kinds: Vec<&str> = frames
        .iter()
        .filter(|f| f.stream == board)
        .map(|f| f.event.kind())
        .filter(|k| *k != "team.task_dispatched" && *k != "team.task_ended")
        .collect();
    assert_eq!(
        kinds,
        vec![
            "team.contract_written",
            "team.round_started",
            "team.round_ended",
            "team.round_started",
            "team.gate_checked",
            "team.round_ended",
            // team_complete while QA's verdict fails: the contract, the task policy (both
            // criteria served by the backend) and the follow-ups (none) pass, the reviewer
            // has not given a verdict yet.
            "team.gate_checked",
            "team.gate_checked",
            "team.gate_checked",
            "team.gate_checked",
            "team.round_started",
            "team.round_ended",
            "team.round_started",
            "team.gate_checked",
            "team.gate_checked",
            "team.round_ended",
            // The contract, the task policy and the follow-ups again.
            "team.gate_checked",
            "team.gate_checked",
            "team.gate_checked",
        ]
    );
    let rounds: Vec<(u32, bool, bool)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamRoundStarted(r) => Some((r.round, r.recovery, false)),
            Event::TeamRoundEnded(r) => Some((r.round, r.passed, true)),
            _ => None,
        })
        .collect();
    assert_eq!(
        rounds,
        vec![
            (1, false, false),
            (1, true, true),
            (2, false, false),
            (2, false, true),
            // The recovery round after QA's failed verdict.
            (3, true, false),
            (3, true, true),
            (4, false, false),
            (4, true, true),
        ]
    );
    // The refused team_complete carried the failing gate's output.
    let leader_results = tool_results(&frames, "main");
    let refused = leader_results
        .iter()
        .find(|(tool, is_error, _)| tool == "team_complete" && *is_error)
        .unwrap();
    assert!(
        refused.2.contains("gate `qa` failed")
            && refused
                .2
                .contains("criterion 2 fails: no test for GET /hello"),
        "{}",
        refused.2
    );
    assert!(leader_results
        .iter()
        .any(|(tool, is_error, _)| tool == "team_complete" && !is_error));
    // Every task completed; the backend's file exists.
    let ended: Vec<(String, TaskStatus)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskEnded(TeamTaskEnded { agent, status, .. }) => {
                Some((agent.clone(), *status))
            }
            _ => None,
        })
        .collect();
    assert_eq!(ended.len(), 8);
    assert!(ended.iter().all(|(_, s)| *s == TaskStatus::Completed));
    assert_eq!(
        std::fs::read_to_string(world.project.join("hello.txt")).unwrap(),
        "hi\n"
    );

    // Round 1 ran in parallel, never more than max_parallel_agents (3) at once.
    let spans = task_spans(&frames);
    let round1: Vec<&(String, i64, i64)> = spans
        .values()
        .filter(|(agent, _, _)| WORKERS.contains(&agent.as_str()))
        .collect();
    let most = round1
        .iter()
        .map(|(_, start, _)| {
            round1
                .iter()
                .filter(|(_, s, e)| s <= start && start < e)
                .count()
        })
        .max()
        .unwrap();
    assert!(
        (2..=3).contains(&most),
        "{most} members worked at once: {round1:?}"
    );

    // Isolation: a member's request carries only its own prompt and its own tasks.
    let definition = TeamLocations::new(&world.app_root, Some(&world.project))
        .load("product-development")
        .unwrap();
    let prompt_line = |name: &str| {
        let text = &definition.member(name).unwrap().system_prompt;
        let line: String = text.lines().next().unwrap().chars().take(50).collect();
        serde_json::to_string(&line)
            .unwrap()
            .trim_matches('"')
            .to_string()
    };
    let requests = server.requests();
    let mut seen = BTreeMap::new();
    for request in &requests {
        let body = request.body.to_string();
        let Some(me) = definition
            .members
            .iter()
            .map(|m| m.name.as_str())
            .find(|name| body.contains(&member(name)))
        else {
            assert!(body.contains(LEADER), "a request that is nobody's");
            continue;
        };
        *seen.entry(me.to_string()).or_insert(0) += 1;
        assert!(!body.contains(LEADER), "{me} got the leader's prompt");
        assert!(
            !body.contains("Build a greeting endpoint"),
            "{me} saw the user"
        );
        assert!(body.contains(&prompt_line(me)), "{me} has its own prompt");
        for other in definition.members.iter().map(|m| m.name.as_str()) {
            if other == me {
                continue;
            }
            assert!(!body.contains(&member(other)), "{me} got {other}'s marker");
            assert!(
                !body.contains(&prompt_line(other)),
                "{me} got {other}'s prompt"
            );
            assert!(
                !body.contains(&format!("TASK-{other}")),
                "{me} saw {other}'s task"
            );
        }
    }
    let expected: BTreeMap<String, i32> = [
        ("backend", 3),
        ("frontend", 1),
        ("qa", 4),
        ("research", 1),
        ("reviewer", 2),
        ("ux-design", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(seen, expected, "each member's model requests");
    assert_eq!(server.remaining_turns(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn product_development_anthropic() {
    product_development("anthropic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn product_development_openai() {
    product_development("openai_compatible").await;
}
