//! The Memory Fabric in the cluster profile (PostgreSQL + pgvector store per tenant): a note
//! one tenant remembers is found by that tenant's other sessions — also through another
//! instance — and never by another tenant working in the same project.

use lumina_client::{Client, Notifications};
use lumina_protocol::methods::SessionCreateParams;
use lumina_protocol::Event;
use lumina_testkit::Turn;
use serde_json::json;

use super::support::*;
use crate::support::{events, submit, until_run_end};

/// Runs one prompt in a new session of the shared project; returns the tool outputs.
async fn run_once(cluster: &Cluster, client: &Client, notes: &mut Notifications) -> Vec<String> {
    let session = client
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: None,
        })
        .await
        .unwrap();
    client.session_resume(&session.id, 0).await.unwrap();
    let run = client
        .session_submit(&submit(&session.id, "go", json!(null)))
        .await
        .unwrap();
    events(&until_run_end(notes, &run.run_id).await)
        .iter()
        .filter_map(|f| match &f.event {
            Event::ToolCompleted { output, .. } => Some(output.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_with_the_same_project_never_see_each_others_memory() {
    let search = || Turn::tool_call("memory_search", json!({"query": "launch code"}));
    let cluster = Cluster::start(
        2,
        vec![
            Turn::tool_call(
                "memory_remember",
                json!({"text": "The launch code for the rocket is 4417."}),
            ),
            Turn::text("noted"),
            search(),
            Turn::text("other tenant searched"),
            search(),
            Turn::text("same tenant searched"),
        ],
    )
    .await;
    let alice = cluster.user_token();
    let eve = cluster.token(
        "eve",
        "t2",
        &["lumina:session:read", "lumina:session:write"],
    );
    let (a0, mut a0_notes) = cluster.client(0, &alice).await;
    let remembered = run_once(&cluster, &a0, &mut a0_notes).await;
    assert_eq!(remembered.len(), 1, "{remembered:?}");

    let (e1, mut e1_notes) = cluster.client(1, &eve).await;
    let other_tenant = run_once(&cluster, &e1, &mut e1_notes).await;
    assert_eq!(other_tenant.len(), 1);
    assert!(!other_tenant[0].contains("4417"), "{other_tenant:?}");

    let (a1, mut a1_notes) = cluster.client(1, &alice).await;
    let same_tenant = run_once(&cluster, &a1, &mut a1_notes).await;
    assert_eq!(same_tenant.len(), 1);
    assert!(same_tenant[0].contains("4417"), "{same_tenant:?}");
}
