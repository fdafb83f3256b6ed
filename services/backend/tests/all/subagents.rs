//! Sub-agents (issue 7): the `agent` tool starts a child with an isolated context whose
//! final text is the parent's tool result; its run is a child stream of the session's
//! journal; the parallel, depth and total limits answer with an error result; a `kill -9`
//! mid-child leaves both the child and the parent explicitly interrupted.

use std::time::Duration;

use lumina_client::{Client, Notifications};
use lumina_protocol::methods::SessionSubmitParams;
use lumina_protocol::{Event, EventFrame, MAIN_STREAM};
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::crash::{dirs, kill9, spawn_backend};
use crate::support::*;

struct Ran {
    client: Client,
    notes: Notifications,
    session_id: String,
    run_id: String,
    frames: Vec<EventFrame>,
}

/// Runs one prompt in a new session to its end; returns the whole journal.
async fn run_prompt(h: &Harness, prompt: &str) -> Ran {
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, prompt, bypass()))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    let frames = all_events(&client, &session.id).await;
    Ran {
        client,
        notes,
        session_id: session.id,
        run_id: run.run_id,
        frames,
    }
}

async fn all_events(client: &Client, session_id: &str) -> Vec<EventFrame> {
    let frames = client
        .session_events(session_id, 0, Some(1000))
        .await
        .unwrap()
        .events;
    assert_contiguous(&frames);
    frames
}

fn on_stream<'a>(frames: &'a [EventFrame], stream: &str) -> Vec<&'a EventFrame> {
    frames.iter().filter(|f| f.stream == stream).collect()
}

/// `(child_id, depth, prompt)` of every `agent.started`, in order.
fn started(frames: &[EventFrame]) -> Vec<(String, u32, String)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::AgentStarted {
                child_id,
                depth,
                prompt,
                ..
            } => {
                assert_eq!(f.stream, MAIN_STREAM);
                Some((child_id.clone(), *depth, prompt.clone()))
            }
            _ => None,
        })
        .collect()
}

/// `(stream, is_error, output)` of every completed `agent` tool call, in order.
fn agent_results(frames: &[EventFrame]) -> Vec<(String, bool, String)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::ToolCompleted {
                tool,
                is_error,
                output,
                ..
            } if tool == "agent" => Some((f.stream.clone(), *is_error, output.clone())),
            _ => None,
        })
        .collect()
}

/// Tool names offered in a recorded (Anthropic) request.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn agent_turn(prompts: &[&str]) -> Turn {
    prompts.iter().fold(Turn::default(), |turn, prompt| {
        turn.with_tool_call("agent", json!({ "prompt": prompt }))
    })
}

#[tokio::test]
async fn a_child_writes_a_file_and_its_answer_is_the_parents_tool_result() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call(
                "agent",
                json!({"prompt": "Write notes.txt [child-w]", "description": "notes",
                       "tools": ["write_file", "read_file"]}),
            ),
            Turn::tool_call(
                "write_file",
                json!({"path": "notes.txt", "content": "from the child\n"}),
            )
            .matching("[child-w]"),
            Turn::text("notes.txt written by the child").matching("[child-w]"),
            Turn::text("The child wrote notes.txt."),
        ],
    )
    .await;
    let Ran {
        client,
        run_id,
        frames,
        ..
    } = run_prompt(&h, "PARENT-SECRET-7731: delegate the notes").await;
    assert_eq!(read(&h.path("notes.txt")), "from the child\n");

    let children = started(&frames);
    assert_eq!(children.len(), 1, "{frames:#?}");
    let (child_id, depth, prompt) = children[0].clone();
    assert_eq!((depth, prompt.as_str()), (1, "Write notes.txt [child-w]"));
    let stream = format!("agent/{child_id}");
    // The child's whole run is on its own stream, numbered from 1.
    let child = on_stream(&frames, &stream);
    assert_eq!(
        child.iter().map(|f| f.event.kind()).collect::<Vec<_>>(),
        vec![
            "run.started",
            "message.user",
            "step.started",
            "model.requested",
            "message.assistant",
            "model.responded",
            "usage.recorded",
            "tool.started",
            "permission.resolved",
            "tool.completed",
            "step.completed",
            "step.started",
            "model.requested",
            "message.assistant",
            "model.responded",
            "usage.recorded",
            "step.completed",
            "run.completed",
        ]
    );
    assert_eq!(
        child.iter().map(|f| f.stream_seq).collect::<Vec<_>>(),
        (1..=child.len() as u64).collect::<Vec<_>>()
    );
    assert!(matches!(&child[0].event, Event::RunStarted { run_id, .. } if *run_id == child_id));
    // The main stream: agent.started, then the child's result as the tool result.
    assert_eq!(
        agent_results(&frames),
        vec![(
            MAIN_STREAM.to_string(),
            false,
            "notes.txt written by the child".to_string()
        )]
    );
    let completed = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::AgentCompleted {
                child_id: c,
                result,
                is_error,
            } if *c == child_id => Some((result.clone(), *is_error)),
            _ => None,
        })
        .unwrap();
    assert_eq!(completed, ("notes.txt written by the child".into(), false));
    let Event::AgentStarted { tools, .. } = &frames
        .iter()
        .find(|f| f.event.kind() == "agent.started")
        .unwrap()
        .event
    else {
        unreachable!()
    };
    let mut offered = tools.clone();
    offered.sort();
    assert_eq!(offered, vec!["read_file", "write_file"]);
    match &frames.last().unwrap().event {
        Event::RunCompleted {
            run_id: r, result, ..
        } => {
            assert_eq!(
                (r.as_str(), result.as_str()),
                (run_id.as_str(), "The child wrote notes.txt.")
            )
        }
        other => panic!("{other:?}"),
    }

    // Isolation: the child's requests hold neither the parent's prompt nor its tools.
    let requests = h.model.requests();
    assert_eq!(requests.len(), 4);
    for child_request in &requests[1..3] {
        let body = child_request.body.to_string();
        assert!(!body.contains("PARENT-SECRET-7731"), "{body}");
        assert!(body.contains("You are a sub-agent"), "{body}");
        assert!(body.contains("Write notes.txt [child-w]"), "{body}");
        let mut names = tool_names(&child_request.body);
        names.sort();
        assert_eq!(names, vec!["read_file", "write_file"]);
    }
    assert!(tool_names(&requests[0].body).contains(&"agent".to_string()));
    let parent_second = requests[3].body.to_string();
    assert!(parent_second.contains("notes.txt written by the child"));
    assert!(!parent_second.contains("You are a sub-agent"));

    // The session's runs are the parent's only.
    let listed = client.session_list(false).await.unwrap();
    let last = listed[0].last_run.clone().unwrap();
    assert_eq!(
        (
            listed[0].status.as_str(),
            last.run_id.as_str(),
            last.status.as_str()
        ),
        ("idle", run_id.as_str(), "completed")
    );
    h.stop().await;
}

#[tokio::test]
async fn five_parallel_agent_calls_run_four_at_once_and_refuse_the_fifth() {
    let mut turns = vec![agent_turn(&[
        "task [par-1]",
        "task [par-2]",
        "task [par-3]",
        "task [par-4]",
        "task [par-5]",
    ])];
    for i in 1..=4 {
        // Slow answers, so the children overlap if they run concurrently.
        turns.push(
            Turn::text(format!("answer number {i}"))
                .with_chunk_delay_ms(80)
                .matching(format!("[par-{i}]")),
        );
    }
    turns.push(Turn::text("all collected"));
    let h = Harness::start("anthropic", turns).await;
    let frames = run_prompt(&h, "fan out").await.frames;

    let children = started(&frames);
    assert_eq!(
        children.iter().map(|c| c.2.as_str()).collect::<Vec<_>>(),
        vec![
            "task [par-1]",
            "task [par-2]",
            "task [par-3]",
            "task [par-4]"
        ]
    );
    let results = agent_results(&frames);
    assert_eq!(results.len(), 5);
    let refused: Vec<&(String, bool, String)> = results.iter().filter(|r| r.1).collect();
    assert_eq!(refused.len(), 1, "{results:#?}");
    assert!(
        refused[0].2.contains("subagent_max_parallel"),
        "{}",
        refused[0].2
    );
    let mut answers: Vec<&str> = results
        .iter()
        .filter(|r| !r.1)
        .map(|r| r.2.as_str())
        .collect();
    answers.sort();
    assert_eq!(
        answers,
        vec![
            "answer number 1",
            "answer number 2",
            "answer number 3",
            "answer number 4"
        ]
    );
    // Concurrent: every child started before the first one ended.
    let last_start = frames
        .iter()
        .filter(|f| f.event.kind() == "agent.started")
        .map(|f| f.seq)
        .max()
        .unwrap();
    let first_end = frames
        .iter()
        .filter(|f| f.event.kind() == "agent.completed")
        .map(|f| f.seq)
        .min()
        .unwrap();
    assert!(last_start < first_end, "children ran one after another");
    assert_eq!(h.model.request_count(), 6);
    h.stop().await;
}

#[tokio::test]
async fn an_agent_at_the_maximum_depth_cannot_start_another() {
    let h = Harness::start(
        "anthropic",
        vec![
            agent_turn(&["level one [lvl-1]"]),
            agent_turn(&["level two [lvl-2]"]).matching("[lvl-1]"),
            agent_turn(&["level three [lvl-3]"]).matching("[lvl-2]"),
            Turn::text("level two done").matching("[lvl-2]"),
            Turn::text("level one done").matching("[lvl-1]"),
            Turn::text("top done"),
        ],
    )
    .await;
    let frames = run_prompt(&h, "go deep").await.frames;
    let children = started(&frames);
    assert_eq!(
        children
            .iter()
            .map(|c| (c.1, c.2.as_str()))
            .collect::<Vec<_>>(),
        vec![(1, "level one [lvl-1]"), (2, "level two [lvl-2]")]
    );
    let results = agent_results(&frames);
    let grandchild_stream = format!("agent/{}", children[1].0);
    let child_stream = format!("agent/{}", children[0].0);
    assert_eq!(results.len(), 3, "{results:#?}");
    assert_eq!(results[0].0, grandchild_stream);
    assert!(
        results[0].1 && results[0].2.contains("subagent_max_depth"),
        "{results:#?}"
    );
    assert_eq!(
        (results[1].0.as_str(), results[1].1, results[1].2.as_str()),
        (child_stream.as_str(), false, "level two done")
    );
    assert_eq!(
        (results[2].0.as_str(), results[2].1, results[2].2.as_str()),
        (MAIN_STREAM, false, "level one done")
    );
    // Only agents below the maximum depth are offered `agent`.
    let requests = h.model.requests();
    assert!(tool_names(&requests[1].body).contains(&"agent".to_string()));
    assert!(!tool_names(&requests[2].body).contains(&"agent".to_string()));
    assert!(
        matches!(&frames.last().unwrap().event, Event::RunCompleted { result, .. } if result == "top done")
    );
    h.stop().await;
}

#[tokio::test]
async fn one_agent_tree_starts_at_most_eight_sub_agents() {
    let ids: Vec<String> = (1..=10).map(|i| format!("[tot-{i:02}]")).collect();
    let prompts: Vec<String> = ids.iter().map(|id| format!("count {id}")).collect();
    let p: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let mut turns = vec![
        agent_turn(&p[0..4]),
        agent_turn(&p[4..8]),
        agent_turn(&p[8..9]),
    ];
    for (i, id) in ids.iter().enumerate().take(8) {
        turns.push(Turn::text(format!("counted {}", i + 1)).matching(id.as_str()));
    }
    turns.push(Turn::text("counting over"));
    let h = Harness::start("anthropic", turns).await;
    let Ran {
        client,
        mut notes,
        session_id,
        frames,
        ..
    } = run_prompt(&h, "count").await;
    assert_eq!(started(&frames).len(), 8);
    let results = agent_results(&frames);
    assert_eq!(results.len(), 9);
    assert!(results[..8].iter().all(|r| !r.1), "{results:#?}");
    assert!(
        results[8].1 && results[8].2.contains("subagent_max_total"),
        "{results:#?}"
    );

    // The next top-level run is a new tree.
    h.model.push(agent_turn(&p[9..10]));
    h.model
        .push(Turn::text("counted 10").matching(ids[9].as_str()));
    h.model.push(Turn::text("again over"));
    let run = client
        .session_submit(&submit(&session_id, "one more", bypass()))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    let frames = all_events(&client, &session_id).await;
    let results = agent_results(&frames);
    assert_eq!(results.last().unwrap().2, "counted 10");
    h.stop().await;
}

/// Waits for the first event `pred` accepts.
async fn wait_for(notes: &mut Notifications, pred: impl Fn(&EventFrame) -> bool) -> EventFrame {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let note = tokio::time::timeout_at(deadline, notes.recv())
            .await
            .expect("no such event")
            .expect("connection closed");
        if let lumina_client::Notification::Event(frame) = note {
            if pred(&frame) {
                return frame;
            }
        }
    }
}

#[tokio::test]
async fn kill_9_mid_child_leaves_child_and_parent_interrupted() {
    let (_tmp, project, app) = dirs();
    let model = ScriptedModelServer::start(vec![
        agent_turn(&["nap for a while [crash-child]"]),
        Turn::tool_call("shell", json!({"command": "sleep 30"})).matching("[crash-child]"),
    ])
    .unwrap();
    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let (client, mut notes) = Client::connect(&backend.url, Some(&backend.token))
        .await
        .unwrap();
    let session = create_and_resume(&client, &project).await;
    let run = client
        .session_submit(&SessionSubmitParams {
            session_id: session.id.clone(),
            idempotency_key: "crash-parent".into(),
            prompt: "delegate a nap".into(),
            settings: json!(null),
            headless: true,
            mode: None,
        })
        .await
        .unwrap();
    let shell = wait_for(&mut notes, |f| {
        f.stream != MAIN_STREAM && f.event.kind() == "tool.started"
    })
    .await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    kill9(&mut backend);
    drop(client);

    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let (client, _notes) = Client::connect(&backend.url, Some(&backend.token))
        .await
        .unwrap();
    let listed = client.session_list(false).await.unwrap();
    let last = listed[0].last_run.clone().unwrap();
    assert_eq!(
        (
            listed[0].status.as_str(),
            last.run_id.as_str(),
            last.status.as_str()
        ),
        ("idle", run.run_id.as_str(), "interrupted")
    );
    let frames = all_events(&client, &session.id).await;
    let child_stream = shell.stream.clone();
    let tail = |stream: &str, n: usize| -> Vec<&'static str> {
        let kinds: Vec<&'static str> = on_stream(&frames, stream)
            .iter()
            .map(|f| f.event.kind())
            .collect();
        kinds[kinds.len().saturating_sub(n)..].to_vec()
    };
    assert_eq!(
        tail(&child_stream, 3),
        vec!["tool.interrupted", "step.interrupted", "run.interrupted"]
    );
    assert_eq!(
        tail(MAIN_STREAM, 4),
        vec![
            "agent.interrupted",
            "tool.interrupted",
            "step.interrupted",
            "run.interrupted"
        ]
    );
    let count = |kind: &str| frames.iter().filter(|f| f.event.kind() == kind).count();
    assert_eq!(
        (
            count("run.started"),
            count("run.interrupted"),
            count("agent.interrupted")
        ),
        (2, 2, 1)
    );
    let child_id = child_stream.trim_start_matches("agent/");
    assert!(frames.iter().any(|f| matches!(&f.event,
        Event::AgentInterrupted { child_id: c, .. } if c == child_id)));
    crate::crash::unsafe_free_sigterm(backend.child.id());
    let _ = backend.child.wait();
}
