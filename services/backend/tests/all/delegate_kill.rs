//! Delegation end to end across a crash: an A2A client sends backend A a message, A's run
//! delegates to backend B (`a2a_delegate`, a real `lumina-backend serve` process), B is
//! killed (`kill -9`) mid-task → A's task reads input-required with the reason (the call is
//! parked, not failed); B restarts on the same port and data → the next `GetTask` on A
//! retries B, continues B's task in place (never a new one) and answers completed, with B's
//! artifact as the delegation's result.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lumina_backend::endpoint;
use lumina_client::Client;
use lumina_protocol::{DelegateStep, Event, EventFrame, WS_PATH};
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::*;

/// B: the real binary on `port`, accepting node `caller`'s signed calls.
pub(crate) fn spawn_b(
    app_root: &Path,
    project: &Path,
    model_url: &str,
    port: u16,
    caller_key: &str,
) -> Child {
    let previous = endpoint::read(&app_root.join("state/run/backend.json")).map(|e| e.pid);
    let peer = json!({"node": "remote", "nodes": {"caller": {"ed25519_public_key": caller_key}}});
    let mut child = Command::new(env!("CARGO_BIN_EXE_lumina-backend"))
        .args(["serve", "--port", &port.to_string(), "--app-root"])
        .arg(app_root)
        .current_dir(project)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", app_root)
        .env("LUMINA_API_KEY", "test-key")
        .env("LUMINA_API_BASE_URL", model_url)
        .env("LUMINA_API_MODEL", "scripted")
        .env("LUMINA_API_TYPE", "anthropic")
        .env("LUMINA_MODEL_MAX_RETRIES", "1")
        .env("LUMINA_PEER", peer.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let file = app_root.join("state/run/backend.json");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(e) = endpoint::read(&file) {
            if e.pid == child.id() && Some(e.pid) != previous {
                assert!(e.url.contains(&format!(":{port}")), "{}", e.url);
                return child;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("backend B did not write its endpoint file");
}

pub(crate) async fn rpc(base: &str, token: &str, method: &str, params: Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{base}/a2a"))
        .header("A2A-Version", "1.0")
        .bearer_auth(token)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .unwrap();
    response.json().await.unwrap()
}

/// A's `GetTask` until the task reads `state` (each read may wait for the retry it causes).
pub(crate) async fn until_state(base: &str, token: &str, task_id: &Value, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let got = rpc(base, token, "GetTask", json!({"id": task_id})).await;
        if got["result"]["status"]["state"] == state {
            return got["result"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "the task never read {state}: {got}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) async fn journal(client: &Client, session: &str) -> Vec<EventFrame> {
    client
        .session_events(session, 0, Some(1000))
        .await
        .unwrap()
        .events
}

pub(crate) fn delegate_steps(frames: &[EventFrame]) -> Vec<(DelegateStep, Option<String>, String)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::DelegateUpdated {
                step,
                task_id,
                detail,
                ..
            } => Some((*step, task_id.clone(), detail.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_delegation_parked_by_a_killed_agent_completes_when_it_is_back() {
    let keys = lumina_peer::generate_ed25519().unwrap();
    // B: its first answer stalls mid-stream (it is killed then); the continuation answers.
    let b_model = ScriptedModelServer::start(vec![
        Turn::text("thinking about it, slowly").stall_after(1),
        Turn::text("B's artifact: the answer is 42"),
    ])
    .unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let (b_app, b_project) = (b_dir.path().join("app"), b_dir.path().join("project"));
    std::fs::create_dir_all(&b_project).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut b = spawn_b(
        &b_app,
        &b_project,
        &b_model.base_url(),
        port,
        &keys.public_key,
    );

    // A: knows B as peer `remote`, signs as `caller`, may delegate without asking.
    let a = Harness::start_with(
        "anthropic",
        vec![
            Turn::tool_call(
                "a2a_delegate",
                json!({"agent": "remote", "message": "compute the answer"}),
            ),
            Turn::text("A reports: done"),
        ],
        &[
            (
                "LUMINA_PEER",
                &json!({"node": "caller", "ed25519_private_key": keys.private_seed.expose()})
                    .to_string(),
            ),
            (
                "LUMINA_A2A_PEERS",
                &json!({"remote": {"url": format!("http://127.0.0.1:{port}")}}).to_string(),
            ),
            ("LUMINA_PERMISSIONS", r#"{"allow": ["a2a_delegate"]}"#),
        ],
    )
    .await;
    let a_base = a.url.replace("ws://", "http://").replace(WS_PATH, "");

    // The client sends A a message; A's run delegates to B, whose model is mid-answer.
    let sent = rpc(
        &a_base,
        &a.token,
        "SendMessage",
        json!({
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "ask B"}]},
            "configuration": {"returnImmediately": true}
        }),
    )
    .await;
    let task = sent["result"]["task"].clone();
    let task_id = task["id"].clone();
    let session = task["contextId"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    while b_model.request_count() == 0 {
        assert!(Instant::now() < deadline, "B's model was never asked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    // B dies mid-task: A's task waits for it, with the reason, and nothing ran in its place.
    b.kill().unwrap();
    b.wait().unwrap();
    let waiting = until_state(&a_base, &a.token, &task_id, "TASK_STATE_INPUT_REQUIRED").await;
    let reason = waiting["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("`remote`"), "{reason}");
    assert!(reason.contains("unreachable"), "{reason}");
    // Reading it again while B is down: a prompt answer, still input-required.
    let started = Instant::now();
    let again = rpc(&a_base, &a.token, "GetTask", json!({"id": task_id})).await;
    assert_eq!(
        again["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{again}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    let (a_client, _notes) = a.client().await;
    let frames = journal(&a_client, &session).await;
    let steps = delegate_steps(&frames);
    assert!(
        steps.iter().any(|s| s.0 == DelegateStep::Waiting),
        "{steps:?}"
    );
    assert!(
        !kinds(&frames).contains(&"tool.completed"),
        "{:?}",
        kinds(&frames)
    );
    assert_eq!(a.model.request_count(), 1);

    // B is back on the same port and data: the next reads retry it and complete the task.
    let mut b = spawn_b(
        &b_app,
        &b_project,
        &b_model.base_url(),
        port,
        &keys.public_key,
    );
    let done = until_state(&a_base, &a.token, &task_id, "TASK_STATE_COMPLETED").await;
    assert_eq!(
        done["artifacts"][0]["parts"][0]["text"], "A reports: done",
        "{done}"
    );

    // B's artifact is the delegation's result in A's run.
    let frames = journal(&a_client, &session).await;
    let outputs = tool_outputs(&frames);
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let (tool, is_error, output) = &outputs[0];
    assert_eq!(tool, "a2a_delegate");
    assert!(!is_error, "{output}");
    assert!(
        output.contains("B's artifact: the answer is 42"),
        "{output}"
    );
    assert_eq!(a.model.request_count(), 2);

    // One remote task, continued in place: every step names the same task, and B's one
    // session holds the crashed run and the run that finished it — B ran the task once.
    let steps = delegate_steps(&frames);
    let remote_tasks: std::collections::BTreeSet<_> =
        steps.iter().filter_map(|s| s.1.clone()).collect();
    assert_eq!(remote_tasks.len(), 1, "{steps:?}");
    assert_eq!(b_model.request_count(), 2);
    let b_endpoint = endpoint::read(&b_app.join("state/run/backend.json")).unwrap();
    let (b_client, _b_notes) = Client::connect(&b_endpoint.url, Some(&b_endpoint.token))
        .await
        .unwrap();
    let sessions = b_client.session_list(false).await.unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let b_frames = journal(&b_client, &sessions[0].id).await;
    let b_kinds = kinds(&b_frames);
    let count = |kind: &str| b_kinds.iter().filter(|k| **k == kind).count();
    assert_eq!(
        (count("run.interrupted"), count("run.completed")),
        (1, 1),
        "{b_kinds:?}"
    );

    b.kill().unwrap();
    b.wait().unwrap();
    a.stop().await;
}
