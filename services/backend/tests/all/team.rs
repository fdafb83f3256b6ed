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

const LEADER: &str = "You lead the agent team";

fn write(root: &std::path::Path, path: &str, text: &str) {
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
    let listed = calls
        .team_list(&TeamListParams {
            session_id: Some(session.id.clone()),
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
