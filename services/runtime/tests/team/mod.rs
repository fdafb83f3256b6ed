//! Agent teams driven through `Runtime` and `Session` against the scripted model server:
//! the product-development flow (contract, parallel rounds bounded by
//! `max_parallel_agents`, a QA gate that fails once and passes in a recovery round, the
//! finish), isolation of the members' requests, a restart in the middle of a round, the
//! task-policy and follow-up gates and `show_thinking`, and bad input.

mod bad_input;
mod bench;
mod flow;
mod gates;
mod postgres;
mod restart;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lumina_config::{AppRoot, Env};
use lumina_journal::sqlite::SqliteJournal;
use lumina_protocol::methods::{SessionCreateParams, SessionSubmitParams};
use lumina_protocol::{Event, EventFrame};
use lumina_runtime::{AlwaysOwned, Runtime, RuntimeOptions, Session};
use lumina_testkit::ScriptedModelServer;
use serde_json::Value;
use tempfile::TempDir;

/// What the leader's system prompt says (the scripted model routes on it).
pub const LEADER: &str = "You lead the agent team";

/// What a member's system prompt says.
pub fn member(name: &str) -> String {
    format!("You are `{name}`, a member of the agent team")
}

pub struct World {
    pub _dir: TempDir,
    pub app_root: AppRoot,
    pub project: PathBuf,
    pub env: Env,
}

impl World {
    pub fn new(server: &ScriptedModelServer, api_type: &str) -> World {
        let dir = tempfile::tempdir().unwrap();
        let app_root = AppRoot::new(dir.path().join("app"));
        app_root.ensure_dirs().unwrap();
        lumina_team::install_builtins(&app_root).unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let env = Env::from_pairs(vec![
            ("LUMINA_API_KEY", "test-key".to_owned()),
            ("LUMINA_API_BASE_URL", server.base_url()),
            ("LUMINA_API_MODEL", "scripted-model".to_owned()),
            ("LUMINA_API_TYPE", api_type.to_owned()),
            ("LUMINA_PERMISSION_MODE", "bypass".to_owned()),
        ]);
        World {
            _dir: dir,
            app_root,
            project: project.canonicalize().unwrap(),
            env,
        }
    }

    /// A runtime over the world's SQLite journal (a new one is a restarted backend).
    pub fn runtime(&self) -> Runtime {
        let journal = SqliteJournal::open(self.app_root.sessions_dir(), "local").unwrap();
        Runtime::new(
            RuntimeOptions {
                app_root: self.app_root.clone(),
                env: self.env.clone(),
                tenant: "local".into(),
                default_project_root: self.project.clone(),
            },
            Arc::new(journal),
            lumina_tools::builtin_registry(),
            Arc::new(AlwaysOwned(lumina_journal::LOCAL_FENCE)),
        )
    }

    /// Writes a project team `crew`: `leader` (entry), `backend` (talks to leader and
    /// frontend), `frontend` (talks to the leader only).
    pub fn crew(&self, extra_team_yaml: &str) {
        let root = self.project.join(".Lumina/TEAM/crew");
        let write = |path: &str, text: &str| {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            "team.yaml",
            &format!(
                "name: crew\nentry_agent: leader\nagents: [leader, backend, frontend]\n\
                 loop:\n  max_parallel_agents: 2\n{extra_team_yaml}"
            ),
        );
        write("agents/leader/agent.yaml", "name: leader\n");
        write(
            "agents/leader/system.md",
            "LEADER-PROMPT: plan and delegate.\n",
        );
        write(
            "agents/backend/agent.yaml",
            "name: backend\ncommunicates_with: [leader, frontend]\n",
        );
        write(
            "agents/backend/system.md",
            "BACKEND-PROMPT: build the server.\n",
        );
        write(
            "agents/frontend/agent.yaml",
            "name: frontend\ncommunicates_with: [leader]\n",
        );
        write(
            "agents/frontend/system.md",
            "FRONTEND-PROMPT: build the UI.\n",
        );
    }
}

pub async fn new_session(runtime: &Runtime, project: &Path) -> Arc<Session> {
    let info = runtime
        .create_session(SessionCreateParams {
            project_root: Some(project.display().to_string()),
            title: None,
        })
        .await
        .unwrap();
    runtime.session(&info.id).await.unwrap()
}

pub async fn submit(session: &Arc<Session>, key: &str, prompt: &str) {
    session
        .submit(SessionSubmitParams {
            session_id: session.id().to_string(),
            idempotency_key: key.into(),
            prompt: prompt.into(),
            settings: Value::Null,
            headless: false,
            mode: None,
        })
        .await
        .unwrap();
}

pub async fn events(session: &Session) -> Vec<EventFrame> {
    session.journal().read(0, 100_000).await.unwrap()
}

/// Waits until `check` holds for the session's events.
pub async fn wait_for(session: &Session, what: &str, check: impl Fn(&[EventFrame]) -> bool) {
    for _ in 0..1500 {
        if check(&events(session).await) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let kinds: Vec<String> = events(session)
        .await
        .iter()
        .map(|f| format!("{} {} {}", f.seq, f.stream, f.event.kind()))
        .collect();
    panic!(
        "timed out waiting for {what}; events:\n{}",
        kinds.join("\n")
    );
}

/// The last top-level run ended.
pub fn run_ended(frames: &[EventFrame]) -> bool {
    frames.iter().rev().any(|f| {
        f.stream == "main"
            && matches!(
                f.event,
                Event::RunCompleted { .. } | Event::RunFailed { .. } | Event::RunInterrupted { .. }
            )
    })
}

/// `(name, is_error, output)` of every tool result on `stream`.
pub fn tool_results(frames: &[EventFrame], stream: &str) -> Vec<(String, bool, String)> {
    frames
        .iter()
        .filter(|f| f.stream == stream)
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

/// Every seq from 1 to the last, once, in order.
pub fn assert_contiguous(frames: &[EventFrame]) {
    let seqs: Vec<u64> = frames.iter().map(|f| f.seq).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "seqs are contiguous");
}
