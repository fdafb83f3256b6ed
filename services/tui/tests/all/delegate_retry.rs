//! A delegation parked while its A2A agent is unreachable (docs/a2a.md#a-delegation-parked-
//! while-its-agent-is-down): the screen names the agent and the reason and offers Ctrl-R;
//! Ctrl-R asks for `delegate.retry` of the parked call (once while it is on its way), and the
//! answer is shown; a call that ended — e.g. closed when the backend restarted — offers
//! nothing. Then the connection task against a scripted WebSocket server: the command sends
//! `delegate.retry` with the session and call, events keep arriving while the answer is
//! awaited, and the answer (or the server's error) comes back to the app.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use futures::{SinkExt, StreamExt};
use lumina_client::protocol::methods::{DelegateRetryResult, DelegateRetryState, SessionInfo};
use lumina_client::protocol::{ClientFrame, DelegateStep, Event, EventFrame};
use lumina_client::Client;
use lumina_tui::backend::Connected;
use lumina_tui::ui::app::{App, AppOptions, Command, ConnEvent, Msg};
use lumina_tui::ui::connection::{self, Connector, Timing};
use lumina_tui::ui::render;
use pretty_assertions::assert_eq;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

fn app() -> App {
    let mut app = App::new(AppOptions {
        project: "webshop".into(),
        model: Some("claude-sonnet".into()),
        settings: json!({}),
        history: vec![],
    });
    app.update(Msg::Tick(1_000));
    app.update(Msg::Conn(ConnEvent::Opened {
        session: info("S"),
        pending_permissions: vec![],
    }));
    app
}

fn info(id: &str) -> SessionInfo {
    SessionInfo {
        id: id.into(),
        title: "t".into(),
        project_root: "/p".into(),
        created_at_ms: 1,
        updated_at_ms: 1,
        status: "running".into(),
        head_seq: 0,
        last_run: None,
        usage: Default::default(),
    }
}

fn frame(seq: u64, event: Event) -> EventFrame {
    EventFrame {
        session_id: "S".into(),
        seq,
        stream: "main".into(),
        stream_seq: seq,
        ts_ms: 500,
        event,
    }
}

fn feed(app: &mut App, first_seq: u64, events: Vec<Event>) {
    let frames = events
        .into_iter()
        .enumerate()
        .map(|(i, e)| frame(first_seq + i as u64, e))
        .collect();
    app.update(Msg::Conn(ConnEvent::Events(frames)));
}

fn delegate(step: DelegateStep, detail: &str) -> Event {
    Event::DelegateUpdated {
        run_id: "R".into(),
        call_id: "c1".into(),
        agent: "remote".into(),
        step,
        task_id: Some("task-7".into()),
        state: Some("TASK_STATE_INPUT_REQUIRED".into()),
        detail: detail.into(),
    }
}

/// A run whose `a2a_delegate` call followed remote task `task-7` and was parked.
fn parked_run() -> Vec<Event> {
    vec![
        Event::RunStarted {
            run_id: "R".into(),
            idempotency_key: "k".into(),
            model: "m".into(),
        },
        Event::ToolStarted {
            run_id: "R".into(),
            step: 1,
            call_id: "c1".into(),
            tool: "a2a_delegate".into(),
            arguments: json!({"agent": "remote", "message": "compute the answer"}),
        },
        delegate(DelegateStep::Sent, ""),
        delegate(
            DelegateStep::Waiting,
            "`remote` is unreachable: connection refused",
        ),
    ]
}

fn ctrl_r(app: &mut App) -> Vec<Command> {
    app.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('r'),
        KeyModifiers::CONTROL,
    )))
}

/// The screen as text, one string per row.
fn screen(app: &mut App) -> Vec<String> {
    screen_of(app, 120, 24)
}

fn screen_of(app: &mut App, width: u16, height: u16) -> Vec<String> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| render::draw(app, f)).unwrap();
    let buffer = terminal.backend().buffer();
    (0..buffer.area.height)
        .map(|y| {
            (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
        })
        .collect()
}

fn shows(app: &mut App, text: &str) -> bool {
    screen(app).iter().any(|row| row.contains(text))
}

fn retried(state: DelegateRetryState, detail: &str) -> Msg {
    Msg::Conn(ConnEvent::DelegateRetried {
        call_id: "c1".into(),
        result: DelegateRetryResult {
            state,
            detail: detail.into(),
        },
    })
}

#[test]
fn ctrl_r_retries_a_parked_delegation_and_shows_the_answer() {
    let mut app = app();
    feed(&mut app, 1, parked_run());
    // Parked: who, why, and the key.
    let rows = screen(&mut app);
    let activity = rows
        .iter()
        .find(|r| r.contains("waiting for the A2A agent `remote`"))
        .unwrap_or_else(|| panic!("no parked line: {rows:#?}"));
    assert!(activity.contains("connection refused"), "{activity}");
    assert!(activity.contains("ctrl-r retry"), "{activity}");

    // Ctrl-R asks for a retry of that call, once while it is on its way.
    assert_eq!(
        ctrl_r(&mut app),
        vec![Command::RetryDelegate {
            call_id: "c1".into()
        }]
    );
    assert!(shows(&mut app, "retrying the A2A agent `remote`"));
    assert_eq!(ctrl_r(&mut app), vec![]);

    // Still unreachable: said so, parked again (the runtime journals a new `waiting`), and
    // Ctrl-R offered again.
    app.update(retried(
        DelegateRetryState::Waiting,
        "its card: connection refused",
    ));
    feed(
        &mut app,
        5,
        vec![
            delegate(DelegateStep::Unreachable, "its card: connection refused"),
            delegate(
                DelegateStep::Waiting,
                "`remote` is unreachable: its card: connection refused",
            ),
        ],
    );
    assert!(shows(
        &mut app,
        "retry: `remote` is still unreachable: its card: connection refused"
    ));
    assert!(shows(&mut app, "ctrl-r retry"));
    assert_eq!(
        ctrl_r(&mut app),
        vec![Command::RetryDelegate {
            call_id: "c1".into()
        }]
    );

    // The agent is back: the call ends with the remote task's state, nothing is parked,
    // and Ctrl-R does nothing.
    app.update(retried(DelegateRetryState::Ended, "TASK_STATE_COMPLETED"));
    assert!(shows(
        &mut app,
        "retry: the delegation to `remote` ended: completed"
    ));
    assert!(!shows(&mut app, "ctrl-r retry"));
    assert_eq!(ctrl_r(&mut app), vec![]);

    // The help names the key.
    for c in "/help".chars() {
        app.update(Msg::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        )));
    }
    app.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    let help = screen_of(&mut app, 120, 60).join("\n");
    assert!(
        help.contains("retry a delegation waiting for its unreachable A2A"),
        "{help}"
    );
}

#[test]
fn a_parked_call_that_ended_offers_no_retry() {
    // Closed by crash recovery (the backend restarted): the call and the run end.
    let mut app = app();
    feed(&mut app, 1, parked_run());
    assert!(shows(&mut app, "ctrl-r retry"));
    feed(
        &mut app,
        5,
        vec![
            Event::ToolInterrupted {
                run_id: "R".into(),
                call_id: "c1".into(),
                tool: "a2a_delegate".into(),
                reason: "the backend stopped before it ended".into(),
            },
            Event::RunInterrupted {
                run_id: "R".into(),
                reason: "the backend stopped before it ended".into(),
            },
        ],
    );
    assert!(!shows(&mut app, "waiting for the A2A agent"));
    assert_eq!(ctrl_r(&mut app), vec![]);

    // The agent answered a retry from elsewhere (the A2A executor, the console): the call
    // follows its task again, and the line goes.
    let mut app = self::app();
    feed(&mut app, 1, parked_run());
    feed(
        &mut app,
        5,
        vec![
            delegate(DelegateStep::Card, "remote"),
            delegate(DelegateStep::Status, "working on it"),
        ],
    );
    assert!(!shows(&mut app, "waiting for the A2A agent"));
    assert_eq!(ctrl_r(&mut app), vec![]);

    // A retry that failed (the connection, a refusal) says so and can be tried again.
    let mut app = self::app();
    feed(&mut app, 1, parked_run());
    assert_eq!(ctrl_r(&mut app).len(), 1);
    app.update(Msg::Conn(ConnEvent::DelegateRetryFailed {
        call_id: "c1".into(),
        message: "the connection closed".into(),
    }));
    assert!(shows(&mut app, "retry failed: the connection closed"));
    assert_eq!(ctrl_r(&mut app).len(), 1);
}

#[derive(Default)]
struct Server {
    /// Params of every `delegate.retry`.
    retries: Vec<Value>,
}

fn session_json() -> Value {
    json!({"id": "S", "title": "t", "project_root": "/p", "created_at_ms": 1,
           "updated_at_ms": 1, "status": "running", "head_seq": 4,
           "usage": {"input_tokens": 0, "output_tokens": 0}})
}

fn event(frame: &EventFrame) -> Value {
    let mut value = serde_json::to_value(frame).unwrap();
    value["type"] = json!("event");
    value
}

/// Answers the calls the connection task makes; `delegate.retry` first pushes an event
/// live, then answers 500 ms later (the first time: still waiting; then: not found).
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
                let (tx, mut rx) = socket.split();
                let tx = Arc::new(tokio::sync::Mutex::new(tx));
                while let Some(Ok(Message::Text(text))) = rx.next().await {
                    let request: ClientFrame = serde_json::from_str(text.as_str()).unwrap();
                    let id = request.id.clone();
                    let respond =
                        |result: Value| json!({"type": "response", "id": id, "result": result});
                    let frames = match request.method.as_str() {
                        "hello" => vec![respond(json!({"protocol": 3,
                            "server": {"name": "fake", "version": "0", "profile": "local",
                                       "instance_id": "i", "max_frame_bytes": 1_000_000},
                            "identity": {"sub": "me", "tenant": "t", "scopes": []}}))],
                        "session.info" => vec![respond(
                            json!({"session": session_json(), "owner": "i", "fence": 1}),
                        )],
                        "session.resume" => {
                            let mut frames = vec![respond(json!({"session": session_json(),
                                "head_seq": 4, "pending_permissions": []}))];
                            frames.extend(
                                parked_run()
                                    .into_iter()
                                    .enumerate()
                                    .map(|(i, e)| event(&frame(i as u64 + 1, e))),
                            );
                            frames
                        }
                        "delegate.retry" => {
                            let count = {
                                let mut s = state.lock().unwrap();
                                s.retries.push(request.params.clone());
                                s.retries.len()
                            };
                            let live = event(&frame(
                                4 + count as u64,
                                delegate(DelegateStep::Card, "remote"),
                            ));
                            tx.lock()
                                .await
                                .send(Message::text(live.to_string()))
                                .await
                                .unwrap();
                            let answer = if count == 1 {
                                respond(json!({"state": "waiting",
                                               "detail": "connection refused"}))
                            } else {
                                json!({"type": "error", "id": id, "error": {"code": "not_found",
                                    "message": "no a2a_delegate call c1 is waiting for its agent"}})
                            };
                            let tx = Arc::clone(&tx);
                            tokio::spawn(async move {
                                tokio::time::sleep(Duration::from_millis(500)).await;
                                let _ = tx
                                    .lock()
                                    .await
                                    .send(Message::text(answer.to_string()))
                                    .await;
                            });
                            vec![]
                        }
                        other => panic!("unexpected method {other}"),
                    };
                    for frame in frames {
                        tx.lock()
                            .await
                            .send(Message::text(frame.to_string()))
                            .await
                            .unwrap();
                    }
                }
            });
        }
    });
    format!("ws://{addr}/v1/ws")
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

/// Feeds the app what the connection task reports, as the live loop does, until `done`
/// says so; returns what arrived, in order.
async fn pump(
    rx: &mut mpsc::UnboundedReceiver<Msg>,
    app: &mut App,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let mut log: Vec<String> = Vec::new();
    let wait = async {
        while !done(&log) {
            let Some(Msg::Conn(event)) = rx.recv().await else {
                panic!("the connection task stopped: {log:?}");
            };
            match &event {
                ConnEvent::Opened { .. } => log.push("opened".into()),
                ConnEvent::Events(frames) => {
                    log.extend(frames.iter().map(|f| format!("event {}", f.seq)))
                }
                ConnEvent::DelegateRetried { call_id, result } => {
                    log.push(format!("retried {call_id} {result:?}"))
                }
                ConnEvent::DelegateRetryFailed { call_id, message } => {
                    log.push(format!("retried {call_id} failed: {message}"))
                }
                other => log.push(format!("{other:?}")),
            }
            app.update(Msg::Conn(event));
        }
    };
    if tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .is_err()
    {
        panic!("stalled: {log:?}");
    }
    log
}

#[tokio::test]
async fn the_connection_task_sends_delegate_retry_and_reports_the_answer() {
    let state = Arc::new(Mutex::new(Server::default()));
    let url = start(Arc::clone(&state)).await;
    let connector: Connector = {
        let url = url.clone();
        Arc::new(move || Box::pin(connect(url.clone())))
    };
    let first = connect(url).await.unwrap();
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (msg_tx, mut msg_rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(connection::run(
        connector,
        first,
        Timing::default(),
        "/p".into(),
        cmd_rx,
        msg_tx,
    ));
    cmd_tx.send(Command::Open("S".into())).unwrap();

    let mut app = app();
    let log = pump(&mut msg_rx, &mut app, |log: &[String]| {
        log.iter().any(|l| l == "event 4")
    })
    .await;
    assert_eq!(
        log,
        vec!["opened", "event 1", "event 2", "event 3", "event 4"]
    );

    // Ctrl-R → the command → `delegate.retry`; the event the server pushes meanwhile
    // arrives before the answer (the connection task does not wait on the retry).
    let commands = app.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('r'),
        KeyModifiers::CONTROL,
    )));
    assert_eq!(
        commands,
        vec![Command::RetryDelegate {
            call_id: "c1".into()
        }]
    );
    for command in commands {
        cmd_tx.send(command).unwrap();
    }
    let log = pump(&mut msg_rx, &mut app, |log: &[String]| {
        log.iter().any(|l| l.starts_with("retried"))
    })
    .await;
    assert_eq!(
        log,
        vec![
            "event 5".to_string(),
            format!(
                "retried c1 {:?}",
                DelegateRetryResult {
                    state: DelegateRetryState::Waiting,
                    detail: "connection refused".into()
                }
            )
        ]
    );
    assert_eq!(
        state.lock().unwrap().retries,
        vec![json!({"session_id": "S", "call_id": "c1"})]
    );
    assert!(shows(
        &mut app,
        "retry: `remote` is still unreachable: connection refused"
    ));

    // The server's refusal comes back as a failed retry.
    cmd_tx
        .send(Command::RetryDelegate {
            call_id: "c1".into(),
        })
        .unwrap();
    let log = pump(&mut msg_rx, &mut app, |log: &[String]| {
        log.iter().any(|l| l.starts_with("retried"))
    })
    .await;
    let answer = log.last().unwrap();
    assert!(
        answer.starts_with("retried c1 failed: ") && answer.contains("is waiting for its agent"),
        "{log:?}"
    );

    cmd_tx.send(Command::Quit { interrupt: None }).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}
