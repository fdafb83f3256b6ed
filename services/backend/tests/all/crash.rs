//! `kill -9` of the real backend binary mid-stream and mid-tool, then a restart: explicit
//! interrupted events, contiguous seqs, and an idempotent resubmit that calls no model.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lumina_backend::endpoint;
use lumina_client::Client;
use lumina_protocol::methods::SessionSubmitParams;
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

pub(crate) struct Backend {
    pub(crate) child: Child,
    pub(crate) url: String,
    pub(crate) token: String,
}

pub(crate) fn spawn_backend(app_root: &Path, project: &Path, model_url: &str) -> Backend {
    let previous = endpoint::read(&app_root.join("state/run/backend.json")).map(|e| e.pid);
    let mut child = Command::new(env!("CARGO_BIN_EXE_lumina-backend"))
        .args(["serve", "--app-root"])
        .arg(app_root)
        .current_dir(project)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", app_root)
        .env("LUMINA_API_KEY", "test-key")
        .env("LUMINA_API_BASE_URL", model_url)
        .env("LUMINA_API_MODEL", "scripted")
        .env("LUMINA_API_TYPE", "anthropic")
        .env("LUMINA_PERMISSION_MODE", "bypass")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let file = app_root.join("state/run/backend.json");
    for _ in 0..300 {
        if let Some(e) = endpoint::read(&file) {
            if e.pid == child.id() && Some(e.pid) != previous {
                return Backend {
                    child,
                    url: e.url,
                    token: e.token,
                };
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("backend did not write its endpoint file");
}

pub(crate) fn kill9(backend: &mut Backend) {
    backend.child.kill().unwrap(); // SIGKILL
    backend.child.wait().unwrap();
}

pub(crate) fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let app = tmp.path().join("app");
    (tmp, project, app)
}

async fn crash_and_recover(turn: Turn, wait_for: &str, tail: Vec<&str>) {
    let (_tmp, project, app) = dirs();
    let model = ScriptedModelServer::start(vec![turn]).unwrap();
    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let (client, mut notes) = Client::connect(&backend.url, Some(&backend.token))
        .await
        .unwrap();
    let session = create_and_resume(&client, &project).await;
    let params = SessionSubmitParams {
        session_id: session.id.clone(),
        idempotency_key: "the-one-key".into(),
        prompt: "do it".into(),
        settings: json!(null),
        headless: true,
        mode: None,
    };
    let run = client.session_submit(&params).await.unwrap();
    next_event(&mut notes, wait_for).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    kill9(&mut backend);
    drop(client);

    // The stale endpoint file is replaced by the restarted backend.
    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let (client, _notes) = Client::connect(&backend.url, Some(&backend.token))
        .await
        .unwrap();
    let listed = client.session_list(false).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, "idle");
    let last_run = listed[0].last_run.clone().unwrap();
    assert_eq!(
        (last_run.run_id.as_str(), last_run.status.as_str()),
        (run.run_id.as_str(), "interrupted")
    );

    let page = client
        .session_events(&session.id, 0, Some(1000))
        .await
        .unwrap();
    assert_contiguous(&page.events);
    assert_eq!(page.events[0].seq, 1);
    let kinds = kinds(&page.events);
    assert_eq!(kinds[kinds.len() - tail.len()..].to_vec(), tail);
    // Each lifecycle event exactly once.
    assert_eq!(kinds.iter().filter(|k| **k == "run.started").count(), 1);
    assert_eq!(kinds.iter().filter(|k| **k == "run.interrupted").count(), 1);

    // Resubmitting with the same key returns the original run and calls no model.
    let requests_before = model.request_count();
    let again = client.session_submit(&params).await.unwrap();
    assert_eq!(again.run_id, run.run_id);
    assert!(!again.created);
    assert_eq!(again.run.status, "interrupted");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(model.request_count(), requests_before);
    assert_eq!(
        client
            .session_events(&session.id, 0, Some(1000))
            .await
            .unwrap()
            .events
            .len(),
        page.events.len()
    );

    // A clean stop removes the endpoint file.
    let file = app.join("state/run/backend.json");
    unsafe_free_sigterm(backend.child.id());
    let status = backend.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!file.exists());
    backend.child.kill().ok();
}

pub(crate) fn unsafe_free_sigterm(pid: u32) {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn kill_9_during_a_model_stream() {
    crash_and_recover(
        Turn::text("a slow answer that will never finish streaming to the end")
            .with_chunk_delay_ms(300),
        "model.requested",
        vec!["step.interrupted", "run.interrupted"],
    )
    .await;
}

#[tokio::test]
async fn kill_9_during_a_tool_call() {
    crash_and_recover(
        Turn::tool_call("shell", json!({"command": "sleep 30"})),
        "tool.started",
        vec!["tool.interrupted", "step.interrupted", "run.interrupted"],
    )
    .await;
}
