//! Project-document RAG in the agent loop (docs/rag.md): the scripted model calls
//! `rag_ingest` and `rag_search` like any tool; nobody is asked (read-only); the hit's
//! citation reaches the model and resolves to the exact chunk in the project's own SQLite
//! database; ingesting again in another session does no work.

use std::sync::Arc;

use lumina_client::{Client, Notifications};
use lumina_config::AppRoot;
use lumina_protocol::methods::SessionInfo;
use lumina_protocol::{Event, EventFrame};
use lumina_rag::sqlite::SqliteRag;
use lumina_rag::{Citation, Rag, RagOptions};
use lumina_testkit::Turn;
use serde_json::json;

use crate::support::*;

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

fn tool_result(frames: &[EventFrame], name: &str) -> (String, serde_json::Value) {
    frames
        .iter()
        .find_map(|f| match &f.event {
            Event::ToolCompleted {
                tool,
                output,
                metadata,
                is_error: false,
                ..
            } if tool == name => Some((output.clone(), metadata.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no successful {name} result in {frames:#?}"))
}

#[tokio::test]
async fn the_agent_ingests_searches_and_cites_project_documents() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("rag_ingest", json!({"paths": ["docs"]})),
            Turn::tool_call(
                "rag_search",
                json!({"query": "Which port does the osprey relay listen on?", "k": 3}),
            ),
            Turn::text("Port 7443 [docs/relay.pdf#chunk-1]."),
            // A second session ingests the same documents again.
            Turn::tool_call("rag_ingest", json!({"paths": ["docs"]})),
            Turn::text("Nothing changed."),
        ],
    )
    .await;
    let docs = h.project.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(
        docs.join("guide.md"),
        "# Guide\n\nThe kestrel service renders map tiles.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("relay.pdf"),
        lumina_rag::corpus::pdf(&[
            "Relay notes".to_string(),
            "The osprey relay listens on port 7443 for partner traffic.".to_string(),
        ]),
    )
    .unwrap();
    std::fs::write(
        docs.join("team.docx"),
        lumina_rag::corpus::docx(&["The heron team owns billing exports.".to_string()]).unwrap(),
    )
    .unwrap();

    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let frames = run(
        &client,
        &mut notes,
        &session,
        "Where does the osprey relay listen?",
    )
    .await;
    let (ingested, _) = tool_result(&frames, "rag_ingest");
    assert_eq!(
        ingested,
        "Indexed 3 document(s): 3 added, 0 updated, 0 unchanged, 0 removed; 3 chunk(s) written."
    );
    let (found, metadata) = tool_result(&frames, "rag_search");
    let first = &metadata["hits"][0];
    assert_eq!(first["citation"], "[docs/relay.pdf#chunk-1]", "{found}");
    assert!(
        found.contains("The osprey relay listens on port 7443"),
        "{found}"
    );
    // Read-only: nobody was asked.
    assert!(!frames
        .iter()
        .any(|f| matches!(f.event, Event::PermissionRequested { .. })));
    // The passage and its citation reached the model.
    let request = h.model.requests()[2].body.to_string();
    assert!(request.contains("[docs/relay.pdf#chunk-1]"), "{request}");

    // The citation resolves to the exact chunk in the project's database under the AppRoot.
    let rag = Rag::new(
        Arc::new(SqliteRag::new(AppRoot::new(h.tmp.path().join("app")))),
        None,
        RagOptions::default(),
    );
    let citation: Citation = first["citation"].as_str().unwrap().parse().unwrap();
    let stored = rag.resolve(&h.project, &citation).await.unwrap().unwrap();
    assert_eq!(
        (stored.chunk.start, stored.chunk.end),
        (
            first["start"].as_u64().unwrap() as usize,
            first["end"].as_u64().unwrap() as usize
        )
    );
    assert_eq!(
        stored.chunk.text,
        "Relay notes\nThe osprey relay listens on port 7443 for partner traffic."
    );

    let (client2, mut notes2) = h.client().await;
    let second = h.session(&client2).await;
    let frames = run(&client2, &mut notes2, &second, "Re-index the docs.").await;
    let (again, metadata) = tool_result(&frames, "rag_ingest");
    assert_eq!(
        again,
        "Indexed 3 document(s): 0 added, 0 updated, 3 unchanged, 0 removed; 0 chunk(s) written."
    );
    assert_eq!(metadata["chunks_written"], 0);
    h.stop().await;
}
