//! The approvals audit in the cluster: an answer given on one instance to a permission
//! request of a session another instance owns is recorded with the caller's `sub`, listed
//! from PostgreSQL on any instance, and invisible to another tenant's admin.

use lumina_protocol::methods::{AuditListParams, SessionCreateParams};
use lumina_protocol::{Decision, Event};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;
use crate::support::{next_event, submit, until_run_end};

const ADMIN: [&str; 3] = [
    "lumina:session:read",
    "lumina:session:write",
    "lumina:admin",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_answer_is_audited_with_the_callers_sub() {
    let cluster = Cluster::start(
        2,
        vec![
            Turn::tool_call(
                "write_file",
                json!({"path": "audited.txt", "content": "asked first\n"}),
            ),
            Turn::text("written"),
        ],
    )
    .await;
    let owner_token = cluster.token("bob", TENANT, &ADMIN);
    let (b, _b_notes) = cluster.client(1, &owner_token).await;
    // Created on i1: i1 owns it.
    let session = b
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: Some("audit".into()),
        })
        .await
        .unwrap();
    assert_eq!(b.session_info(&session.id).await.unwrap().owner, "i1");

    // Carol, on i0, submits and answers: both are forwarded to i1.
    let (a, mut a_notes) = cluster
        .client(0, &cluster.token("carol", TENANT, &ADMIN))
        .await;
    a.session_resume(&session.id, 0).await.unwrap();
    let run = a
        .session_submit(&submit(
            &session.id,
            "write it",
            json!({"permission_mode": "ask"}),
        ))
        .await
        .unwrap();
    let request = next_event(&mut a_notes, "permission.requested").await;
    let Event::PermissionRequested {
        request_id,
        args_hash,
        ..
    } = &request.event
    else {
        unreachable!()
    };
    a.permission_respond(&session.id, request_id, Decision::AllowOnce, None)
        .await
        .unwrap();
    until_run_end(&mut a_notes, &run.run_id).await;

    // Listed from PostgreSQL on either instance, with carol's sub.
    for client in [&a, &b] {
        let listed = client
            .calls()
            .audit_list(&AuditListParams::default())
            .await
            .unwrap();
        let [record] = &listed.records[..] else {
            panic!("{:?}", listed.records);
        };
        assert_eq!(
            (
                record.session_id.as_str(),
                record.tool.as_str(),
                record.args_hash.as_str(),
                record.decision,
                record.by.as_str(),
                record.sub.as_deref(),
                record.tenant.as_str(),
            ),
            (
                session.id.as_str(),
                "write_file",
                args_hash.as_str(),
                Decision::AllowOnce,
                "user",
                Some("carol"),
                TENANT,
            )
        );
    }

    // Another tenant's admin sees none of it, on either instance.
    let other = cluster.token("mallory", "other-tenant", &ADMIN);
    for i in 0..2 {
        let (c, _c_notes) = cluster.client(i, &other).await;
        let listed = c
            .calls()
            .audit_list(&AuditListParams::default())
            .await
            .unwrap();
        assert_eq!(listed.records, vec![]);
    }
}
