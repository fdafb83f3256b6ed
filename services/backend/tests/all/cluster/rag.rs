//! Project-document RAG in the cluster profile (PostgreSQL store, rows per tenant and
//! project): documents one tenant ingests through one instance are found, with their
//! citation, by that tenant's later session on another instance — and never by another
//! tenant working in the same project.

use lumina_client::{Client, Notifications};
use lumina_protocol::methods::SessionCreateParams;
use lumina_protocol::Event;
use lumina_testkit::Turn;
use serde_json::json;

use super::support::*;
use crate::support::{events, submit, until_run_end};

/// Runs one prompt in a new session of the shared project; returns the tool outputs with
/// their error flags.
async fn run_once(
    cluster: &Cluster,
    client: &Client,
    notes: &mut Notifications,
) -> Vec<(bool, String)> {
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
            Event::ToolCompleted {
                is_error, output, ..
            } => Some((*is_error, output.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingested_documents_are_cited_across_instances_and_never_across_tenants() {
    let search = || {
        Turn::tool_call(
            "rag_search",
            json!({"query": "when is the staging database restored"}),
        )
    };
    let cluster = Cluster::start(
        2,
        vec![
            Turn::tool_call("rag_ingest", json!({"paths": ["docs"]})),
            Turn::text("ingested"),
            search(),
            Turn::text("other tenant searched"),
            search(),
            Turn::text("same tenant searched"),
        ],
    )
    .await;
    std::fs::create_dir_all(cluster.project.join("docs")).unwrap();
    std::fs::write(
        cluster.project.join("docs/runbook.md"),
        "# Runbook\n\nThe staging database is restored every Tuesday at 03:40 UTC \
         from the nightly snapshot.\n",
    )
    .unwrap();
    std::fs::write(
        cluster.project.join("docs/lunch.txt"),
        "The canteen serves soup on Fridays.\n",
    )
    .unwrap();

    let alice = cluster.user_token();
    let (a0, mut a0_notes) = cluster.client(0, &alice).await;
    let ingested = run_once(&cluster, &a0, &mut a0_notes).await;
    assert_eq!(ingested.len(), 1, "{ingested:?}");
    assert!(!ingested[0].0, "{ingested:?}");
    assert!(ingested[0].1.contains("2 added"), "{ingested:?}");

    // Another tenant in the same project, on the other instance: nothing indexed for it.
    let eve = cluster.token(
        "eve",
        "t2",
        &["lumina:session:read", "lumina:session:write"],
    );
    let (e1, mut e1_notes) = cluster.client(1, &eve).await;
    let other_tenant = run_once(&cluster, &e1, &mut e1_notes).await;
    assert_eq!(other_tenant.len(), 1, "{other_tenant:?}");
    assert!(
        other_tenant[0].1.contains("rag_ingest first"),
        "{other_tenant:?}"
    );
    assert!(!other_tenant[0].1.contains("03:40"), "{other_tenant:?}");

    // The same tenant's next session, on the other instance: the cited chunk.
    let (a1, mut a1_notes) = cluster.client(1, &alice).await;
    let same_tenant = run_once(&cluster, &a1, &mut a1_notes).await;
    assert_eq!(same_tenant.len(), 1, "{same_tenant:?}");
    let (is_error, output) = &same_tenant[0];
    assert!(!is_error, "{output}");
    let first = output.find("[docs/").unwrap();
    assert!(
        output[first..].starts_with("[docs/runbook.md#chunk-1] lines 1-3"),
        "{output}"
    );
    assert!(output.contains("every Tuesday at 03:40 UTC"), "{output}");

    // In PostgreSQL: tenant t1's rows only, in the RAG tables (not the memory ones).
    assert_eq!(
        cluster.sql("SELECT tenant, count(*) FROM rag_files GROUP BY tenant"),
        "t1|2"
    );
}
