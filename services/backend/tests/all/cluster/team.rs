//! An agent team in the cluster: `kill -9` of the session's owner in the middle of a round;
//! a survivor takes the session over, the same round resumes, the interrupted member task
//! runs once more, the completed one is not re-run, and every write stays fenced.

use std::time::Duration;

use lumina_protocol::methods::{SessionCreateParams, TeamEnterParams};
use lumina_protocol::{Event, EventFrame, TaskStatus};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;
use crate::support::{assert_contiguous, submit};

const LEADER: &str = "You lead the agent team";

fn member(name: &str) -> String {
    format!("You are `{name}`, a member of the agent team")
}

async fn all_events(client: &lumina_client::Client, session: &str) -> Vec<EventFrame> {
    client
        .session_events(session, 0, Some(1000))
        .await
        .unwrap()
        .events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_owner_mid_round_resumes_the_round_on_a_survivor() {
    let mut stalled = Turn::text("half a page").matching(member("frontend"));
    stalled.stall_after_chunks = Some(2);
    let cluster = Cluster::start(
        3,
        vec![
            Turn::tool_call(
                "team_dispatch",
                json!({"agent": "backend", "task": "server"}),
            )
            .with_tool_call(
                "team_dispatch",
                json!({"agent": "frontend", "task": "page"}),
            )
            .matching(LEADER),
            Turn::text("server written").matching(member("backend")),
            stalled,
            Turn::text("page written").matching(member("frontend")),
            Turn::tool_call("team_complete", json!({"summary": "shipped"})).matching(LEADER),
        ],
    )
    .await;
    let mut cluster = cluster;
    let root = cluster.project.join(".Lumina/TEAM/crew");
    for (path, text) in [
        (
            "team.yaml",
            "name: crew\nentry_agent: leader\nagents: [leader, backend, frontend]\n",
        ),
        ("agents/leader/agent.yaml", "name: leader\n"),
        ("agents/leader/system.md", "Lead.\n"),
        ("agents/backend/agent.yaml", "name: backend\n"),
        ("agents/backend/system.md", "Server.\n"),
        ("agents/frontend/agent.yaml", "name: frontend\n"),
        ("agents/frontend/system.md", "Page.\n"),
    ] {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let token = cluster.user_token();
    let (owner, _o) = cluster.client(1, &token).await;
    let session = owner
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: None,
        })
        .await
        .unwrap()
        .id;
    owner
        .calls()
        .team_enter(&TeamEnterParams {
            session_id: session.clone(),
            team: "crew".into(),
        })
        .await
        .unwrap();
    owner
        .session_submit(&submit(&session, "ship it", json!(null)))
        .await
        .unwrap();
    let (reader, _r) = cluster.client(0, &token).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let frames = all_events(&reader, &session).await;
        let backend_done = frames
            .iter()
            .any(|f| matches!(&f.event, Event::TeamTaskEnded(e) if e.agent == "backend"));
        if backend_done && cluster.model.request_count() >= 3 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the round did not get going"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(reader.session_info(&session).await.unwrap().owner, "i1");
    cluster.kill9(1);

    // A survivor sweeps the session up; the resumed round finishes the team's task.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let frames = loop {
        let frames = all_events(&reader, &session).await;
        if frames
            .iter()
            .any(|f| matches!(f.event, Event::TeamCompleted(_)))
        {
            break frames;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the round did not resume"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_contiguous(&frames);
    let ended: Vec<(String, TaskStatus)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskEnded(e) => Some((e.agent.clone(), e.status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ended,
        vec![
            ("backend".to_string(), TaskStatus::Completed),
            ("frontend".to_string(), TaskStatus::Interrupted),
            ("frontend".to_string(), TaskStatus::Completed),
        ]
    );
    let rounds = frames
        .iter()
        .filter(|f| matches!(f.event, Event::TeamRoundStarted(_)))
        .count();
    assert_eq!(rounds, 1, "the same round resumed");
    let backend_requests = cluster
        .model
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains(&member("backend")))
        .count();
    assert_eq!(backend_requests, 1, "the completed task was not re-run");
    assert_ne!(reader.session_info(&session).await.unwrap().owner, "i1");
    let fences = cluster.fences(&session);
    assert!(fences.windows(2).all(|w| w[0] <= w[1]), "{fences:?}");
}
