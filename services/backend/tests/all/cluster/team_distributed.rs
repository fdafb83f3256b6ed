//! Distributed team members (`team_distributed`, docs/teams.md#distributed-members): a
//! round's member tasks run on instances other than the session's owner — each instance
//! calls the scripted model under its own path, so the model's request log says who ran
//! what — and `kill -9` of the instance running one member re-dispatches that member only,
//! once, without repeating its completed tool calls.

use std::collections::BTreeMap;
use std::time::Duration;

use lumina_protocol::methods::{SessionCreateParams, TeamEnterParams};
use lumina_protocol::team::{TeamTaskDispatched, TeamTaskStarted};
use lumina_protocol::{Event, EventFrame, TaskStatus};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;
use crate::support::{assert_contiguous, submit};

const LEADER: &str = "You lead the agent team";

fn member(name: &str) -> String {
    format!("You are `{name}`, a member of the agent team")
}

async fn all_events(client: &lumina_client::Client, session: &str) -> Vec<EventFrame> {
    client
        .session_events(session, 0, Some(1000))
        .await
        .unwrap()
        .events
}

fn distributed() -> Vec<(String, String)> {
    vec![("LUMINA_TEAM_DISTRIBUTED".into(), "true".into())]
}

fn write_crew(cluster: &Cluster) {
    let root = cluster.project.join(".Lumina/TEAM/crew");
    for (path, text) in [
        (
            "team.yaml",
            "name: crew\nentry_agent: leader\nagents: [leader, backend, frontend]\n",
        ),
        ("agents/leader/agent.yaml", "name: leader\n"),
        ("agents/leader/system.md", "Lead.\n"),
        ("agents/backend/agent.yaml", "name: backend\n"),
        ("agents/backend/system.md", "Server.\n"),
        ("agents/frontend/agent.yaml", "name: frontend\n"),
        ("agents/frontend/system.md", "Page.\n"),
    ] {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Creates a session on instance `i`, enters the crew and submits the task.
async fn start_team(
    cluster: &Cluster,
    i: usize,
) -> (lumina_client::Client, lumina_client::Notifications, String) {
    let token = cluster.user_token();
    let (client, notifications) = cluster.client(i, &token).await;
    let session = client
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: None,
        })
        .await
        .unwrap()
        .id;
    client
        .calls()
        .team_enter(&TeamEnterParams {
            session_id: session.clone(),
            team: "crew".into(),
        })
        .await
        .unwrap();
    client
        .session_submit(&submit(&session, "ship it", json!(null)))
        .await
        .unwrap();
    (client, notifications, session)
}

async fn wait_for(
    client: &lumina_client::Client,
    session: &str,
    what: &str,
    secs: u64,
    done: impl Fn(&[EventFrame]) -> bool,
) -> Vec<EventFrame> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let frames = all_events(client, session).await;
        if done(&frames) {
            return frames;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {:#?}",
            frames.iter().map(|f| f.event.kind()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn completed(frames: &[EventFrame]) -> bool {
    frames
        .iter()
        .any(|f| matches!(f.event, Event::TeamCompleted(_)))
}

/// `team.task_started` of each task: (agent, task id, instance).
fn starts(frames: &[EventFrame]) -> Vec<(String, String, String)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskStarted(TeamTaskStarted {
                agent,
                task_id,
                instance_id,
                ..
            }) => Some((agent.clone(), task_id.clone(), instance_id.clone())),
            _ => None,
        })
        .collect()
}

/// The instances (from the model request paths) whose requests carry `needle`.
fn requesters(cluster: &Cluster, needle: &str) -> Vec<String> {
    cluster
        .model
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains(needle))
        .map(|r| {
            r.path
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_run_on_other_instances_and_the_round_completes() {
    let cluster = Cluster::start_attributed(
        3,
        vec![
            Turn::tool_call(
                "team_dispatch",
                json!({"agent": "backend", "task": "server"}),
            )
            .with_tool_call(
                "team_dispatch",
                json!({"agent": "frontend", "task": "page"}),
            )
            .matching(LEADER),
            Turn::tool_call(
                "write_file",
                json!({"path": "server.txt", "content": "server\n"}),
            )
            .matching(member("backend")),
            Turn::text("server written").matching(member("backend")),
            Turn::text("page written").matching(member("frontend")),
            Turn::tool_call("team_complete", json!({"summary": "shipped"})).matching(LEADER),
        ],
        distributed(),
    )
    .await;
    write_crew(&cluster);
    let (client, _notifications, session) = start_team(&cluster, 1).await;
    let frames = wait_for(&client, &session, "the team to complete", 60, completed).await;
    assert_contiguous(&frames);
    let owner = client.session_info(&session).await.unwrap().owner;
    assert_eq!(owner, "i1");

    // Each task was started by an instance other than the owner, and that instance made
    // every model request of the member.
    let started = starts(&frames);
    assert_eq!(started.len(), 2, "{started:?}");
    for (agent, _, instance) in &started {
        assert_ne!(instance, &owner, "{agent} ran on the owner");
        let by: Vec<String> = requesters(&cluster, &member(agent));
        assert!(!by.is_empty(), "{agent} made no model request");
        assert!(
            by.iter().all(|i| i == instance),
            "{agent}'s requests came from {by:?}, its task started on {instance}"
        );
    }
    // The leader's turns ran on the owner.
    assert!(requesters(&cluster, LEADER).iter().all(|i| *i == owner));
    // The members' results reached the leader through the journal.
    let ended: Vec<(String, TaskStatus, String)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskEnded(e) => Some((e.agent.clone(), e.status, e.summary.clone())),
            _ => None,
        })
        .collect();
    let mut ended_sorted = ended.clone();
    ended_sorted.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        ended_sorted,
        vec![
            (
                "backend".to_string(),
                TaskStatus::Completed,
                "server written".to_string()
            ),
            (
                "frontend".to_string(),
                TaskStatus::Completed,
                "page written".to_string()
            ),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(cluster.project.join("server.txt")).unwrap(),
        "server\n"
    );
    // One owner, one fence: the workers wrote under the session's fence.
    let fences = cluster.fences(&session);
    assert!(fences.windows(2).all(|w| w[0] == w[1]), "{fences:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_a_members_instance_re_dispatches_only_that_member() {
    let mut stalled = Turn::text("half a page").matching(member("frontend"));
    stalled.stall_after_chunks = Some(2);
    let mut cluster = Cluster::start_attributed(
        3,
        vec![
            Turn::tool_call(
                "team_dispatch",
                json!({"agent": "backend", "task": "server"}),
            )
            .with_tool_call(
                "team_dispatch",
                json!({"agent": "frontend", "task": "page"}),
            )
            .matching(LEADER),
            Turn::tool_call(
                "write_file",
                json!({"path": "server.txt", "content": "server\n"}),
            )
            .matching(member("backend")),
            Turn::text("server written").matching(member("backend")),
            Turn::tool_call(
                "write_file",
                json!({"path": "page.txt", "content": "page\n"}),
            )
            .matching(member("frontend")),
            stalled,
            // The re-dispatched frontend sees its write_file result in its history.
            Turn::text("page written").matching(member("frontend")),
            Turn::tool_call("team_complete", json!({"summary": "shipped"})).matching(LEADER),
        ],
        distributed(),
    )
    .await;
    write_crew(&cluster);
    let (client, _notifications, session) = start_team(&cluster, 1).await;
    let owner = client.session_info(&session).await.unwrap().owner;
    assert_eq!(owner, "i1");

    // The backend's task ended, the frontend wrote its file and stalls in its next turn.
    let frames = wait_for(&client, &session, "the frontend to stall", 60, |frames| {
        let backend_done = frames
            .iter()
            .any(|f| matches!(&f.event, Event::TeamTaskEnded(e) if e.agent == "backend"));
        let page_written = frames.iter().any(|f| {
            matches!(&f.event, Event::ToolCompleted { output, tool, .. }
                if tool == "write_file" && f.stream.ends_with("/frontend") && !output.is_empty())
        });
        backend_done && page_written
    })
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while requesters(&cluster, &member("frontend")).len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "no stalled turn");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = starts(&frames);
    let (_, first_task, victim) = first
        .iter()
        .find(|(agent, _, _)| agent == "frontend")
        .cloned()
        .expect("the frontend's task started");
    assert_ne!(victim, owner);
    let victim_index = cluster
        .instances
        .iter()
        .position(|i| i.id == victim)
        .unwrap();
    cluster.kill9(victim_index);

    let frames = wait_for(&client, &session, "the team to complete", 90, completed).await;
    assert_contiguous(&frames);

    // The frontend's task: interrupted once, dispatched once more (naming the first),
    // completed; the backend's task ran once.
    let ended: Vec<(String, TaskStatus)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskEnded(e) => Some((e.agent.clone(), e.status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ended,
        vec![
            ("backend".to_string(), TaskStatus::Completed),
            ("frontend".to_string(), TaskStatus::Interrupted),
            ("frontend".to_string(), TaskStatus::Completed),
        ]
    );
    let dispatched: Vec<(String, Option<String>)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskDispatched(TeamTaskDispatched {
                agent, retry_of, ..
            }) => Some((agent.clone(), retry_of.clone())),
            _ => None,
        })
        .collect();
    let mut dispatched_sorted = dispatched.clone();
    dispatched_sorted.sort();
    assert_eq!(
        dispatched_sorted,
        vec![
            ("backend".to_string(), None),
            ("frontend".to_string(), None),
            ("frontend".to_string(), Some(first_task.clone())),
        ]
    );
    let interrupted_runs = frames
        .iter()
        .filter(
            |f| matches!(&f.event, Event::RunInterrupted { run_id, .. } if *run_id == first_task),
        )
        .count();
    assert_eq!(interrupted_runs, 1);
    // The retry ran on a live instance, not on the dead one.
    let again = starts(&frames);
    let retry = again
        .iter()
        .find(|(agent, task, _)| agent == "frontend" && *task != first_task)
        .expect("the retry started");
    assert_ne!(retry.2, victim);

    // Every member tool call ran exactly once: one start and one completion per call, and
    // the model was not asked to redo the completed work.
    let mut calls: BTreeMap<String, (String, usize, usize)> = BTreeMap::new();
    for frame in frames.iter().filter(|f| f.stream.starts_with("team/")) {
        match &frame.event {
            Event::ToolStarted {
                call_id, arguments, ..
            } => {
                let entry = calls
                    .entry(call_id.clone())
                    .or_insert_with(|| (arguments["path"].to_string(), 0, 0));
                entry.1 += 1;
            }
            Event::ToolCompleted { call_id, .. } => {
                calls.entry(call_id.clone()).or_default().2 += 1;
            }
            _ => {}
        }
    }
    let mut paths: Vec<String> = calls.values().map(|(p, _, _)| p.clone()).collect();
    paths.sort();
    assert_eq!(paths, vec!["\"page.txt\"", "\"server.txt\""]);
    assert!(
        calls.values().all(|(_, s, c)| *s == 1 && *c == 1),
        "{calls:?}"
    );
    assert_eq!(
        requesters(&cluster, &member("backend")).len(),
        2,
        "backend re-ran"
    );
    assert_eq!(requesters(&cluster, &member("frontend")).len(), 3);
    assert_eq!(
        std::fs::read_to_string(cluster.project.join("page.txt")).unwrap(),
        "page\n"
    );
    // Only the frontend's task was journaled interrupted; the owner never changed.
    assert_eq!(client.session_info(&session).await.unwrap().owner, owner);
    let fences = cluster.fences(&session);
    assert!(fences.windows(2).all(|w| w[0] == w[1]), "{fences:?}");
}
