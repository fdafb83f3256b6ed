//! The UI's connection task against a scripted WebSocket server that drops the connection
//! right after journaling a submit and before answering it. After the reconnect the task
//! must resume from the last seq, backfill the gaps the server leaves, and resend the
//! submit under the same request id; the app must see every event exactly once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use lumina_client::protocol::{ClientFrame, Event, EventFrame, Usage};
use lumina_client::Client;
use lumina_tui::backend::Connected;
use lumina_tui::ui::app::{Command, ConnEvent, Msg};
use lumina_tui::ui::connection::{self, Connector, Timing};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

#[derive(Default)]
struct Server {
    journal: Vec<EventFrame>,
    connections: u32,
    /// (connection, request id) of every submit.
    submits: Vec<(u32, String)>,
    /// (connection, after_seq) of every resume.
    resumes: Vec<(u32, u64)>,
}

fn append(server: &mut Server, event: Event) -> EventFrame {
    let seq = server.journal.len() as u64 + 1;
    let frame = EventFrame {
        session_id: "S".into(),
        seq,
        stream: "main".into(),
        stream_seq: seq,
        ts_ms: 1,
        event,
    };
    server.journal.push(frame.clone());
    frame
}

fn session_json(head: u64) -> Value {
    json!({"id": "S", "title": "t", "project_root": "/p", "created_at_ms": 1,
           "updated_at_ms": 1, "status": "idle", "head_seq": head,
           "usage": {"input_tokens": 0, "output_tokens": 0}})
}

fn event(frame: &EventFrame) -> Value {
    let mut value = serde_json::to_value(frame).unwrap();
    value["type"] = json!("event");
    value
}

async fn start(state: Arc<Mutex<Server>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let Ok(socket) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                let connection = {
                    let mut s = state.lock().unwrap();
                    s.connections += 1;
                    s.connections
                };
                let (mut tx, mut rx) = socket.split();
                while let Some(Ok(Message::Text(text))) = rx.next().await {
                    let request: ClientFrame = serde_json::from_str(text.as_str()).unwrap();
                    let (frames, hang_up) = answer(&state, connection, &request);
                    for frame in frames {
                        tx.send(Message::text(frame.to_string())).await.unwrap();
                    }
                    if hang_up {
                        return;
                    }
                }
            });
        }
    });
    format!("ws://{addr}/v1/ws")
}

/// The frames answering `request`, and whether to drop the connection afterwards.
fn answer(state: &Mutex<Server>, connection: u32, request: &ClientFrame) -> (Vec<Value>, bool) {
    let mut s = state.lock().unwrap();
    let id = &request.id;
    let respond = |result: Value| json!({"type": "response", "id": id, "result": result});
    match request.method.as_str() {
        "hello" => (
            vec![respond(json!({"protocol": 3,
                "server": {"name": "fake", "version": "0", "profile": "local",
                           "instance_id": "i", "max_frame_bytes": 1_000_000},
                "identity": {"sub": "me", "tenant": "t", "scopes": []}}))],
            false,
        ),
        "session.create" => {
            append(
                &mut s,
                Event::SessionCreated {
                    title: "t".into(),
                    project_root: "/p".into(),
                },
            );
            (vec![respond(json!({"session": session_json(1)}))], false)
        }
        "session.resume" => {
            let after = request.params["after_seq"].as_u64().unwrap_or(0);
            s.resumes.push((connection, after));
            let head = s.journal.len() as u64;
            let mut frames = vec![respond(
                json!({"session": session_json(head), "head_seq": head,
                                                  "pending_permissions": []}),
            )];
            // The first subscription gets its backlog; after the reconnect the server
            // "forgets" it, so only the explicit backfill can deliver it.
            if connection == 1 {
                frames.extend(s.journal.iter().filter(|f| f.seq > after).map(event));
            }
            (frames, false)
        }
        "session.events" => {
            let after = request.params["after_seq"].as_u64().unwrap_or(0);
            let events: Vec<Value> = s
                .journal
                .iter()
                .filter(|f| f.seq > after)
                .map(event)
                .collect();
            let head = s.journal.len();
            (
                vec![respond(
                    json!({"events": events, "head_seq": head, "more": false}),
                )],
                false,
            )
        }
        "session.submit" => {
            s.submits.push((connection, id.clone()));
            if connection == 1 {
                // Journaled: run.started goes out live, message.user is lost with the
                // connection, and the answer never comes.
                let started = append(
                    &mut s,
                    Event::RunStarted {
                        run_id: "R".into(),
                        idempotency_key: request.params["idempotency_key"].as_str().unwrap().into(),
                        model: "m".into(),
                    },
                );
                append(
                    &mut s,
                    Event::MessageUser {
                        run_id: "R".into(),
                        text: "hi".into(),
                        skill: None,
                    },
                );
                return (vec![event(&started)], true);
            }
            // The retry: the original run, and the rest of it live — with a hole at the
            // assistant message that the gap logic must fill.
            append(
                &mut s,
                Event::MessageAssistant {
                    run_id: "R".into(),
                    step: 1,
                    text: "hello".into(),
                    tool_calls: vec![],
                },
            );
            let done = append(
                &mut s,
                Event::RunCompleted {
                    run_id: "R".into(),
                    result: "hello".into(),
                    usage: Usage::default(),
                },
            );
            (
                vec![
                    respond(json!({"run_id": "R", "created": false,
                                   "run": {"run_id": "R", "status": "running"}})),
                    event(&done),
                ],
                false,
            )
        }
        other => panic!("unexpected method {other}"),
    }
}

async fn connect(url: String) -> anyhow::Result<Connected> {
    let (client, notifications) = Client::connect(&url, None).await?;
    let hello = client.hello("test").await?;
    Ok(Connected {
        client,
        notifications,
        hello,
    })
}

#[tokio::test]
async fn a_lost_submit_is_resent_under_its_id_and_events_arrive_exactly_once() {
    let state = Arc::new(Mutex::new(Server::default()));
    let url = start(Arc::clone(&state)).await;
    let connector: Connector = {
        let url = url.clone();
        Arc::new(move || Box::pin(connect(url.clone())))
    };
    let first = connect(url).await.unwrap();
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (msg_tx, mut msg_rx) = mpsc::unbounded_channel();
    let timing = Timing {
        first_delay: Duration::from_millis(20),
        ..Timing::default()
    };
    let task = tokio::spawn(connection::run(
        connector,
        first,
        timing,
        "/p".into(),
        cmd_rx,
        msg_tx,
    ));
    cmd_tx
        .send(Command::Submit {
            request_id: "req-1".into(),
            prompt: "hi".into(),
            settings: json!({}),
        })
        .unwrap();

    let mut seqs = Vec::new();
    let mut log = Vec::new();
    let collect = async {
        while let Some(Msg::Conn(event)) = msg_rx.recv().await {
            match &event {
                ConnEvent::Events(frames) => seqs.extend(frames.iter().map(|f| f.seq)),
                ConnEvent::Opened { .. } => log.push("opened".to_string()),
                ConnEvent::Lost { .. } => log.push("lost".to_string()),
                ConnEvent::Resumed { .. } => log.push("resumed".to_string()),
                ConnEvent::Connected { .. } => log.push("connected".to_string()),
                ConnEvent::Submitted { request_id, run_id } => {
                    log.push(format!("submitted {request_id} {run_id}"))
                }
                other => log.push(format!("{other:?}")),
            }
            if seqs.len() >= 5 && log.iter().any(|l| l.starts_with("submitted")) {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), collect)
        .await
        .unwrap_or_else(|_| panic!("stalled: seqs {seqs:?}, log {log:?}"));
    assert_eq!(seqs, vec![1, 2, 3, 4, 5], "every event once, in order");
    assert_eq!(
        log,
        vec![
            "opened",
            "lost",
            "resumed",
            "connected",
            "submitted req-1 R"
        ]
    );
    {
        let s = state.lock().unwrap();
        assert_eq!(
            s.submits,
            vec![(1, "req-1".to_string()), (2, "req-1".to_string())]
        );
        assert_eq!(
            s.resumes,
            vec![(1, 0), (2, 2)],
            "resumed from the last applied seq"
        );
    }
    cmd_tx.send(Command::Quit { interrupt: None }).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}
