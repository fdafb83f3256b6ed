//! Agent teams over the WebSocket (local profile): `team.list` (built-ins installed at
//! start-up, the project's teams), `team.create` (and `conflict` the second time),
//! `team.enter` (`not_found` for an unknown team), a run of the team to `team_complete`,
//! and `team.exit`.

use lumina_client::ClientError;
use lumina_protocol::methods::{TeamCreateParams, TeamEnterParams, TeamExitParams, TeamListParams};
use lumina_protocol::{ErrorCode, Event, TaskStatus};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

pub(crate) const LEADER: &str = "You lead the agent team";

pub(crate) fn write(root: &std::path::Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn code(err: ClientError) -> ErrorCode {
    match err {
        ClientError::Server(object) => object.code,
        other => panic!("not a server error: {other}"),
    }
}

#[tokio::test]
async fn team_methods_and_a_team_run_end_to_end() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call(
                "team_dispatch",
                json!({"agent": "builder", "task": "write built.txt"}),
            )
            .matching(LEADER),
            Turn::tool_call(
                "write_file",
                json!({"path": "built.txt", "content": "built\n"}),
            )
            .matching("You are `builder`, a member of the agent team"),
            Turn::text("built.txt written").matching("You are `builder`, a member"),
            Turn::tool_call("team_complete", json!({"summary": "all built"})).matching(LEADER),
        ],
    )
    .await;
    let root = h.project.join(".Lumina/TEAM/duo");
    write(
        &root,
        "team.yaml",
        "name: duo\nentry_agent: lead\nagents: [lead, builder]\n",
    );
    write(&root, "agents/lead/agent.yaml", "name: lead\n");
    write(&root, "agents/lead/system.md", "Lead the work.\n");
    write(&root, "agents/builder/agent.yaml", "name: builder\n");
    write(&root, "agents/builder/system.md", "Build things.\n");

    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let calls = client.calls();

    // Built-ins without a session; the project's team with one.
    let listed = calls.team_list(&TeamListParams::default()).await.unwrap();
    let names: Vec<&str> = listed.teams.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["deep-research", "product-development"]);
    // Before a session is open, the project is named by its root.
    let by_root = calls
        .team_list(&TeamListParams {
            project_root: Some(h.project.display().to_string()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(by_root.teams.iter().any(|t| t.name == "duo"), "{by_root:?}");
    let listed = calls
        .team_list(&TeamListParams {
            session_id: Some(session.id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let duo = listed.teams.iter().find(|t| t.name == "duo").unwrap();
    assert_eq!(
        (duo.source.as_str(), duo.error.as_deref()),
        ("project", None)
    );

    // team.create, then the same name again.
    let create = TeamCreateParams {
        name: "my-crew".into(),
        display_name: "My crew".into(),
    };
    let created = calls.team_create(&create).await.unwrap();
    assert!(
        created.path.ends_with("config/teams/my-crew"),
        "{}",
        created.path
    );
    assert_eq!(
        code(calls.team_create(&create).await.unwrap_err()),
        ErrorCode::Conflict
    );
    let listed = calls.team_list(&TeamListParams::default()).await.unwrap();
    assert!(listed
        .teams
        .iter()
        .any(|t| t.name == "my-crew" && t.source == "user"));

    // An unknown team.
    let unknown = calls
        .team_enter(&TeamEnterParams {
            session_id: session.id.clone(),
            team: "no-such-team".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(code(unknown), ErrorCode::NotFound);

    // Enter, run, exit.
    let entered = calls
        .team_enter(&TeamEnterParams {
            session_id: session.id.clone(),
            team: "duo".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        (
            entered.entry_agent.as_str(),
            entered.members.clone(),
            entered.created
        ),
        (
            "lead",
            vec!["lead".to_string(), "builder".to_string()],
            true
        )
    );
    let run = client
        .session_submit(&submit(&session.id, "Build it", bypass()))
        .await
        .unwrap();
    let seen = until_run_end(&mut notes, &run.run_id).await;
    let frames = events(&seen);
    let end = frames.last().unwrap();
    assert!(
        matches!(&end.event, Event::RunCompleted { result, .. } if result == "all built"),
        "{:?}",
        end.event
    );
    let ended: Vec<(String, TaskStatus)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskEnded(e) => Some((e.agent.clone(), e.status)),
            _ => None,
        })
        .collect();
    assert_eq!(ended, vec![("builder".to_string(), TaskStatus::Completed)]);
    assert!(frames
        .iter()
        .any(|f| matches!(f.event, Event::TeamCompleted(_))));
    assert_eq!(read(&h.path("built.txt")), "built\n");
    let all = client
        .session_events(&session.id, 0, Some(1000))
        .await
        .unwrap()
        .events;
    assert_contiguous(&all);

    let exited = calls
        .team_exit(&TeamExitParams {
            session_id: session.id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(exited.team_run_id, Some(entered.team_run_id));
    h.stop().await;
}

/// `kill -9` of the real backend binary in the middle of a round, then a restart: the round
/// resumes on its own (the session is opened at start-up), the interrupted task runs once
/// more and the completed one's tool call is not repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_round_and_restart_resumes_the_round() {
    use crate::crash::{dirs, kill9, spawn_backend};
    use std::time::Duration;

    let (_tmp, project, app) = dirs();
    let mut stalled = Turn::text("half a page").matching("You are `frontend`, a member");
    stalled.stall_after_chunks = Some(2);
    let model = lumina_testkit::ScriptedModelServer::start(vec![
        Turn::tool_call(
            "team_dispatch",
            json!({"agent": "backend", "task": "server"}),
        )
        .with_tool_call(
            "team_dispatch",
            json!({"agent": "frontend", "task": "page"}),
        )
        .matching(LEADER),
        Turn::tool_call(
            "write_file",
            json!({"path": "server.txt", "content": "server\n"}),
        )
        .matching("You are `backend`, a member"),
        Turn::text("server written").matching("You are `backend`, a member"),
        stalled,
        Turn::text("page written").matching("You are `frontend`, a member"),
        Turn::tool_call("team_complete", json!({"summary": "shipped"})).matching(LEADER),
    ])
    .unwrap();
    let root = project.join(".Lumina/TEAM/crew");
    write(
        &root,
        "team.yaml",
        "name: crew\nentry_agent: leader\nagents: [leader, backend, frontend]\n",
    );
    for name in ["leader", "backend", "frontend"] {
        write(
            &root,
            &format!("agents/{name}/agent.yaml"),
            &format!("name: {name}\n"),
        );
        write(&root, &format!("agents/{name}/system.md"), "Work.\n");
    }
    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let (client, _notes) = lumina_client::Client::connect(&backend.url, Some(&backend.token))
        .await
        .unwrap();
    let session = create_and_resume(&client, &project).await;
    client
        .calls()
        .team_enter(&TeamEnterParams {
            session_id: session.id.clone(),
            team: "crew".into(),
        })
        .await
        .unwrap();
    client
        .session_submit(&submit(&session.id, "ship it", json!(null)))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let frames = client
            .session_events(&session.id, 0, Some(1000))
            .await
            .unwrap()
            .events;
        let backend_done = frames
            .iter()
            .any(|f| matches!(&f.event, Event::TeamTaskEnded(e) if e.agent == "backend"));
        if backend_done && model.request_count() >= 4 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the round did not get going"
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    kill9(&mut backend);
    drop(client);

    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let (client, _notes) = lumina_client::Client::connect(&backend.url, Some(&backend.token))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let frames = loop {
        let frames = client
            .session_events(&session.id, 0, Some(1000))
            .await
            .unwrap()
            .events;
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
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    kill9(&mut backend);
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
    let writes = frames
        .iter()
        .filter(|f| matches!(&f.event, Event::ToolStarted { tool, .. } if tool == "write_file"))
        .count();
    assert_eq!(writes, 1, "the backend's tool call ran once");
    assert_eq!(read(&project.join("server.txt")), "server\n");
    assert_eq!(model.remaining_turns(), 0);
}
