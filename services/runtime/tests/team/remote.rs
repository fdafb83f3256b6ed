//! A remote member (`a2a: {peer: research}`) and a restart in the middle of its task: the
//! interrupted task had already created its remote task (journaled as a `delegate.updated`
//! step on the member's stream), so the retry after the restart follows that remote task
//! instead of sending the work again — the remote agent runs it once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use lumina_a2a::types::{Artifact, Part, TaskState};
use lumina_a2a::{
    A2aClient, A2aService, AgentSkill, CardDocument, CardOptions, ClientOptions, EventSink,
    Executor, ExecutorError, MemoryTaskStore, RequestContext,
};
use lumina_config::Env;
use lumina_protocol::team::TeamTaskEnded;
use lumina_protocol::{DelegateStep, Event, TaskStatus};
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::sync::Notify;

use super::*;

/// A remote agent whose tasks work until the test releases them.
#[derive(Default)]
struct Held {
    runs: AtomicUsize,
    release: Notify,
    done: AtomicBool,
    asked: std::sync::Mutex<String>,
}

struct HeldAgent(Arc<Held>);

#[async_trait]
impl Executor for HeldAgent {
    fn skills(&self) -> Vec<AgentSkill> {
        Vec::new()
    }

    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), ExecutorError> {
        let held = &self.0;
        held.runs.fetch_add(1, Ordering::SeqCst);
        *held.asked.lock().unwrap() = ctx.message.text();
        let failed = |e: lumina_a2a::Error| ExecutorError::Failed(e.to_string());
        events
            .status(TaskState::Working, None)
            .await
            .map_err(failed)?;
        tokio::select! {
            _ = held.release.notified() => {}
            _ = ctx.cancel.cancelled() => return Err(ExecutorError::Failed("canceled".into())),
        }
        let artifact = Artifact {
            artifact_id: "a1".into(),
            name: Some("result".into()),
            description: None,
            parts: vec![Part::text("remote result: 42")],
            metadata: None,
            extensions: Vec::new(),
        };
        events
            .artifact(artifact, false, true)
            .await
            .map_err(failed)?;
        events
            .status(TaskState::Completed, None)
            .await
            .map_err(failed)?;
        held.done.store(true, Ordering::SeqCst);
        Ok(())
    }
}

/// Serves `executor` on a loopback port; the agent's base URL.
async fn serve(executor: Arc<Held>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let base = format!("http://{addr}");
    let card = CardDocument::build(
        &CardOptions {
            name: "research".into(),
            description: "a held research agent".into(),
            version: "0.0.0".into(),
            url: format!("{base}/a2a"),
            listen: Some(addr),
            url_setting: "TEST_URL".into(),
            input_modes: vec!["text/plain".into()],
            output_modes: vec!["text/plain".into()],
            push_notifications: false,
            bearer_auth: false,
            streaming: true,
        },
        Vec::new(),
    );
    let service = A2aService::new(
        Arc::new(MemoryTaskStore::new()),
        Arc::new(HeldAgent(executor)),
        card,
        None,
    );
    let app = lumina_a2a::router(service, Arc::new(lumina_a2a::OpenAccess), "/a2a");
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

fn loopback_client() -> A2aClient {
    A2aClient::new(ClientOptions {
        allow_loopback: true,
        ..ClientOptions::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_follows_the_remote_task_instead_of_sending_it_again() {
    let held = Arc::new(Held::default());
    let base = serve(held.clone()).await;
    let server = ScriptedModelServer::start(vec![
        Turn::tool_call(
            "team_dispatch",
            json!({"agent": "research", "task": "TASK-research: find the answer"}),
        )
        .matching(LEADER),
        // After the restart, with the resumed round's results.
        Turn::tool_call("team_complete", json!({"summary": "answered"})).matching(LEADER),
    ])
    .unwrap();
    let mut world = World::new(&server, "anthropic");
    world.env = Env::from_pairs(vec![
        ("LUMINA_API_KEY", "test-key".to_owned()),
        ("LUMINA_API_BASE_URL", server.base_url()),
        ("LUMINA_API_MODEL", "scripted-model".to_owned()),
        ("LUMINA_API_TYPE", "anthropic".to_owned()),
        ("LUMINA_PERMISSION_MODE", "bypass".to_owned()),
        (
            "LUMINA_A2A_PEERS",
            json!({"research": {"url": base}}).to_string(),
        ),
    ]);
    let root = world.project.join(".Lumina/TEAM/lab");
    let write = |path: &str, text: &str| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "team.yaml",
        "name: lab\nentry_agent: leader\nagents: [leader, research]\n",
    );
    write("agents/leader/agent.yaml", "name: leader\n");
    write("agents/leader/system.md", "LEADER-PROMPT: plan.\n");
    write(
        "agents/research/agent.yaml",
        "name: research\na2a: {peer: research}\n",
    );

    let doomed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let first = world.runtime().with_a2a_client(loopback_client());
    let project = world.project.clone();
    let session = {
        let runtime = first.clone();
        doomed
            .spawn(async move {
                let session = new_session(&runtime, &project).await;
                session.team_enter("lab").await.unwrap();
                submit(&session, "k1", "What is the answer?").await;
                session
            })
            .await
            .unwrap()
    };
    let session_id = session.id().to_string();
    wait_for(&session, "the remote task to be sent", |frames| {
        frames.iter().any(|f| {
            matches!(
                &f.event,
                Event::DelegateUpdated {
                    step: DelegateStep::Sent,
                    task_id: Some(_),
                    ..
                }
            )
        })
    })
    .await;
    assert_eq!(held.runs.load(Ordering::SeqCst), 1);
    assert!(held.asked.lock().unwrap().contains("TASK-research"));
    // kill -9 while the remote agent works; then the remote task ends.
    doomed.shutdown_background();
    drop(session);
    drop(first);
    held.release.notify_one();
    for _ in 0..500 {
        if held.done.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(held.done.load(Ordering::SeqCst));

    let second = world.runtime().with_a2a_client(loopback_client());
    let session = second.session(&session_id).await.unwrap();
    wait_for(&session, "the resumed run to end", |frames| {
        frames
            .iter()
            .any(|f| matches!(&f.event, Event::RunCompleted { result, .. } if result == "answered"))
    })
    .await;
    let frames = events(&session).await;
    assert_contiguous(&frames);
    let ended: Vec<(TaskStatus, String)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskEnded(TeamTaskEnded {
                status, summary, ..
            }) => Some((*status, summary.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(ended.len(), 2, "{ended:?}");
    assert_eq!(ended[0].0, TaskStatus::Interrupted);
    assert_eq!(
        ended[1],
        (TaskStatus::Completed, "remote result: 42".to_owned())
    );
    // The remote agent ran the task once; the retry checked on that same remote task.
    assert_eq!(held.runs.load(Ordering::SeqCst), 1);
    let remote_tasks: std::collections::BTreeSet<(String, String)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::DelegateUpdated {
                run_id,
                task_id: Some(task_id),
                ..
            } => Some((run_id.clone(), task_id.clone())),
            _ => None,
        })
        .collect();
    let runs: std::collections::BTreeSet<&String> = remote_tasks.iter().map(|(r, _)| r).collect();
    let tasks: std::collections::BTreeSet<&String> = remote_tasks.iter().map(|(_, t)| t).collect();
    assert_eq!((runs.len(), tasks.len()), (2, 1), "{remote_tasks:?}");
    let last_step = frames.iter().rev().find_map(|f| match &f.event {
        Event::DelegateUpdated { step, state, .. } => Some((*step, state.clone())),
        _ => None,
    });
    assert_eq!(
        last_step,
        Some((DelegateStep::Ended, Some("TASK_STATE_COMPLETED".to_owned())))
    );
    // The leader's model: the dispatch, then the finish.
    assert_eq!(server.requests().len(), 2);
}
