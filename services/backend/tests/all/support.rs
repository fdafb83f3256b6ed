//! Test harness: an in-process local backend wired to a scripted model server.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lumina_backend::local::{self, LocalOptions};
use lumina_backend::server::{self, AppState};
use lumina_client::{Client, Notification, Notifications};
use lumina_config::{AppRoot, Env};
use lumina_protocol::methods::{SessionCreateParams, SessionInfo, SessionSubmitParams};
use lumina_protocol::{Event, EventFrame, WS_PATH};
use lumina_testkit::{ScriptedModelServer, Turn};
use serde_json::{json, Value};
use tempfile::TempDir;

pub struct Harness {
    pub tmp: TempDir,
    pub project: PathBuf,
    pub model: ScriptedModelServer,
    pub url: String,
    pub token: String,
    pub state: Arc<AppState>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Harness {
    /// A backend whose model is the scripted server speaking `api_type`.
    pub async fn start(api_type: &str, turns: Vec<Turn>) -> Harness {
        Self::start_with(api_type, turns, &[]).await
    }

    pub async fn start_with(
        api_type: &str,
        turns: Vec<Turn>,
        extra_env: &[(&str, &str)],
    ) -> Harness {
        Self::start_with_tools(api_type, turns, extra_env, lumina_tools::builtin_registry()).await
    }

    /// A backend with these built-in tools (e.g. browser tools allowed to reach the test's
    /// own loopback server, `lumina_tools::builtin_registry_with`).
    pub async fn start_with_tools(
        api_type: &str,
        turns: Vec<Turn>,
        extra_env: &[(&str, &str)],
        tools: lumina_tools::ToolRegistry,
    ) -> Harness {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let project = project.canonicalize().unwrap();
        let app_root = tmp.path().join("app");
        let model = ScriptedModelServer::start(turns).unwrap();
        let mut vars = vec![
            ("LUMINA_API_KEY".to_string(), "test-key-123".to_string()),
            ("LUMINA_API_BASE_URL".to_string(), model.base_url()),
            ("LUMINA_API_MODEL".to_string(), "scripted-model".to_string()),
            ("LUMINA_API_TYPE".to_string(), api_type.to_string()),
            ("LUMINA_MODEL_MAX_RETRIES".to_string(), "1".to_string()),
            ("HOME".to_string(), tmp.path().display().to_string()),
        ];
        for (k, v) in extra_env {
            vars.push((k.to_string(), v.to_string()));
        }
        let backend = local::build_with_tools(
            &LocalOptions {
                app_root: AppRoot::new(&app_root),
                env: Env::from_pairs(vars),
                port: 0,
                project_root: project.clone(),
                allow_loopback_agents: true,
            },
            tools,
        )
        .await
        .unwrap();
        let url = format!("ws://{}{}", backend.addr, WS_PATH);
        let state = backend.state.clone();
        let server = tokio::spawn(server::serve(backend.listener, state.clone()));
        Harness {
            tmp,
            project,
            model,
            url,
            token: backend.token,
            state,
            server,
        }
    }

    pub async fn client(&self) -> (Client, Notifications) {
        Client::connect(&self.url, Some(&self.token)).await.unwrap()
    }

    /// Creates a session in the project and subscribes `client` to it from seq 0.
    pub async fn session(&self, client: &Client) -> SessionInfo {
        let info = client
            .session_create(&SessionCreateParams {
                project_root: Some(self.project.display().to_string()),
                title: None,
            })
            .await
            .unwrap();
        client.session_resume(&info.id, 0).await.unwrap();
        info
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.project.join(rel)
    }

    pub async fn stop(self) {
        self.state.shutdown.cancel();
        let _ = self.server.await;
    }
}

pub fn submit(session_id: &str, prompt: &str, settings: Value) -> SessionSubmitParams {
    SessionSubmitParams {
        session_id: session_id.to_string(),
        idempotency_key: uuid::Uuid::new_v4().to_string(),
        prompt: prompt.to_string(),
        settings,
        headless: false,
        mode: None,
    }
}

pub fn bypass() -> Value {
    json!({ "permission_mode": "bypass" })
}

/// Collects notifications until the run's terminal event; panics after 20 s.
pub async fn until_run_end(notes: &mut Notifications, run_id: &str) -> Vec<Notification> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let note = tokio::time::timeout_at(deadline, notes.recv())
            .await
            .unwrap_or_else(|_| panic!("run {run_id} did not end; saw {seen:#?}"))
            .expect("connection closed");
        let end = matches!(&note, Notification::Event(f) if is_terminal(&f.event, run_id));
        seen.push(note);
        if end {
            return seen;
        }
    }
}

pub fn is_terminal(event: &Event, run_id: &str) -> bool {
    match event {
        Event::RunCompleted { run_id: r, .. }
        | Event::RunFailed { run_id: r, .. }
        | Event::RunInterrupted { run_id: r, .. } => r == run_id,
        _ => false,
    }
}

pub fn events(notes: &[Notification]) -> Vec<EventFrame> {
    notes
        .iter()
        .filter_map(|n| match n {
            Notification::Event(f) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

pub fn kinds(frames: &[EventFrame]) -> Vec<&'static str> {
    frames.iter().map(|f| f.event.kind()).collect()
}

/// Waits for the next event of `kind`.
pub async fn next_event(notes: &mut Notifications, kind: &str) -> EventFrame {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let note = tokio::time::timeout_at(deadline, notes.recv())
            .await
            .unwrap_or_else(|_| panic!("no {kind} event"))
            .expect("connection closed");
        if let Notification::Event(frame) = note {
            if frame.event.kind() == kind {
                return frame;
            }
        }
    }
}

pub fn assert_contiguous(frames: &[EventFrame]) {
    for pair in frames.windows(2) {
        assert_eq!(
            pair[1].seq,
            pair[0].seq + 1,
            "seq gap or duplicate: {frames:#?}"
        );
    }
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Creates a session in `project` and subscribes `client` to it from seq 0.
pub async fn create_and_resume(client: &lumina_client::Client, project: &Path) -> SessionInfo {
    let session = client
        .session_create(&SessionCreateParams {
            project_root: Some(project.display().to_string()),
            title: None,
        })
        .await
        .unwrap();
    client.session_resume(&session.id, 0).await.unwrap();
    session
}

/// `tool.completed` events as (tool, is_error, output), in order.
pub fn tool_outputs(frames: &[EventFrame]) -> Vec<(String, bool, String)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::ToolCompleted {
                tool,
                is_error,
                output,
                ..
            } => Some((tool.clone(), *is_error, output.clone())),
            _ => None,
        })
        .collect()
}
