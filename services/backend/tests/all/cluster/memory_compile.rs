//! The semantic compile in the cluster profile: with `memory_compile` on, the node that owns a
//! session compiles its tenant's project space in PostgreSQL after the run, in the
//! background, with `memory_compile_model`; grounded nodes are accepted, the others kept as
//! rejected with their reason, and another tenant in the same project compiles only its own
//! evidence and sees none of those nodes.

use std::time::Duration;

use lumina_client::{Client, Notifications};
use lumina_memory::semantic::{fingerprint, NodeStatus, SemanticNode};
use lumina_memory::MemoryStore;
use lumina_memory_postgres::{PgMemory, PgMemoryOptions};
use lumina_protocol::methods::SessionInfo;
use lumina_runtime::memory::{project_space, COMPILE_DEBOUNCE};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::support::*;
use crate::support::{create_and_resume, submit, until_run_end};

/// The start of every compile request (the memory crate's prompt).
const COMPILE_PROMPT: &str = "You compile long-term memory";
const COMPILE_MODEL: &str = "scripted-compiler";
const FACT: &str = "My sister Ana lives in Lisbon.";
/// Why the grounding check rejects the node about Porto.
const UNGROUNDED: &str = "the proper noun \"porto\" of the node is not in the evidence it cites";

/// Runs `prompt` in a new session of the cluster's project, to its end.
async fn run(cluster: &Cluster, client: &Client, notes: &mut Notifications, prompt: &str) {
    let session: SessionInfo = create_and_resume(client, &cluster.project).await;
    let run = client
        .session_submit(&submit(&session.id, prompt, json!(null)))
        .await
        .unwrap();
    until_run_end(notes, &run.run_id).await;
}

/// Waits until the background compile has caught up with the tenant's ledger of `space`.
async fn compiled(memory: &PgMemory, space: &str) {
    let deadline = tokio::time::Instant::now() + COMPILE_DEBOUNCE + Duration::from_secs(30);
    loop {
        let head = memory.head(space).await.unwrap().last_event_id;
        let status = memory.semantic_status(space).await.unwrap();
        if head > 0 && status.last_event_id == head {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "tenant {} not compiled: head {head}, {status:?}",
            memory.tenant()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A node as the test checks it: status, key, value, reason, actor and citations.
type Seen = (
    NodeStatus,
    String,
    String,
    String,
    Option<String>,
    String,
    Vec<(u64, String)>,
);

fn seen(node: &SemanticNode) -> Seen {
    (
        node.status,
        node.subject.clone(),
        node.predicate.clone(),
        node.value.clone(),
        node.reason.clone(),
        node.actor.clone(),
        node.cites
            .iter()
            .map(|c| (c.event_id, c.quote.clone()))
            .collect(),
    )
}

fn compile_requests(cluster: &Cluster) -> Vec<Value> {
    cluster
        .model
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|body| body.to_string().contains(COMPILE_PROMPT))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_node_compiles_the_tenants_memory_after_a_run() {
    // A fresh database: the user's message is the ledger's event 1 (the answer is event 2).
    let quote = "My sister Ana lives in Lisbon";
    let proposal = json!({"nodes": [
        {"kind": "fact", "subject": "Ana", "predicate": "lives in", "value": "Lisbon",
         "text": "The user's sister Ana lives in Lisbon.",
         "cites": [{"event_id": 1, "quote": quote}]},
        {"kind": "fact", "subject": "Ana", "predicate": "works in", "value": "Porto",
         "text": "Ana works in Porto.",
         "cites": [{"event_id": 1, "quote": quote}]},
    ]});
    let cluster = Cluster::start_with_env(
        2,
        vec![
            Turn::text("Noted: Ana lives in Lisbon."),
            Turn::text(proposal.to_string()).matching(COMPILE_PROMPT),
            Turn::text("I know nothing about Ana."),
            Turn::text(json!({"nodes": []}).to_string()).matching(COMPILE_PROMPT),
        ],
        vec![
            ("LUMINA_MEMORY_COMPILE".into(), "true".into()),
            ("LUMINA_MEMORY_COMPILE_MODEL".into(), COMPILE_MODEL.into()),
        ],
    )
    .await;
    let space = project_space(&cluster.project.canonicalize().unwrap());
    let memory = |tenant: &str| {
        let options = PgMemoryOptions {
            tenant: tenant.into(),
            ..PgMemoryOptions::default()
        };
        PgMemory::connect(&cluster.db_url, options, None).unwrap()
    };
    let (t1, t2) = (memory(TENANT), memory("t2"));

    let (alice, mut alice_notes) = cluster.client(0, &cluster.user_token()).await;
    run(&cluster, &alice, &mut alice_notes, FACT).await;
    compiled(&t1, &space).await;
    let nodes = t1.nodes(&space).await.unwrap();
    assert_eq!(
        nodes.iter().map(seen).collect::<Vec<_>>(),
        vec![
            (
                NodeStatus::Active,
                "Ana".into(),
                "lives in".into(),
                "Lisbon".into(),
                None,
                "user".into(),
                vec![(1, quote.into())],
            ),
            (
                NodeStatus::Rejected,
                "Ana".into(),
                "works in".into(),
                "Porto".into(),
                Some(UNGROUNDED.into()),
                String::new(),
                vec![(1, quote.into())],
            ),
        ]
    );
    let cited = t1.get(&space, &[1]).await.unwrap();
    assert_eq!(
        cited
            .iter()
            .map(|e| (e.row.actor.as_str(), e.row.text.as_str()))
            .collect::<Vec<_>>(),
        vec![("user", FACT)],
        "the accepted node cites the user's message"
    );
    let status = t1.semantic_status(&space).await.unwrap();
    assert_eq!(
        (status.fingerprint, status.failures),
        (fingerprint(COMPILE_MODEL), Vec::new())
    );

    // Another tenant, same project, another instance: its compile sees only its evidence.
    let eve = cluster.token(
        "eve",
        "t2",
        &["lumina:session:read", "lumina:session:write"],
    );
    let (eve, mut eve_notes) = cluster.client(1, &eve).await;
    let question = "What do you know about Ana?";
    run(&cluster, &eve, &mut eve_notes, question).await;
    compiled(&t2, &space).await;
    assert_eq!(t2.nodes(&space).await.unwrap(), Vec::new());
    assert_eq!(t1.nodes(&space).await.unwrap().len(), 2);

    let requests = compile_requests(&cluster);
    assert_eq!(requests.len(), 2, "one compile per tenant");
    assert_eq!(
        requests
            .iter()
            .map(|body| (
                body["model"].as_str().unwrap_or_default(),
                body.to_string().contains("Lisbon")
            ))
            .collect::<Vec<_>>(),
        vec![(COMPILE_MODEL, true), (COMPILE_MODEL, false)],
        "the compile model of the settings; the second tenant's prompt holds none of the first's"
    );
}
