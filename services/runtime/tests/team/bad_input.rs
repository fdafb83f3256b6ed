//! Bad input: an unknown team, a dispatch before the contract and to the leader itself, a
//! message outside `communicates_with`, over the per-round cap, and `team_complete` while a
//! check fails.

use lumina_protocol::{ErrorCode, Event};
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_team_is_not_found() {
    let server = ScriptedModelServer::start(vec![]).unwrap();
    let world = World::new(&server, "anthropic");
    let runtime = world.runtime();
    let session = new_session(&runtime, &world.project).await;
    let err = session.team_enter("no-such-team").await.unwrap_err();
    assert_eq!(err.to_error_object().code, ErrorCode::NotFound);
    let err = session.team_enter("../etc").await.unwrap_err();
    assert_eq!(err.to_error_object().code, ErrorCode::InvalidParams);
    // Leaving no team is fine; the team list has the built-ins.
    assert_eq!(session.team_exit().await.unwrap().team_run_id, None);
    let listed = runtime.list_teams(Some(session.id()), None).await.unwrap();
    let names: Vec<&str> = listed.teams.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["deep-research", "product-development"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_calls_are_error_results() {
    let server = ScriptedModelServer::start(vec![
        // Before the contract.
        Turn::tool_call("team_dispatch", json!({"agent": "backend", "task": "x"})).matching(LEADER),
        Turn::tool_call(
            "team_contract",
            json!({"goal": "g", "acceptance_criteria": ["done.txt exists"]}),
        )
        .matching(LEADER),
        // To itself, to nobody, and twice to one member in one round.
        Turn::tool_call("team_dispatch", json!({"agent": "leader", "task": "x"}))
            .with_tool_call("team_dispatch", json!({"agent": "nobody", "task": "x"}))
            .with_tool_call(
                "team_dispatch",
                json!({"agent": "frontend", "task": "TASK-f"}),
            )
            .with_tool_call(
                "team_dispatch",
                json!({"agent": "frontend", "task": "again"}),
            )
            .matching(LEADER),
        // The frontend may talk to the leader only; then the round's cap (2) is reached.
        Turn::tool_call("team_message", json!({"to": "backend", "text": "psst"}))
            .with_tool_call("team_message", json!({"to": "frontend", "text": "me"}))
            .with_tool_call("team_message", json!({"to": "leader", "text": "one"}))
            .with_tool_call("team_message", json!({"to": "leader", "text": "two"}))
            .with_tool_call("team_message", json!({"to": "leader", "text": "three"}))
            .matching(member("frontend")),
        Turn::text("frontend done").matching(member("frontend")),
        // A failing check refuses completion with its output.
        Turn::tool_call("team_complete", json!({"summary": "s"})).matching(LEADER),
        Turn::text("I will fix that next time").matching(LEADER),
    ])
    .unwrap();
    let world = World::new(&server, "anthropic");
    world.crew(
        "gates:\n  require_contract: true\n  checks: [\"test -f done.txt || (echo done.txt is missing; exit 3)\"]\n",
    );
    std::fs::write(
        world.app_root.config_dir().join("settings.json"),
        r#"{"team_max_messages_per_round": 2}"#,
    )
    .unwrap();
    let runtime = world.runtime();
    let session = new_session(&runtime, &world.project).await;
    session.team_enter("crew").await.unwrap();
    submit(&session, "k1", "Go").await;
    wait_for(&session, "the run to end", run_ended).await;
    let frames = events(&session).await;
    let leader = tool_results(&frames, "main");
    let errors: Vec<(&str, &str)> = leader
        .iter()
        .filter(|(_, is_error, _)| *is_error)
        .map(|(tool, _, out)| (tool.as_str(), out.as_str()))
        .collect();
    assert_eq!(errors.len(), 5, "{errors:#?}");
    assert!(
        errors[0].1.contains("gates.require_contract"),
        "{}",
        errors[0].1
    );
    assert!(
        errors[1].1.contains("a member cannot dispatch to itself"),
        "{}",
        errors[1].1
    );
    assert!(
        errors[2].1.contains("no member `nobody`"),
        "{}",
        errors[2].1
    );
    assert!(
        errors[3].1.contains("has a task in this round already"),
        "{}",
        errors[3].1
    );
    assert_eq!(errors[4].0, "team_complete");
    assert!(
        errors[4].1.contains("check:test -f done.txt")
            && errors[4].1.contains("done.txt is missing"),
        "{}",
        errors[4].1
    );
    // The frontend's messages.
    let stream = frames
        .iter()
        .find(|f| f.stream.ends_with("/frontend"))
        .unwrap()
        .stream
        .clone();
    let member_results = tool_results(&frames, &stream);
    let messages: Vec<(bool, &str)> = member_results
        .iter()
        .filter(|(tool, _, _)| tool == "team_message")
        .map(|(_, is_error, out)| (*is_error, out.as_str()))
        .collect();
    assert_eq!(messages.len(), 5);
    assert!(
        messages[0].0 && messages[0].1.contains("may not message `backend`"),
        "{:?}",
        messages[0]
    );
    assert!(
        messages[1].0 && messages[1].1.contains("is you"),
        "{:?}",
        messages[1]
    );
    assert!(!messages[2].0 && !messages[3].0);
    assert!(
        messages[4].0 && messages[4].1.contains("team_max_messages_per_round = 2"),
        "{:?}",
        messages[4]
    );
    // Both messages sent reached the leader with the frontend's result, the refused one not.
    let result = leader
        .iter()
        .find(|(tool, is_error, _)| tool == "team_dispatch" && !is_error)
        .unwrap();
    assert!(
        result.2.contains("from `frontend`: one") && result.2.contains("from `frontend`: two"),
        "{}",
        result.2
    );
    assert!(!result.2.contains("three"));
    // The check's failure is a gate result; the run ended without team.completed.
    assert!(frames.iter().any(|f| matches!(&f.event,
        Event::TeamGateChecked(g) if g.name.starts_with("check:") && !g.passed)));
    assert!(!frames
        .iter()
        .any(|f| matches!(f.event, Event::TeamCompleted(_))));
}
