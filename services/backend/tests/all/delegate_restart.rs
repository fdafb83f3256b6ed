//! The caller restarts while its delegation is parked (docs/a2a.md#a-delegation-parked-while-
//! its-agent-is-down, "If A itself restarts while parked"). An A2A client sends backend A a
//! message; A's run delegates to backend B (the real binary); B is killed mid-task, so A's
//! call is parked; then A is killed too (`kill -9`) and started again on the same port and
//! data. After A's restart:
//!
//! - `GetTask` on A's task answers at once: input-required, marked as interrupted by a
//!   restart (crash recovery closed the run and its parked call) — no hang, no error;
//! - `delegate.retry` of the parked call answers at once that the call ended, closed by the
//!   restart, naming B's task — not a bare not-found;
//! - with B back, a message on A's task continues it: a new run, whose model is told the
//!   remote task may still run and to check on it; the check finds B restarted under the task
//!   and sends the task's message again *on the same task*, so B finishes the work it had
//!   started — one remote task, B's model asked twice in all, B's artifact the result.
//!
//! A is this test binary itself, run as a child (`a_backend_child`, ignored, started by the
//! test): the real `lumina-backend` does not reach loopback agents, and B listens on
//! loopback.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lumina_backend::endpoint::{self, Endpoint};
use lumina_client::{Client, ClientError};
use lumina_protocol::methods::{DelegateRetryParams, DelegateRetryState};
use lumina_protocol::{DelegateStep, ErrorCode, Event, WS_PATH};
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::delegate_kill::{delegate_steps, journal, rpc, spawn_b, until_state};
use crate::support::*;

/// Set in the child that serves backend A: the app root; the rest comes from the environment.
const CHILD_APP_ROOT: &str = "LUMINA_TEST_A_APP_ROOT";
const CHILD_PORT: &str = "LUMINA_TEST_A_PORT";

/// Backend A, when this binary runs as the child the test starts: a local backend on the
/// given port and app root (the project is the working directory) that may reach loopback
/// agents, until it is killed.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by delegate_restart::the_caller_restarting_while_parked_continues_the_same_remote_task"]
async fn a_backend_child() {
    let Some(app_root) = std::env::var_os(CHILD_APP_ROOT) else {
        return;
    };
    let port = std::env::var(CHILD_PORT).unwrap().parse().unwrap();
    lumina_backend::local::serve(lumina_backend::local::LocalOptions {
        app_root: lumina_config::AppRoot::new(Path::new(&app_root)),
        env: lumina_config::Env::from_process(),
        port,
        project_root: std::env::current_dir().unwrap(),
        allow_loopback_agents: true,
    })
    .await
    .unwrap();
}

/// Starts backend A (see [`a_backend_child`]) and waits for its endpoint file.
fn spawn_a(
    app_root: &Path,
    project: &Path,
    model_url: &str,
    port: u16,
    env: &[(&str, &str)],
) -> Child {
    let file = app_root.join("state/run/backend.json");
    let previous = endpoint::read(&file).map(|e| e.pid);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "delegate_restart::a_backend_child",
            "--include-ignored",
            "--test-threads=1",
        ])
        .current_dir(project)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", app_root)
        .env(CHILD_APP_ROOT, app_root)
        .env(CHILD_PORT, port.to_string())
        .env("LUMINA_API_KEY", "test-key")
        .env("LUMINA_API_BASE_URL", model_url)
        .env("LUMINA_API_MODEL", "scripted")
        .env("LUMINA_API_TYPE", "anthropic")
        .env("LUMINA_MODEL_MAX_RETRIES", "1")
        .env("LUMINA_PERMISSIONS", r#"{"allow": ["a2a_delegate"]}"#)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
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
    panic!("backend A did not write its endpoint file");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn http_base(endpoint: &Endpoint) -> String {
    endpoint
        .url
        .replace("ws://", "http://")
        .replace(WS_PATH, "")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_caller_restarting_while_parked_continues_the_same_remote_task() {
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
    let b_port = free_port();
    let mut b = spawn_b(
        &b_app,
        &b_project,
        &b_model.base_url(),
        b_port,
        &keys.public_key,
    );

    // A: knows B as peer `remote`, signs as `caller`, may delegate without asking. Its
    // model (in this process) outlives A's restart; the continuation's turns come later.
    let a_model = ScriptedModelServer::start(vec![Turn::tool_call(
        "a2a_delegate",
        json!({"agent": "remote", "message": "compute the answer"}),
    )])
    .unwrap();
    let a_dir = tempfile::tempdir().unwrap();
    let (a_app, a_project) = (a_dir.path().join("app"), a_dir.path().join("project"));
    std::fs::create_dir_all(&a_project).unwrap();
    let a_port = free_port();
    let peers = json!({"remote": {"url": format!("http://127.0.0.1:{b_port}")}}).to_string();
    let a_peer =
        json!({"node": "caller", "ed25519_private_key": keys.private_seed.expose()}).to_string();
    let a_env = [
        ("LUMINA_A2A_PEERS", peers.as_str()),
        ("LUMINA_PEER", a_peer.as_str()),
    ];
    let mut a = spawn_a(&a_app, &a_project, &a_model.base_url(), a_port, &a_env);
    let a_endpoint = endpoint::read(&a_app.join("state/run/backend.json")).unwrap();
    let a_base = http_base(&a_endpoint);

    // The client sends A a message; A's run delegates to B, whose model is mid-answer.
    let sent = rpc(
        &a_base,
        &a_endpoint.token,
        "SendMessage",
        json!({
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "ask B"}]},
            "configuration": {"returnImmediately": true}
        }),
    )
    .await;
    let task = sent["result"]["task"].clone();
    assert!(task["id"].is_string(), "{sent}");
    let task_id = task["id"].clone();
    let session = task["contextId"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    while b_model.request_count() == 0 {
        assert!(Instant::now() < deadline, "B's model was never asked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    // B dies mid-task: A's call is parked (A's task waits, with the reason).
    b.kill().unwrap();
    b.wait().unwrap();
    let waiting = until_state(
        &a_base,
        &a_endpoint.token,
        &task_id,
        "TASK_STATE_INPUT_REQUIRED",
    )
    .await;
    let reason = waiting["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("unreachable"), "{reason}");
    let (a_client, _notes) = Client::connect(&a_endpoint.url, Some(&a_endpoint.token))
        .await
        .unwrap();
    let frames = journal(&a_client, &session).await;
    let (call_id, remote_task) = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::DelegateUpdated {
                call_id,
                step: DelegateStep::Waiting,
                task_id: Some(task),
                ..
            } => Some((call_id.clone(), task.clone())),
            _ => None,
        })
        .expect("a parked call");
    drop(a_client);

    // A dies too, and comes back on the same port and data.
    a.kill().unwrap();
    a.wait().unwrap();
    let mut a = spawn_a(&a_app, &a_project, &a_model.base_url(), a_port, &a_env);
    let a_endpoint = endpoint::read(&a_app.join("state/run/backend.json")).unwrap();
    assert_eq!(http_base(&a_endpoint), a_base);

    // GetTask: at once, input-required, marked as cut off by a restart.
    let started = Instant::now();
    let got = rpc(
        &a_base,
        &a_endpoint.token,
        "GetTask",
        json!({"id": task_id}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let status = &got["result"]["status"];
    assert_eq!(status["state"], "TASK_STATE_INPUT_REQUIRED", "{got}");
    assert_eq!(
        status["message"]["metadata"]["interrupted"], "restart",
        "{got}"
    );
    assert!(
        got["result"]["metadata"]["lumina"]["parkedCall"].is_null(),
        "{got}"
    );

    // delegate.retry of the call the restart closed: at once, ended, and why.
    let (a_client, _notes) = Client::connect(&a_endpoint.url, Some(&a_endpoint.token))
        .await
        .unwrap();
    let started = Instant::now();
    let retried = a_client
        .calls()
        .delegate_retry(&DelegateRetryParams {
            session_id: session.clone(),
            call_id: call_id.clone(),
        })
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(retried.state, DelegateRetryState::Ended, "{retried:?}");
    assert!(retried.detail.contains("restarted"), "{retried:?}");
    assert!(retried.detail.contains(&remote_task), "{retried:?}");
    // A call the session never made is still not found.
    let unknown = a_client
        .calls()
        .delegate_retry(&DelegateRetryParams {
            session_id: session.clone(),
            call_id: "no-such-call".into(),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&unknown, ClientError::Server(e) if e.code == ErrorCode::NotFound),
        "{unknown}"
    );
    let frames = journal(&a_client, &session).await;
    assert!(
        frames.iter().any(|f| matches!(&f.event,
            Event::ToolInterrupted { call_id: id, .. } if *id == call_id)),
        "{:?}",
        kinds(&frames)
    );
    assert!(!kinds(&frames).contains(&"tool.completed"));
    assert_eq!(b_model.request_count(), 1);

    // B is back. A message on A's task continues it: the new run's model checks on the
    // remote task (as the interrupted call's result tells it), and that check continues the
    // task B restarted under, in place.
    let mut b = spawn_b(
        &b_app,
        &b_project,
        &b_model.base_url(),
        b_port,
        &keys.public_key,
    );
    a_model.push(Turn::tool_call(
        "a2a_delegate",
        json!({"agent": "remote", "task_id": remote_task}),
    ));
    a_model.push(Turn::text("A reports: done"));
    let continued = rpc(
        &a_base,
        &a_endpoint.token,
        "SendMessage",
        json!({
            "message": {"messageId": "m2", "role": "ROLE_USER", "taskId": task_id,
                        "parts": [{"text": "please go on"}]},
            "configuration": {"returnImmediately": true}
        }),
    )
    .await;
    assert!(continued["result"].is_object(), "{continued}");
    let done = until_state(&a_base, &a_endpoint.token, &task_id, "TASK_STATE_COMPLETED").await;
    assert_eq!(
        done["artifacts"][0]["parts"][0]["text"], "A reports: done",
        "{done}"
    );

    // The continuation's model was told which remote task to check on, instead of sending.
    let asked = a_model.requests()[1].body.to_string();
    let hint = format!(r#"task_id: \"{remote_task}\"}} rather than sending the task again"#);
    assert!(asked.contains(&hint), "{asked}");

    // The check's result is B's artifact; every step names B's one task.
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
    let steps = delegate_steps(&frames);
    let remote_tasks: std::collections::BTreeSet<_> =
        steps.iter().filter_map(|s| s.1.clone()).collect();
    assert_eq!(
        remote_tasks,
        std::collections::BTreeSet::from([remote_task.clone()]),
        "{steps:?}"
    );
    assert_eq!(a_model.request_count(), 3);

    // B ran the task once: its one session holds the crashed run and the run that finished it.
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
    a.kill().unwrap();
    a.wait().unwrap();
}
