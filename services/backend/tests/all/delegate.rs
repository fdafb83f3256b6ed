//! Delegation over A2A between two in-process backends: the caller's scripted model calls
//! `a2a_delegate`, the remote backend's A2A server runs the task with its own scripted
//! model, and the artifact comes back as the tool result with every step journaled. A
//! remote that is down makes the result input-required (nothing runs locally). The remote
//! accepts the caller's signed calls and refuses unsigned, replayed, mis-scoped and
//! wrongly keyed ones.

use lumina_client::Notifications;
use lumina_protocol::{DelegateStep, Event, EventFrame, WS_PATH};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::*;

fn http_base(ws_url: &str) -> String {
    ws_url.replace("ws://", "http://").replace(WS_PATH, "")
}

/// A remote backend that accepts node `caller` signing with `public_key`.
async fn remote(turns: Vec<Turn>, public_key: &str) -> Harness {
    let peer = json!({"node": "remote", "nodes": {"caller": {"ed25519_public_key": public_key}}});
    Harness::start_with("anthropic", turns, &[("LUMINA_PEER", &peer.to_string())]).await
}

/// A calling backend that knows `remote_url` as peer `remote`, signs with `seed`, and
/// allows `a2a_delegate` by a rule.
async fn caller(turns: Vec<Turn>, remote_url: &str, seed: &str) -> Harness {
    caller_with(turns, remote_url, seed, r#"{"allow": ["a2a_delegate"]}"#).await
}

async fn caller_with(turns: Vec<Turn>, remote_url: &str, seed: &str, permissions: &str) -> Harness {
    let peer = json!({"node": "caller", "ed25519_private_key": seed});
    let peers = json!({"remote": {"url": remote_url}});
    Harness::start_with(
        "anthropic",
        turns,
        &[
            ("LUMINA_PEER", &peer.to_string()),
            ("LUMINA_A2A_PEERS", &peers.to_string()),
            ("LUMINA_PERMISSIONS", permissions),
        ],
    )
    .await
}

async fn run_prompt(h: &Harness, prompt: &str) -> Vec<EventFrame> {
    run_prompt_with(h, prompt, false).await
}

async fn run_prompt_with(h: &Harness, prompt: &str, headless: bool) -> Vec<EventFrame> {
    let (client, mut notes): (_, Notifications) = h.client().await;
    let session = h.session(&client).await;
    let mut params = submit(&session.id, prompt, json!({}));
    params.headless = headless;
    let submitted = client.session_submit(&params).await.unwrap();
    events(&until_run_end(&mut notes, &submitted.run_id).await)
}

/// The `delegate.updated` steps as (step, state).
fn steps(frames: &[EventFrame]) -> Vec<(DelegateStep, Option<String>)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::DelegateUpdated { step, state, .. } => Some((*step, state.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_delegated_task_returns_the_remote_artifact_with_every_step_journaled() {
    let keys = lumina_peer::generate_ed25519().unwrap();
    let remote = remote(vec![Turn::text("remote answer: 42")], &keys.public_key).await;
    let remote_url = http_base(&remote.url);
    let local = caller(
        vec![
            Turn::tool_call(
                "a2a_delegate",
                json!({"agent": "remote", "message": "what is the answer?"}),
            ),
            Turn::text("the remote agent says 42"),
        ],
        &remote_url,
        keys.private_seed.expose(),
    )
    .await;

    let frames = run_prompt(&local, "ask the remote agent").await;
    let outputs = tool_outputs(&frames);
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let (tool, is_error, output) = &outputs[0];
    assert_eq!(tool, "a2a_delegate");
    assert!(!is_error, "{output}");
    assert!(output.contains("remote answer: 42"), "{output}");
    assert!(output.contains("completed task"), "{output}");

    // Each step is journaled on the caller's run: the card, the task, its statuses, the
    // artifact, the end.
    let steps = steps(&frames);
    assert_eq!(steps.first().map(|s| s.0), Some(DelegateStep::Card));
    assert_eq!(steps.get(1).map(|s| s.0), Some(DelegateStep::Sent));
    assert!(
        steps.iter().any(|s| s.0 == DelegateStep::Artifact),
        "{steps:?}"
    );
    assert_eq!(
        steps.last(),
        Some(&(DelegateStep::Ended, Some("TASK_STATE_COMPLETED".to_owned())))
    );
    let metadata = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::ToolCompleted { metadata, .. } => Some(metadata.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(metadata["state"], "TASK_STATE_COMPLETED");
    assert_eq!(metadata["agent"], "remote");

    // The remote ran it: its model got the message, in a session of its own.
    let asked = remote.model.requests();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].body.to_string().contains("what is the answer?"));
    // The caller's model was asked twice (the call, then the answer): nothing ran locally.
    assert_eq!(local.model.requests().len(), 2);
}

#[tokio::test]
async fn a_remote_that_is_down_makes_the_result_input_required() {
    let keys = lumina_peer::generate_ed25519().unwrap();
    // A port nobody listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let local = caller(
        vec![
            Turn::tool_call(
                "a2a_delegate",
                json!({"agent": "remote", "message": "do the thing"}),
            ),
            Turn::text("the remote agent is down"),
        ],
        &format!("http://127.0.0.1:{port}"),
        keys.private_seed.expose(),
    )
    .await;

    let frames = run_prompt(&local, "delegate it").await;
    let outputs = tool_outputs(&frames);
    let (_, is_error, output) = &outputs[0];
    assert!(is_error);
    assert!(output.starts_with("input-required: "), "{output}");
    assert!(output.contains("cannot reach"), "{output}");
    assert!(output.contains("Nothing was run locally"), "{output}");
    assert_eq!(
        steps(&frames),
        vec![(
            DelegateStep::Unreachable,
            Some("TASK_STATE_INPUT_REQUIRED".to_owned())
        )]
    );
    // Only the caller's two model turns; no sub-agent, no other tool ran.
    assert_eq!(local.model.requests().len(), 2);
    let kinds = kinds(&frames);
    assert!(!kinds.contains(&"agent.started"), "{kinds:?}");
    assert_eq!(
        kinds.iter().filter(|k| **k == "tool.started").count(),
        1,
        "{kinds:?}"
    );

    // An agent neither configured nor allowed is a plain error.
    let local2 = caller(
        vec![
            Turn::tool_call(
                "a2a_delegate",
                json!({"agent": "https://evil.example/", "message": "x"}),
            ),
            Turn::text("ok"),
        ],
        &format!("http://127.0.0.1:{port}"),
        keys.private_seed.expose(),
    )
    .await;
    let frames = run_prompt(&local2, "delegate it").await;
    let (_, is_error, output) = &tool_outputs(&frames)[0];
    assert!(is_error);
    assert!(
        output.contains("neither a configured A2A agent"),
        "{output}"
    );
    assert!(steps(&frames).is_empty());
}

#[tokio::test]
async fn delegation_asks_like_a_write() {
    let keys = lumina_peer::generate_ed25519().unwrap();
    let local = caller_with(
        vec![
            Turn::tool_call(
                "a2a_delegate",
                json!({"agent": "remote", "message": "project secrets"}),
            ),
            Turn::text("not allowed"),
        ],
        "http://127.0.0.1:9",
        keys.private_seed.expose(),
        "{}",
    )
    .await;
    // Headless: nobody can answer the question, so the call is denied, never sent.
    let frames = run_prompt_with(&local, "delegate it", true).await;
    let kinds = kinds(&frames);
    assert!(kinds.contains(&"permission.requested"), "{kinds:?}");
    let (_, is_error, output) = &tool_outputs(&frames)[0];
    assert!(
        *is_error && output.starts_with("permission denied"),
        "{output}"
    );
    assert!(steps(&frames).is_empty());
    let preview = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::PermissionRequested { preview, .. } => preview.clone(),
            _ => None,
        })
        .unwrap_or_default();
    assert_eq!(
        preview,
        "send to A2A agent remote (http://127.0.0.1:9):\nproject secrets"
    );
}

async fn post(
    base: &str,
    headers: &[(&'static str, String)],
    method: &str,
    params: Value,
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/a2a"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn signed_calls_are_accepted_and_unsigned_replayed_or_wrong_ones_refused() {
    let keys = lumina_peer::generate_ed25519().unwrap();
    let remote = remote(vec![Turn::text("hello peer")], &keys.public_key).await;
    let base = http_base(&remote.url);
    let settings = |seed: &str| lumina_config::PeerSettings {
        node: Some("caller".into()),
        ed25519_private_key: Some(lumina_config::Secret::new(seed)),
        ..Default::default()
    };
    let signer = lumina_peer::Signer::from_settings(&settings(keys.private_seed.expose()))
        .unwrap()
        .unwrap();
    let signed = |scope: &str| signer.sign(scope, "remote").unwrap().headers().to_vec();
    let message =
        json!({"message": {"messageId": "p1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}});

    // Accepted: the task runs and belongs to the peer.
    let write = signed(lumina_peer::SCOPE_WRITE);
    let (status, body) = post(&base, &write, "SendMessage", message.clone()).await;
    assert_eq!(status, 200, "{body}");
    let task = &body["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hello peer");
    let task_id = task["id"].as_str().unwrap().to_owned();

    // Replayed: the same signature again is refused.
    let (status, _) = post(&base, &write, "GetTask", json!({"id": task_id})).await;
    assert_eq!(status, 401);
    // A read signature reads, but may not send.
    let (status, body) = post(
        &base,
        &signed(lumina_peer::SCOPE_READ),
        "GetTask",
        json!({"id": task_id}),
    )
    .await;
    assert_eq!(
        (status, body["result"]["id"].as_str()),
        (200, Some(task_id.as_str()))
    );
    let (status, _) = post(
        &base,
        &signed(lumina_peer::SCOPE_READ),
        "SendMessage",
        message.clone(),
    )
    .await;
    assert_eq!(status, 403);
    // Unsigned, or signed with another key: refused, alike.
    let (status, unsigned) = post(&base, &[], "GetTask", json!({"id": task_id})).await;
    assert_eq!(status, 401);
    let other = lumina_peer::generate_ed25519().unwrap();
    let wrong = lumina_peer::Signer::from_settings(&settings(other.private_seed.expose()))
        .unwrap()
        .unwrap();
    let headers = wrong
        .sign(lumina_peer::SCOPE_READ, "remote")
        .unwrap()
        .headers()
        .to_vec();
    let (status, refused) = post(&base, &headers, "GetTask", json!({"id": task_id})).await;
    assert_eq!((status, &refused), (401, &unsigned));
    // A peer may not reach the user's own sessions as its context.
    let (client, _notes) = remote.client().await;
    let own = remote.session(&client).await;
    let stray = json!({"message": {"messageId": "p2", "role": "ROLE_USER", "parts": [{"text": "x"}], "contextId": own.id}});
    let (status, body) = post(
        &base,
        &signed(lumina_peer::SCOPE_WRITE),
        "SendMessage",
        stray,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["error"]["code"], -32602, "{body}");
    // The user with the bearer token does not see the peer's task.
    let (status, body) = post(
        &base,
        &[("authorization", format!("Bearer {}", remote.token))],
        "GetTask",
        json!({"id": task_id}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (200, Some(-32001))
    );
}

#[tokio::test]
async fn interrupting_the_run_cancels_the_remote_task() {
    let keys = lumina_peer::generate_ed25519().unwrap();
    let remote = remote(
        vec![
            Turn::text("a slow answer, word by word, that takes a while to arrive")
                .with_chunk_delay_ms(400),
        ],
        &keys.public_key,
    )
    .await;
    let local = caller(
        vec![Turn::tool_call(
            "a2a_delegate",
            json!({"agent": "remote", "message": "take your time"}),
        )],
        &http_base(&remote.url),
        keys.private_seed.expose(),
    )
    .await;
    let (client, mut notes): (_, Notifications) = local.client().await;
    let session = local.session(&client).await;
    let submitted = client
        .session_submit(&submit(&session.id, "ask slowly", json!({})))
        .await
        .unwrap();
    // Once the remote task exists (the call is following it), interrupt the run.
    loop {
        let frame = next_event(&mut notes, "delegate.updated").await;
        if matches!(
            frame.event,
            Event::DelegateUpdated {
                step: DelegateStep::Sent,
                ..
            }
        ) {
            break;
        }
    }
    client
        .session_interrupt(&session.id, Some(&submitted.run_id))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes, &submitted.run_id).await);
    assert!(
        kinds(&frames).contains(&"run.interrupted"),
        "{:?}",
        kinds(&frames)
    );

    // The call's last step is the remote's answer to CancelTask.
    let last = frames
        .iter()
        .rev()
        .find_map(|f| match &f.event {
            Event::DelegateUpdated {
                step,
                state,
                detail,
                ..
            } => Some((*step, state.clone(), detail.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        (last.0, last.1.as_deref()),
        (DelegateStep::Ended, Some("TASK_STATE_CANCELED")),
        "{last:?}"
    );
    // And the remote stopped working: its run was interrupted, not completed.
    let (remote_client, _notes) = remote.client().await;
    let mut ended = None;
    for _ in 0..100 {
        let sessions = remote_client.session_list(false).await.unwrap();
        ended = sessions
            .iter()
            .find_map(|s| s.last_run.as_ref().map(|r| r.status.clone()))
            .filter(|status| status != &lumina_protocol::RunStatus::Running);
        if ended.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(ended, Some(lumina_protocol::RunStatus::Interrupted));
}
