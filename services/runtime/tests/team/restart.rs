//! A backend that dies in the middle of a round (its tokio runtime is dropped: no task gets
//! to write another event, as with kill -9) and a new runtime on the same journal: the open
//! round resumes, the interrupted task is dispatched once more, the completed one is not
//! re-run, and seqs stay contiguous.

use lumina_protocol::team::{TeamTaskDispatched, TeamTaskEnded};
use lumina_protocol::{Event, TaskStatus};
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_round_resumes_the_same_round() {
    let mut stalled = Turn::text("the frontend is half way").matching(member("frontend"));
    stalled.stall_after_chunks = Some(2);
    let server = ScriptedModelServer::start(vec![
        Turn::tool_call(
            "team_contract",
            json!({"goal": "ship it", "acceptance_criteria": ["it works"]}),
        )
        .matching(LEADER),
        Turn::tool_call(
            "team_dispatch",
            json!({"agent": "backend", "task": "TASK-backend: write the server"}),
        )
        .with_tool_call(
            "team_dispatch",
            json!({"agent": "frontend", "task": "TASK-frontend: write the page"}),
        )
        .matching(LEADER),
        Turn::tool_call(
            "write_file",
            json!({"path": "server.txt", "content": "server\n"}),
        )
        .matching(member("backend")),
        Turn::text("server written").matching(member("backend")),
        stalled,
        // After the restart: only the frontend runs again.
        Turn::text("page written").matching(member("frontend")),
        Turn::tool_call(
            "team_complete",
            json!({"summary": "shipped after a restart"}),
        )
        .matching(LEADER),
    ])
    .unwrap();
    let world = World::new(&server, "anthropic");
    world.crew("gates:\n  require_contract: true\n");

    // The first backend, on a runtime of its own that the test can kill.
    let doomed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let first = world.runtime();
    let project = world.project.clone();
    let session = {
        let runtime = first.clone();
        doomed
            .spawn(async move {
                let session = new_session(&runtime, &project).await;
                session.team_enter("crew").await.unwrap();
                submit(&session, "k1", "Ship the feature").await;
                session
            })
            .await
            .unwrap()
    };
    let session_id = session.id().to_string();
    wait_for(
        &session,
        "the backend's task to end and the frontend to stall",
        |frames| {
            let backend_done = frames.iter().any(|f| {
                matches!(&f.event, Event::TeamTaskEnded(TeamTaskEnded { agent, .. }) if agent == "backend")
            });
            backend_done && server.requests().len() >= 5
        },
    )
    .await;
    // kill -9: every task of the first backend stops where it is.
    doomed.shutdown_background();
    drop(session);
    drop(first);

    let second = world.runtime();
    let session = second.session(&session_id).await.unwrap();
    wait_for(&session, "the resumed run to end", |frames| {
        frames.iter().any(|f| {
            matches!(&f.event, Event::RunCompleted { result, .. } if result == "shipped after a restart")
        })
    })
    .await;
    let frames = events(&session).await;
    assert_contiguous(&frames);

    // One round, resumed: started once, ended once.
    let rounds: Vec<&str> = frames
        .iter()
        .filter(|f| {
            matches!(
                f.event,
                Event::TeamRoundStarted(_) | Event::TeamRoundEnded(_)
            )
        })
        .map(|f| f.event.kind())
        .collect();
    assert_eq!(rounds, vec!["team.round_started", "team.round_ended"]);
    // The frontend's task: interrupted by the restart, dispatched once more, completed.
    let tasks: Vec<(String, Option<String>)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskDispatched(TeamTaskDispatched {
                agent, retry_of, ..
            }) => Some((agent.clone(), retry_of.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(tasks.len(), 3, "{tasks:?}");
    assert_eq!(tasks.iter().filter(|(a, _)| a == "backend").count(), 1);
    assert!(tasks.iter().any(|(a, r)| a == "frontend" && r.is_some()));
    let ended: Vec<(String, TaskStatus)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskEnded(TeamTaskEnded { agent, status, .. }) => {
                Some((agent.clone(), *status))
            }
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
    // Every member tool call ran exactly once.
    let writes = frames
        .iter()
        .filter(|f| matches!(&f.event, Event::ToolStarted { tool, .. } if tool == "write_file"))
        .count();
    assert_eq!(writes, 1);
    assert_eq!(
        std::fs::read_to_string(world.project.join("server.txt")).unwrap(),
        "server\n"
    );
    let backend_requests = server
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains(&member("backend")))
        .count();
    assert_eq!(
        backend_requests, 2,
        "the backend's model was not asked again"
    );
    // The leader was told what happened, in its context.
    let told = frames.iter().any(|f| {
        f.stream == "main"
            && matches!(&f.event, Event::MessageUser { text, .. }
                if text.contains("restarted during round 1")
                    && text.contains("page written")
                    && text.contains("server written"))
    });
    assert!(told, "the resume message reaches the leader");
    assert_eq!(server.remaining_turns(), 0);
}
