//! The approvals audit (docs/audit.md) in a live session: allow once, allow for the session
//! and deny are listed by `audit.list` with the hashes of their `permission.requested`
//! events, another tenant is refused, and `lumina-backend audit export` writes the same
//! records as JSON lines.

use lumina_protocol::methods::{AuditEntry, AuditListParams};
use lumina_protocol::{Decision, ErrorCode, Event};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn every_decision_is_listed_with_its_hash_and_exported() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("shell", json!({"command": "echo one > one.txt"})),
            Turn::tool_call("shell", json!({"command": "echo two > two.txt"})),
            Turn::tool_call("shell", json!({"command": "echo three > three.txt"})),
            Turn::text("done"),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(
            &session.id,
            "write files",
            json!({"permission_mode": "ask"}),
        ))
        .await
        .unwrap();
    let answers = [
        (Decision::AllowOnce, None),
        (Decision::AllowSession, None),
        (Decision::Deny, Some("not that one")),
    ];
    let mut expected = Vec::new();
    for (decision, reason) in answers {
        let request = next_event(&mut notes, "permission.requested").await;
        let Event::PermissionRequested {
            request_id,
            tool,
            args_hash,
            preview,
            run_id,
            ..
        } = &request.event
        else {
            unreachable!()
        };
        client
            .permission_respond(&session.id, request_id, decision, reason)
            .await
            .unwrap();
        expected.push((
            run_id.clone(),
            request_id.clone(),
            tool.clone(),
            args_hash.clone(),
            preview.clone(),
            decision,
            reason.map(str::to_owned),
        ));
    }
    until_run_end(&mut notes, &run.run_id).await;

    let listed = client
        .calls()
        .audit_list(&AuditListParams::default())
        .await
        .unwrap();
    assert_eq!(listed.next_cursor, None);
    let frames = client
        .session_events(&session.id, 0, None)
        .await
        .unwrap()
        .events;
    let mut want: Vec<AuditEntry> = expected
        .into_iter()
        .map(|(run_id, request_id, tool, args_hash, preview, decision, reason)| {
            let resolved = frames
                .iter()
                .find(|f| {
                    matches!(&f.event, Event::PermissionResolved { request_id: r, .. } if *r == request_id)
                })
                .unwrap();
            AuditEntry {
                tenant: "local".into(),
                session_id: session.id.clone(),
                seq: resolved.seq,
                ts_ms: resolved.ts_ms,
                run_id,
                request_id,
                tool,
                args_hash,
                preview,
                decision,
                by: "user".into(),
                sub: Some("local".into()),
                reason,
            }
        })
        .collect();
    want.reverse();
    assert_eq!(listed.records, want);

    // Pages: two, then the last one.
    let first = client
        .calls()
        .audit_list(&AuditListParams {
            limit: Some(2),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(first.records, want[..2].to_vec());
    let rest = client
        .calls()
        .audit_list(&AuditListParams {
            limit: Some(2),
            cursor: first.next_cursor.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(rest.records, want[2..].to_vec());
    assert_eq!(rest.next_cursor, None);

    // Filters: another session has none; a window after the last decision has none.
    let none = client
        .calls()
        .audit_list(&AuditListParams {
            session_id: Some("other".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(none.records, vec![]);
    let later = client
        .calls()
        .audit_list(&AuditListParams {
            since_ms: Some(want[0].ts_ms + 1),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(later.records, vec![]);

    // Another tenant's audit is not this admin's to read.
    let err = client
        .calls()
        .audit_list(&AuditListParams {
            tenant: Some("other-tenant".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.server_error().unwrap().code, ErrorCode::Forbidden);

    // The export: the same records, one JSON object per line.
    let out = h.tmp.path().join("audit.jsonl");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_lumina-backend"))
        .args(["audit", "export", "--app-root"])
        .arg(h.tmp.path().join("app"))
        .arg("--session")
        .arg(&session.id)
        .arg("--output")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let exported: Vec<AuditEntry> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(exported, want);
    // Hashes and previews only: the arguments never reach the audit.
    assert!(!std::fs::read_to_string(&out)
        .unwrap()
        .contains("\"arguments\""));
    h.stop().await;
}
