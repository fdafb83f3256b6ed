//! A team member that is a remote A2A agent (`a2a: {peer: research}` in its agent.yaml),
//! between two in-process backends: the leader dispatches to it, the remote backend runs the
//! task with its own scripted model, and its answer comes back as the member's report, with
//! every step journaled on the member's stream. A remote that is down fails the task with
//! the reason (nothing runs locally) and the next round is a recovery round.

use lumina_protocol::methods::TeamEnterParams;
use lumina_protocol::{DelegateStep, Event, EventFrame, TaskStatus};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;
use crate::team::{write, LEADER};

/// The remote backend: node `remote`, accepting node `caller` signing with `public_key`.
async fn remote(turns: Vec<Turn>, public_key: &str) -> Harness {
    let peer = json!({"node": "remote", "nodes": {"caller": {"ed25519_public_key": public_key}}});
    Harness::start_with("anthropic", turns, &[("LUMINA_PEER", &peer.to_string())]).await
}

/// The calling backend: knows `remote_url` as peer `research` (whose node is `remote`),
/// signs with `seed`, and has the team `lab` (leader `lead`, remote member `research`).
async fn caller(turns: Vec<Turn>, remote_url: &str, seed: &str) -> Harness {
    let peer = json!({"node": "caller", "ed25519_private_key": seed});
    let peers = json!({"research": {"url": remote_url, "node": "remote"}});
    let h = Harness::start_with(
        "anthropic",
        turns,
        &[
            ("LUMINA_PEER", &peer.to_string()),
            ("LUMINA_A2A_PEERS", &peers.to_string()),
        ],
    )
    .await;
    let root = h.project.join(".Lumina/TEAM/lab");
    write(
        &root,
        "team.yaml",
        "name: lab\nentry_agent: lead\nagents: [lead, research]\n",
    );
    write(&root, "agents/lead/agent.yaml", "name: lead\n");
    write(&root, "agents/lead/system.md", "Lead the work.\n");
    write(
        &root,
        "agents/research/agent.yaml",
        "name: research\na2a: {peer: research}\n",
    );
    h
}

/// Enters `lab`, runs `prompt`, and returns the team run id and every event of the session.
async fn run_team(h: &Harness, prompt: &str) -> (String, Vec<EventFrame>) {
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let entered = client
        .calls()
        .team_enter(&TeamEnterParams {
            session_id: session.id.clone(),
            team: "lab".into(),
        })
        .await
        .unwrap();
    let run = client
        .session_submit(&submit(&session.id, prompt, bypass()))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    let all = client
        .session_events(&session.id, 0, Some(1000))
        .await
        .unwrap()
        .events;
    assert_contiguous(&all);
    (entered.team_run_id, all)
}

fn on_stream<'a>(frames: &'a [EventFrame], stream: &str) -> Vec<&'a Event> {
    frames
        .iter()
        .filter(|f| f.stream == stream)
        .map(|f| &f.event)
        .collect()
}

fn ended(frames: &[EventFrame]) -> Vec<(String, TaskStatus, String)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskEnded(e) => Some((e.agent.clone(), e.status, e.summary.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_remote_member_reports_the_remote_runs_answer() {
    let keys = lumina_peer::generate_ed25519().unwrap();
    let remote = remote(
        vec![Turn::text("research findings: the answer is 42")],
        &keys.public_key,
    )
    .await;
    let local = caller(
        vec![
            Turn::tool_call(
                "team_dispatch",
                json!({"agent": "research", "task": "find the answer"}),
            )
            .matching(LEADER),
            Turn::tool_call("team_complete", json!({"summary": "the answer is 42"}))
                .matching(LEADER),
        ],
        &remote
            .url
            .replace("ws://", "http://")
            .replace(lumina_protocol::WS_PATH, ""),
        keys.private_seed.expose(),
    )
    .await;

    let (team_run_id, frames) = run_team(&local, "What is the answer?").await;
    assert!(
        frames.iter().any(|f| matches!(
            &f.event,
            Event::RunCompleted { result, .. } if result == "the answer is 42"
        )),
        "the leader's run completed"
    );
    let ended = ended(&frames);
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(
        (ended[0].0.as_str(), ended[0].1),
        ("research", TaskStatus::Completed)
    );
    assert_eq!(ended[0].2, "research findings: the answer is 42");
    // The leader read it as the team_dispatch result.
    let outputs = tool_outputs(&frames);
    let dispatch = outputs.iter().find(|o| o.0 == "team_dispatch").unwrap();
    assert!(!dispatch.1, "{}", dispatch.2);
    assert!(
        dispatch.2.contains("research findings: the answer is 42"),
        "{}",
        dispatch.2
    );

    // The member's stream: the task, each A2A step, the result.
    let member = on_stream(&frames, &format!("team/{team_run_id}/research"));
    assert!(
        matches!(member.first(), Some(Event::RunStarted { model, .. }) if model == "a2a:research"),
        "{member:?}"
    );
    let steps: Vec<DelegateStep> = member
        .iter()
        .filter_map(|e| match e {
            Event::DelegateUpdated { step, .. } => Some(*step),
            _ => None,
        })
        .collect();
    assert_eq!(steps.first(), Some(&DelegateStep::Card), "{steps:?}");
    assert_eq!(steps.get(1), Some(&DelegateStep::Sent), "{steps:?}");
    assert_eq!(steps.last(), Some(&DelegateStep::Ended), "{steps:?}");
    assert!(
        matches!(member.last(), Some(Event::RunCompleted { result, .. }) if result.contains("42")),
        "{member:?}"
    );

    // The remote ran it (with the task text); locally only the leader's model was asked.
    let asked = remote.model.requests();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].body.to_string().contains("find the answer"));
    assert_eq!(local.model.requests().len(), 2);
}

#[tokio::test]
async fn a_remote_member_that_is_down_fails_its_task_and_the_next_round_recovers() {
    let keys = lumina_peer::generate_ed25519().unwrap();
    // A port nobody listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let dispatch = || {
        Turn::tool_call(
            "team_dispatch",
            json!({"agent": "research", "task": "find the answer"}),
        )
        .matching(LEADER)
    };
    let local = caller(
        vec![
            dispatch(),
            dispatch(),
            Turn::text("research is unreachable; try later").matching(LEADER),
        ],
        &format!("http://127.0.0.1:{port}"),
        keys.private_seed.expose(),
    )
    .await;

    let (team_run_id, frames) = run_team(&local, "What is the answer?").await;
    let ended = ended(&frames);
    assert_eq!(ended.len(), 2, "{ended:?}");
    for (agent, status, summary) in &ended {
        assert_eq!((agent.as_str(), *status), ("research", TaskStatus::Failed));
        assert!(summary.contains("input-required: "), "{summary}");
        assert!(summary.contains("could not be reached"), "{summary}");
    }
    let rounds: Vec<(u32, bool)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamRoundStarted(r) => Some((r.round, r.recovery)),
            _ => None,
        })
        .collect();
    assert_eq!(rounds, vec![(1, false), (2, true)]);
    // Each failed task journaled its unreachable step on the member's stream; nothing ran
    // locally: only the leader's three model turns.
    let member = on_stream(&frames, &format!("team/{team_run_id}/research"));
    let unreachable = member
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::DelegateUpdated {
                    step: DelegateStep::Unreachable,
                    ..
                }
            )
        })
        .count();
    assert_eq!(unreachable, 2, "{member:?}");
    assert_eq!(local.model.requests().len(), 3);
}
