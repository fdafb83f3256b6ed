//! The semantic compile in the agent loop: with `memory_compile` on, the end of a run
//! compiles the project's new evidence in the background with the session's model; off
//! (the default), no compile request is ever made.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lumina_config::{AppRoot, Env};
use lumina_journal::sqlite::SqliteJournal;
use lumina_memory::semantic::NodeStatus;
use lumina_memory::MemoryStore;
use lumina_memory_sqlite::{SqliteMemory, SqliteOptions};
use lumina_protocol::methods::{SessionCreateParams, SessionSubmitParams};
use lumina_runtime::memory::{project_space, COMPILE_DEBOUNCE};
use lumina_runtime::{AlwaysOwned, Runtime, RuntimeOptions};
use lumina_testkit::{ScriptedModelServer, Turn};
use serde_json::{json, Value};
use tempfile::TempDir;

const COMPILE_PROMPT: &str = "You compile long-term memory";

struct World {
    _dir: TempDir,
    project: PathBuf,
    runtime: Runtime,
    memory: Arc<SqliteMemory>,
}

fn world(server: &ScriptedModelServer, compile: bool) -> World {
    let dir = tempfile::tempdir().unwrap();
    let app_root = AppRoot::new(dir.path().join("app"));
    app_root.ensure_dirs().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let mut vars = vec![
        ("LUMINA_API_KEY", "test-key".to_owned()),
        ("LUMINA_API_BASE_URL", server.base_url()),
        ("LUMINA_API_MODEL", "scripted-model".to_owned()),
        ("LUMINA_API_TYPE", "anthropic".to_owned()),
    ];
    if compile {
        vars.push(("LUMINA_MEMORY_COMPILE", "true".to_owned()));
    }
    let env = Env::from_pairs(vars);
    let journal = SqliteJournal::open(app_root.sessions_dir(), "local").unwrap();
    let memory =
        Arc::new(SqliteMemory::open(app_root.path(), SqliteOptions::default(), None).unwrap());
    let runtime = Runtime::new(
        RuntimeOptions {
            app_root,
            env,
            tenant: "local".into(),
            default_project_root: project.clone(),
        },
        Arc::new(journal),
        lumina_tools::builtin_registry(),
        Arc::new(AlwaysOwned(lumina_journal::LOCAL_FENCE)),
    )
    .with_memory(memory.clone());
    World {
        _dir: dir,
        project,
        runtime,
        memory,
    }
}

/// Runs one prompt in a new session of the project, to its end.
async fn run(w: &World, prompt: &str) {
    let info = w
        .runtime
        .create_session(SessionCreateParams {
            project_root: Some(w.project.display().to_string()),
            title: None,
        })
        .await
        .unwrap();
    let session = w.runtime.session(&info.id).await.unwrap();
    session
        .submit(SessionSubmitParams {
            session_id: info.id.clone(),
            idempotency_key: "k1".into(),
            prompt: prompt.into(),
            settings: Value::Null,
            headless: true,
            mode: None,
        })
        .await
        .unwrap();
    assert!(
        w.runtime.wait_idle(Duration::from_secs(20)).await,
        "the run ends"
    );
}

fn space(project: &Path) -> String {
    project_space(&project.canonicalize().unwrap())
}

fn compile_requests(server: &ScriptedModelServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains(COMPILE_PROMPT))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_compiles_the_projects_evidence_in_the_background() {
    // A fresh ledger: the user's message is event 1, the answer event 2.
    let answer = json!({"nodes": [{
        "kind": "fact", "subject": "user", "predicate": "lives in", "value": "Berlin",
        "text": "The user lives in Berlin.",
        "cites": [{"event_id": 1, "quote": "I live in Berlin"}],
    }]});
    let server = ScriptedModelServer::start(vec![
        Turn::text(answer.to_string()).matching(COMPILE_PROMPT),
        Turn::text("Noted: Berlin."),
    ])
    .unwrap();
    let w = world(&server, true);
    run(&w, "For the record: I live in Berlin.").await;
    let space = space(&w.project);
    let deadline = tokio::time::Instant::now() + COMPILE_DEBOUNCE + Duration::from_secs(20);
    let nodes = loop {
        let nodes = w.memory.nodes(&space).await.unwrap();
        if !nodes.is_empty() || tokio::time::Instant::now() > deadline {
            break nodes;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(nodes.len(), 1, "the compile ran");
    let node = &nodes[0];
    assert_eq!(
        (node.value.as_str(), node.status, node.actor.as_str()),
        ("Berlin", NodeStatus::Active, "user")
    );
    let cited = w
        .memory
        .get(&space, &[node.cites[0].event_id])
        .await
        .unwrap();
    assert_eq!(cited[0].row.text, "For the record: I live in Berlin.");
    assert_eq!(compile_requests(&server), 1);
    let status = w.memory.semantic_status(&space).await.unwrap();
    assert_eq!(
        status.last_event_id,
        w.memory.head(&space).await.unwrap().last_event_id
    );
    assert!(status.fingerprint.ends_with("model=scripted-model"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_memory_compile_no_compile_request_is_made() {
    let server = ScriptedModelServer::start(vec![Turn::text("Noted.")]).unwrap();
    let w = world(&server, false);
    run(&w, "For the record: I live in Berlin.").await;
    tokio::time::sleep(COMPILE_DEBOUNCE + Duration::from_millis(500)).await;
    assert_eq!(server.request_count(), 1);
    assert_eq!(compile_requests(&server), 0);
    assert!(w.memory.nodes(&space(&w.project)).await.unwrap().is_empty());
}
