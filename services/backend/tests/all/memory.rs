//! The Memory Fabric in the agent loop (docs/design.md#memory-fabric): visible events
//! become evidence, a new session's first step recalls it into the system prompt
//! (`memory.recalled`), the `memory_remember`/`memory_search` tools, and project spaces
//! never cross.

use lumina_client::{Client, Notifications};
use lumina_protocol::methods::{SessionCreateParams, SessionInfo};
use lumina_protocol::{Event, EventFrame};
use lumina_testkit::Turn;
use serde_json::json;

use crate::support::*;

/// Submits `prompt` in a session and returns the run's events.
async fn run(
    client: &Client,
    notes: &mut Notifications,
    session: &SessionInfo,
    prompt: &str,
) -> Vec<EventFrame> {
    let submitted = client
        .session_submit(&submit(&session.id, prompt, json!({})))
        .await
        .unwrap();
    events(&until_run_end(notes, &submitted.run_id).await)
        .into_iter()
        .filter(|f| f.event.run_id() == Some(submitted.run_id.as_str()))
        .collect()
}

fn recalled(frames: &[EventFrame]) -> Option<Vec<String>> {
    frames.iter().find_map(|f| match &f.event {
        Event::MemoryRecalled { source_ids, .. } => Some(source_ids.clone()),
        _ => None,
    })
}

fn tool_output(frames: &[EventFrame], name: &str) -> String {
    frames
        .iter()
        .find_map(|f| match &f.event {
            Event::ToolCompleted {
                tool,
                output,
                is_error: false,
                ..
            } if tool == name => Some(output.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no successful {name} result in {frames:#?}"))
}

#[tokio::test]
async fn a_new_session_recalls_an_earlier_sessions_fact() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::text("Understood, I will keep that in mind."),
            Turn::text("The launch code is PELICAN-42."),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let first = h.session(&client).await;
    let frames = run(
        &client,
        &mut notes,
        &first,
        "For the record: the launch code is PELICAN-42.",
    )
    .await;
    assert_eq!(recalled(&frames), None, "nothing earlier to recall");

    let (client2, mut notes2) = h.client().await;
    let second = h.session(&client2).await;
    let frames = run(&client2, &mut notes2, &second, "What is the launch code?").await;
    let source_ids = recalled(&frames).expect("memory.recalled");
    assert!(
        source_ids
            .iter()
            .any(|id| id.starts_with(&format!("{}:", first.id))),
        "{source_ids:?}"
    );
    let recalled_at = frames
        .iter()
        .position(|f| matches!(f.event, Event::MemoryRecalled { .. }))
        .unwrap();
    let requested_at = frames
        .iter()
        .position(|f| matches!(f.event, Event::ModelRequested { .. }))
        .unwrap();
    assert!(recalled_at < requested_at);
    let request = h.model.requests()[1].body.to_string();
    let section = request
        .find("# Memory (earlier evidence)")
        .expect("memory section in the request");
    assert!(request[section..].contains("PELICAN-42"), "{request}");
    // The first request had no earlier evidence.
    assert!(!h.model.requests()[0]
        .body
        .to_string()
        .contains("# Memory (earlier evidence)"));
    h.stop().await;
}

#[tokio::test]
async fn remembered_notes_are_searchable_within_their_project_only() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call(
                "memory_remember",
                json!({"text": "The staging database is called heron-7."}),
            ),
            Turn::tool_call("memory_search", json!({"query": "staging database"})),
            Turn::text("Noted and checked."),
            // The session in another project.
            Turn::tool_call("memory_search", json!({"query": "staging database heron"})),
            Turn::text("I do not know."),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let frames = run(
        &client,
        &mut notes,
        &session,
        "Remember the staging database name, then check it.",
    )
    .await;
    let remembered = tool_output(&frames, "memory_remember");
    assert!(
        remembered.contains(&format!("{}:note:", session.id)),
        "{remembered}"
    );
    let found = tool_output(&frames, "memory_search");
    assert!(found.contains("heron-7"), "{found}");
    assert!(found.contains(&format!("{}:note:", session.id)), "{found}");
    // Read-only: nobody was asked.
    assert!(!frames
        .iter()
        .any(|f| matches!(f.event, Event::PermissionRequested { .. })));

    let other_root = h.tmp.path().join("other-project");
    std::fs::create_dir_all(&other_root).unwrap();
    let (client2, mut notes2) = h.client().await;
    let other = client2
        .session_create(&SessionCreateParams {
            project_root: Some(other_root.display().to_string()),
            title: None,
        })
        .await
        .unwrap();
    client2.session_resume(&other.id, 0).await.unwrap();
    let frames = run(
        &client2,
        &mut notes2,
        &other,
        "What is the staging database called?",
    )
    .await;
    assert_eq!(recalled(&frames), None);
    let found = tool_output(&frames, "memory_search");
    assert!(!found.contains("heron-7"), "{found}");
    for request in &h.model.requests()[3..] {
        assert!(!request.body.to_string().contains("heron-7"));
    }
    h.stop().await;
}
