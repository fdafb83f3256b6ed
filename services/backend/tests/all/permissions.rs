//! The permission engine in a live run: ask → respond, exact-argument session grants, rules,
//! headless denial, reconnect with a pending request.

use lumina_protocol::{Decision, Event};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn ask_mode_waits_for_the_user_and_binds_approvals_to_exact_arguments() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("shell", json!({"command": "echo one > one.txt"})),
            Turn::tool_call("shell", json!({"command": "echo one > one.txt"})),
            Turn::tool_call("shell", json!({"command": "echo two > two.txt"})),
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

    // First call: ask, allow for the session.
    let request = next_event(&mut notes, "permission.requested").await;
    let Event::PermissionRequested {
        request_id,
        tool,
        preview,
        ..
    } = &request.event
    else {
        unreachable!()
    };
    assert_eq!(tool, "shell");
    assert_eq!(preview.as_deref(), Some("echo one > one.txt"));
    // A client that reconnects now sees the pending request.
    let (other, _other_notes) = h.client().await;
    let resumed = other.session_resume(&session.id, 0).await.unwrap();
    assert_eq!(resumed.pending_permissions, vec![request.clone()]);
    client
        .permission_respond(&session.id, request_id, Decision::AllowSession, None)
        .await
        .unwrap();

    // Second call has the same arguments: the session grant applies, nobody is asked.
    // Third call has different arguments: asked again; deny it.
    let request = next_event(&mut notes, "permission.requested").await;
    let Event::PermissionRequested {
        request_id,
        arguments,
        ..
    } = &request.event
    else {
        unreachable!()
    };
    assert_eq!(arguments, &json!({"command": "echo two > two.txt"}));
    client
        .permission_respond(
            &session.id,
            request_id,
            Decision::Deny,
            Some("not that one"),
        )
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    let frames = client
        .session_events(&session.id, 0, None)
        .await
        .unwrap()
        .events;
    let resolutions = resolutions(&frames);
    assert_eq!(
        resolutions,
        vec![
            (Decision::AllowSession, "user".to_string()),
            (Decision::AllowOnce, "session_grant".to_string()),
            (Decision::Deny, "user".to_string()),
        ]
    );
    assert!(h.path("one.txt").exists());
    assert!(!h.path("two.txt").exists());
    let denied = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::ToolCompleted {
                output,
                is_error: true,
                ..
            } => Some(output.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(denied, "permission denied: not that one");
    // Answering a request that is no longer pending is an error, not a crash.
    let err = client
        .permission_respond(&session.id, "nope", Decision::AllowOnce, None)
        .await
        .unwrap_err();
    assert_eq!(
        err.server_error().unwrap().code,
        lumina_protocol::ErrorCode::NotFound
    );
    h.stop().await;
}

#[tokio::test]
async fn headless_asks_become_denials_and_rules_decide_without_asking() {
    let h = Harness::start_with(
        "openai_compatible",
        vec![
            Turn::tool_call("shell", json!({"command": "git status"})),
            Turn::tool_call("shell", json!({"command": "rm -rf src"})),
            Turn::tool_call("write_file", json!({"path": "x.txt", "content": "x"})),
            Turn::text("done"),
        ],
        &[(
            "LUMINA_PERMISSIONS",
            r#"{"allow": ["shell(git status:*)"], "deny": ["shell(rm:*)"]}"#,
        )],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let mut params = submit(&session.id, "go", json!({"permission_mode": "ask"}));
    params.headless = true;
    let run = client.session_submit(&params).await.unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    let resolutions = resolutions(&frames);
    assert_eq!(
        resolutions,
        vec![
            (Decision::AllowOnce, "rule".to_string()),
            (Decision::Deny, "rule".to_string()),
            (Decision::Deny, "headless".to_string()),
        ]
    );
    assert!(!h.path("x.txt").exists());
    assert!(matches!(
        frames.last().unwrap().event,
        Event::RunCompleted { .. }
    ));
    h.stop().await;
}

#[tokio::test]
async fn accept_edits_mode_writes_without_asking() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("write_file", json!({"path": "a.txt", "content": "a"})),
            Turn::tool_call(
                "edit_file",
                json!({"path": "a.txt", "old_string": "a", "new_string": "b"}),
            ),
            Turn::text("done"),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let mut params = submit(
        &session.id,
        "edit",
        json!({"permission_mode": "accept-edits"}),
    );
    params.headless = true;
    let run = client.session_submit(&params).await.unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    assert!(!frames
        .iter()
        .any(|f| f.event.kind() == "permission.requested"));
    assert_eq!(read(&h.path("a.txt")), "b");
    let diff = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::ToolCompleted { tool, metadata, .. } if tool == "edit_file" => metadata
                .get("diff")
                .and_then(|d| d.as_str())
                .map(str::to_owned),
            _ => None,
        })
        .unwrap();
    assert!(diff.contains("-a") && diff.contains("+b"), "{diff}");
    h.stop().await;
}

/// `(decision, by)` of every `permission.resolved`, in order.
fn resolutions(frames: &[lumina_protocol::EventFrame]) -> Vec<(Decision, String)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::PermissionResolved { decision, by, .. } => Some((*decision, by.clone())),
            _ => None,
        })
        .collect()
}
