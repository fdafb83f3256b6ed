//! A client on one instance drives a session owned by another; both see the same events.

use lumina_protocol::methods::SessionCreateParams;
use lumina_protocol::Event;
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;
use crate::support::{assert_contiguous, events, next_event, submit, until_run_end};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_drives_a_session_owned_by_another_instance() {
    let cluster = Cluster::start(
        3,
        vec![
            Turn::tool_call(
                "write_file",
                json!({"path": "from-cluster.txt", "content": "owned by i1\n"}),
            ),
            Turn::text("written through the gateway"),
        ],
    )
    .await;
    let token = cluster.user_token();
    let (b, mut b_notes) = cluster.client(1, &token).await;
    let (a, mut a_notes) = cluster.client(0, &token).await;
    let hello = a.hello("test").await.unwrap();
    assert_eq!(
        (
            hello.server.profile.as_str(),
            hello.identity.tenant.as_str()
        ),
        ("cluster", TENANT)
    );

    // Created on i1: i1 owns it.
    let session = b
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: Some("routing".into()),
        })
        .await
        .unwrap();
    let info = a.session_info(&session.id).await.unwrap();
    assert_eq!(info.owner, "i1");
    assert!(info.fence >= 1);

    b.session_resume(&session.id, 0).await.unwrap();
    a.session_resume(&session.id, 0).await.unwrap();
    // A (on i0) submits: forwarded to i1 over Redis Streams RPC.
    let run = a
        .session_submit(&submit(&session.id, "write it", json!(null)))
        .await
        .unwrap();
    let a_seen = events(&until_run_end(&mut a_notes, &run.run_id).await);
    let b_seen = events(&until_run_end(&mut b_notes, &run.run_id).await);
    assert_eq!(a_seen, b_seen);
    assert_contiguous(&a_seen);
    assert!(
        matches!(&a_seen.last().unwrap().event, Event::RunCompleted { result, .. } if result == "written through the gateway")
    );
    assert_eq!(
        std::fs::read_to_string(cluster.project.join("from-cluster.txt")).unwrap(),
        "owned by i1\n"
    );
    // The owner is still i1 and every event carries its fence.
    assert_eq!(a.session_info(&session.id).await.unwrap().owner, "i1");
    let fences = cluster.sql(&format!(
        "select distinct fence from events where session_id = '{}'",
        session.id
    ));
    assert_eq!(fences.trim(), info.fence.to_string());

    // Any instance lists and pages the session from PostgreSQL.
    let (c, _c_notes) = cluster.client(2, &token).await;
    let listed = c.session_list(false).await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
        vec![session.id.clone()]
    );
    let page = c.session_events(&session.id, 0, Some(1000)).await.unwrap();
    assert_eq!(page.events.len() as u64, page.head_seq);

    // /metrics on the gateway counted the forwarded request.
    let (status, metrics) = http_get(cluster.instances[0].port, "/metrics")
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert!(
        metrics.contains("lumina_rpc_requests_total{outcome=\"ok\"}"),
        "{metrics}"
    );
    // Every metric documented in docs/operations.md is exported, and nothing else is.
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/operations.md"
    ))
    .unwrap();
    let documented: Vec<&str> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("| `lumina_"))
        .filter_map(|l| l.split('`').next())
        .collect();
    assert!(documented.len() >= 10);
    for name in &documented {
        assert!(
            metrics.contains(&format!("# TYPE lumina_{name} ")),
            "lumina_{name} not exported"
        );
    }
    let exported = metrics
        .lines()
        .filter(|l| l.starts_with("# TYPE lumina_"))
        .count();
    assert_eq!(
        exported,
        documented.len(),
        "undocumented metrics in:\n{metrics}"
    );
}

/// Hints are best effort: an event committed without one (here written to PostgreSQL by
/// another writer with the owner's fence, so the owner's relay never sees it) still reaches
/// a client subscribed through a gateway, by that instance's once-a-second head check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_committed_without_a_hint_reaches_a_gateway_subscriber() {
    use lumina_journal::{AppendBatch, ExpectedVersion, JournalStore, NewEvent, SessionKey};

    let cluster = Cluster::start(2, Vec::new()).await;
    let token = cluster.user_token();
    let (owner, _owner_notes) = cluster.client(1, &token).await;
    let (gateway, mut notes) = cluster.client(0, &token).await;
    let session = owner
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: Some("no hint".into()),
        })
        .await
        .unwrap();
    assert_eq!(gateway.session_info(&session.id).await.unwrap().owner, "i1");
    let resumed = gateway.session_resume(&session.id, 0).await.unwrap();

    let fence = *cluster.fences(&session.id).last().unwrap();
    let journal = lumina_journal::postgres::PgJournal::connect(&cluster.db_url, 1).unwrap();
    let key = SessionKey::new(TENANT, &session.id);
    let stored = journal
        .append(
            &key,
            fence,
            AppendBatch {
                stream: "main".into(),
                expected: ExpectedVersion::Any,
                events: vec![NewEvent {
                    kind: "run.interrupted".into(),
                    payload: json!({"run_id": "written-behind-the-owner", "reason": "test"}),
                }],
                command: None,
                audit: Vec::new(),
            },
        )
        .await
        .unwrap();
    assert!(stored[0].seq > resumed.head_seq);

    let frame = next_event(&mut notes, "run.interrupted").await;
    assert_eq!(frame.seq, stored[0].seq);
    assert!(
        matches!(&frame.event, Event::RunInterrupted { run_id, .. } if run_id == "written-behind-the-owner")
    );
}
