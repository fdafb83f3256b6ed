//! The app driven like the real loop does: protocol frames and key events in, commands and
//! state out. No terminal, no network.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use lumina_client::protocol::methods::{McpServerStatus, SessionInfo, TeamInfo};
use lumina_client::protocol::{DeltaFrame, Event, EventFrame, Usage};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::ui::app::{AppOptions, ConnEvent, Msg, Overlay};
use crate::ui::transcript::ToolState;

fn app() -> App {
    let mut app = App::new(AppOptions {
        project: "proj".into(),
        settings: json!({"api_model": "m1"}),
        ..AppOptions::default()
    });
    app.update(Msg::Tick(1_000));
    app
}

fn key(app: &mut App, code: KeyCode) -> Vec<Command> {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn ctrl(app: &mut App, c: char) -> Vec<Command> {
    app.update(Msg::Key(KeyEvent::new(
        KeyCode::Char(c),
        KeyModifiers::CONTROL,
    )))
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

fn frames(events: Vec<Event>) -> Msg {
    Msg::Conn(ConnEvent::Events(
        events
            .into_iter()
            .enumerate()
            .map(|(i, event)| EventFrame {
                session_id: "s1".into(),
                seq: i as u64 + 1,
                stream: "main".into(),
                stream_seq: i as u64 + 1,
                ts_ms: 500,
                event,
            })
            .collect(),
    ))
}

fn delta(run: &str, step: u32, text: &str) -> Msg {
    Msg::Conn(ConnEvent::Delta(DeltaFrame {
        session_id: "s1".into(),
        run_id: run.into(),
        step,
        channel: "text".into(),
        text: text.into(),
    }))
}

fn started(run: &str) -> Event {
    Event::RunStarted {
        run_id: run.into(),
        idempotency_key: "k".into(),
        model: "claude-x".into(),
    }
}

fn session(id: &str) -> SessionInfo {
    SessionInfo {
        id: id.into(),
        title: "t".into(),
        project_root: "/p".into(),
        created_at_ms: 0,
        updated_at_ms: 0,
        status: "idle".into(),
        head_seq: 0,
        last_run: None,
        usage: Usage::default(),
    }
}

#[test]
fn enter_submits_and_keeps_history() {
    let mut app = app();
    typed(&mut app, "/permissions bypass");
    assert_eq!(key(&mut app, KeyCode::Enter), vec![]);
    typed(&mut app, "hello");
    let commands = key(&mut app, KeyCode::Enter);
    let [Command::Submit {
        prompt, settings, ..
    }] = commands.as_slice()
    else {
        panic!("{commands:?}")
    };
    assert_eq!(prompt, "hello");
    assert_eq!(
        settings,
        &json!({"api_model": "m1", "permission_mode": "bypass"})
    );
    assert!(app.editor.is_empty());
    assert_eq!(app.take_new_history(), vec!["/permissions bypass", "hello"]);
    key(&mut app, KeyCode::Up);
    assert_eq!(app.editor.raw_text(), "hello");
}

#[test]
fn a_prompt_is_kept_when_it_cannot_be_sent() {
    let mut app = app();
    app.update(Msg::Conn(ConnEvent::Lost {
        reason: "boom".into(),
    }));
    typed(&mut app, "keep me");
    assert_eq!(key(&mut app, KeyCode::Enter), vec![]);
    assert_eq!(app.editor.raw_text(), "keep me");
    app.update(Msg::Conn(ConnEvent::Connected {
        server: "ws://x".into(),
    }));
    app.update(frames(vec![started("r1")]));
    assert_eq!(key(&mut app, KeyCode::Enter), vec![]);
    assert_eq!(app.editor.raw_text(), "keep me", "a turn is running");
    assert_eq!(
        key(&mut app, KeyCode::Esc),
        vec![Command::Interrupt {
            run_id: Some("r1".into())
        }]
    );
}

#[test]
fn a_rejected_submit_gives_the_prompt_back() {
    let mut app = app();
    typed(&mut app, "try this");
    let commands = key(&mut app, KeyCode::Enter);
    let Some(Command::Submit { request_id, .. }) = commands.first() else {
        panic!()
    };
    app.update(Msg::Conn(ConnEvent::Failed {
        request_id: Some(request_id.clone()),
        message: "invalid_params: no model".into(),
    }));
    assert_eq!(app.editor.raw_text(), "try this");
    assert!(app.submitting.is_none());
}

#[test]
fn deltas_stream_then_the_durable_message_wins() {
    let mut app = app();
    app.update(frames(vec![started("r1")]));
    app.update(delta("r1", 1, "Hel"));
    app.update(delta("r1", 1, "lo"));
    assert_eq!(
        app.transcript.get(0),
        Some(&EntryKind::Assistant {
            text: "Hello".into(),
            streaming: true
        })
    );
    // The connection drops mid-stream: later deltas of that step are not trusted.
    app.update(Msg::Conn(ConnEvent::Lost { reason: "x".into() }));
    app.update(delta("r1", 1, " wor"));
    let mut events = vec![started("r1")];
    events.push(Event::MessageAssistant {
        run_id: "r1".into(),
        step: 1,
        text: "Hello world".into(),
        tool_calls: vec![],
    });
    let Msg::Conn(ConnEvent::Events(mut all)) = frames(events) else {
        unreachable!()
    };
    app.update(Msg::Conn(ConnEvent::Events(vec![all.remove(1)])));
    assert_eq!(
        app.transcript.get(0),
        Some(&EntryKind::Assistant {
            text: "Hello world".into(),
            streaming: false
        })
    );
    assert_eq!(app.transcript.len(), 1);
}

#[test]
fn a_tool_result_with_an_artifact_keeps_its_path() {
    let mut app = app();
    let path = "/r/state/tool-results/s1/artifacts/screenshot-c1.png";
    app.update(frames(vec![
        started("r1"),
        Event::ToolStarted {
            run_id: "r1".into(),
            step: 1,
            call_id: "c1".into(),
            tool: "browser_screenshot".into(),
            arguments: json!({}),
        },
        Event::ToolCompleted {
            run_id: "r1".into(),
            call_id: "c1".into(),
            tool: "browser_screenshot".into(),
            is_error: false,
            output: format!("Saved a screenshot (1280×800, 9 bytes) to {path}"),
            metadata: json!({"artifact": {
                "kind": "screenshot", "path": path, "media_type": "image/png", "bytes": 9
            }}),
        },
    ]));
    let EntryKind::Tool(tool) = app.transcript.get(0).unwrap() else {
        panic!()
    };
    assert_eq!(
        tool.artifact,
        Some(crate::ui::transcript::ToolArtifact {
            kind: "screenshot".into(),
            path: path.into(),
        })
    );
    // A result without one (or with no path) has none.
    assert_eq!(
        crate::ui::transcript::ToolArtifact::from_metadata(&json!({"artifact": {"kind": "x"}})),
        None
    );
}

#[test]
fn tools_diffs_tasks_and_unknown_kinds() {
    let mut app = app();
    app.update(frames(vec![
        started("r1"),
        Event::ToolStarted {
            run_id: "r1".into(),
            step: 1,
            call_id: "c1".into(),
            tool: "write_file".into(),
            arguments: json!({"path": "a.txt", "content": "x"}),
        },
    ]));
    assert_eq!(app.running_tools.len(), 1);
    app.update(frames(vec![
        Event::ToolCompleted {
            run_id: "r1".into(),
            call_id: "c1".into(),
            tool: "write_file".into(),
            is_error: false,
            output: "created a.txt".into(),
            metadata: json!({"diff": "+x\n"}),
        },
        Event::TaskUpdated { todos: vec![] },
        Event::Unknown,
    ]));
    let EntryKind::Tool(tool) = app.transcript.get(0).unwrap() else {
        panic!()
    };
    assert_eq!(tool.state, ToolState::Succeeded);
    assert_eq!(tool.diff.as_deref(), Some("+x\n"));
    assert!(app.running_tools.is_empty());
    assert_eq!(app.transcript.get(1), Some(&EntryKind::Tasks(vec![])));
    assert!(
        matches!(app.transcript.get(2), Some(EntryKind::Dim(t)) if t.contains("does not know"))
    );

    // Alt-Up selects the tool call, Ctrl-O expands it.
    app.update(Msg::Key(KeyEvent::new(KeyCode::Up, KeyModifiers::ALT)));
    ctrl(&mut app, 'o');
    let EntryKind::Tool(tool) = app.transcript.get(0).unwrap() else {
        panic!()
    };
    assert!(tool.selected && tool.expanded);
}

#[test]
fn permission_dialog_answers_and_survives_a_resume() {
    let mut app = app();
    let request = Event::PermissionRequested {
        run_id: "r1".into(),
        request_id: "p1".into(),
        call_id: "c1".into(),
        tool: "shell".into(),
        arguments: json!({"command": "rm -rf build"}),
        args_hash: "h".into(),
        preview: Some("rm -rf build".into()),
    };
    let Msg::Conn(ConnEvent::Events(pending)) = frames(vec![request]) else {
        unreachable!()
    };
    app.update(Msg::Conn(ConnEvent::Opened {
        session: session("s1"),
        pending_permissions: pending.clone(),
    }));
    assert_eq!(app.permissions.len(), 1);
    // Typing goes to the dialog, not the editor.
    key(&mut app, KeyCode::Char('3'));
    typed(&mut app, "too risky");
    let commands = key(&mut app, KeyCode::Enter);
    assert_eq!(
        commands,
        vec![Command::Respond {
            request_id: "p1".into(),
            decision: lumina_client::protocol::Decision::Deny,
            reason: Some("too risky".into()),
        }]
    );
    assert!(app.editor.is_empty());
    // A reconnect that still lists it (the answer was in flight) does not reopen it.
    app.update(Msg::Conn(ConnEvent::Resumed {
        pending_permissions: pending,
    }));
    assert!(app.permissions.is_empty());
}

#[test]
fn sessions_picker_opens_the_chosen_session() {
    let mut app = app();
    typed(&mut app, "/sessions");
    assert_eq!(key(&mut app, KeyCode::Enter), vec![Command::ListSessions]);
    app.update(Msg::Conn(ConnEvent::Sessions(vec![
        session("a"),
        session("b"),
    ])));
    key(&mut app, KeyCode::Down);
    assert_eq!(
        key(&mut app, KeyCode::Enter),
        vec![Command::Open("b".into())]
    );
    assert_eq!(app.overlay, None);
}

#[test]
fn completion_popups_for_commands_and_files() {
    let mut app = app();
    app.update(Msg::Files(vec![
        "src/".into(),
        "src/main.rs".into(),
        "README.md".into(),
    ]));
    typed(&mut app, "/he");
    assert_eq!(
        app.popup.as_ref().map(|p| p.items[0].0.as_str()),
        Some("/help")
    );
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.editor.raw_text(), "/help ");
    ctrl(&mut app, 'u');
    typed(&mut app, "read @mai");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.editor.raw_text(), "read @src/main.rs ");
    assert!(app.popup.is_none());
    typed(&mut app, "/x");
    assert!(app.popup.is_none(), "no popup once a space was typed");
    // A no-argument command runs straight from the palette.
    ctrl(&mut app, 'u');
    typed(&mut app, "/hel");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.overlay, Some(Overlay::Help { scroll: 0 }));
}

#[test]
fn skills_asks_the_backend() {
    let mut app = app();
    typed(&mut app, "/skills");
    key(&mut app, KeyCode::Esc);
    assert_eq!(key(&mut app, KeyCode::Enter), vec![Command::ListSkills]);
}

#[test]
fn commands_without_a_backend_say_so() {
    let mut app = app();
    typed(&mut app, "/compact");
    key(&mut app, KeyCode::Esc);
    assert_eq!(key(&mut app, KeyCode::Enter), vec![]);
    let notices: Vec<String> = app
        .transcript
        .kinds()
        .filter_map(|k| match k {
            EntryKind::Notice { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(notices.len(), 1);
    assert!(
        notices.iter().all(|n| n.contains("not available yet")),
        "{notices:?}"
    );
    typed(&mut app, "/my-skill do it");
    let commands = key(&mut app, KeyCode::Enter);
    assert!(
        matches!(&commands[..], [Command::Submit { prompt, .. }] if prompt == "/my-skill do it"),
        "{commands:?}"
    );
}

#[test]
fn ctrl_c_twice_quits_and_interrupts_the_running_turn() {
    let mut app = app();
    typed(&mut app, "draft");
    assert_eq!(ctrl(&mut app, 'c'), vec![]);
    assert!(app.editor.is_empty(), "the first Ctrl-C clears the input");
    app.update(Msg::Tick(1_000 + QUIT_WINDOW_MS + 1));
    assert_eq!(
        ctrl(&mut app, 'c'),
        vec![],
        "the window expired: armed again"
    );
    app.update(frames(vec![started("r9")]));
    assert_eq!(
        ctrl(&mut app, 'c'),
        vec![Command::Quit {
            interrupt: Some("r9".into())
        }]
    );
    assert!(app.quit);
}

#[test]
fn a_late_submit_answer_does_not_restart_a_finished_run() {
    let mut app = app();
    typed(&mut app, "go");
    let commands = key(&mut app, KeyCode::Enter);
    let Some(Command::Submit { request_id, .. }) = commands.first() else {
        panic!()
    };
    app.update(frames(vec![
        started("r1"),
        Event::RunCompleted {
            run_id: "r1".into(),
            result: "ok".into(),
            usage: Usage::default(),
        },
    ]));
    app.update(Msg::Conn(ConnEvent::Submitted {
        request_id: request_id.clone(),
        run_id: "r1".into(),
    }));
    assert!(app.run.is_none() && app.submitting.is_none());
    assert!(!app.animating());
}

#[test]
fn newline_keys_and_paste() {
    let mut app = app();
    typed(&mut app, "a");
    app.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT)));
    typed(&mut app, "b");
    app.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT)));
    ctrl(&mut app, 'j');
    typed(&mut app, "c\\");
    key(&mut app, KeyCode::Enter);
    app.update(Msg::Paste("pasted".into()));
    assert_eq!(app.editor.raw_text(), "a\nb\n\nc\npasted");
}

#[test]
fn mcp_lists_servers_and_trusts_a_project_server() {
    let mut app = app();
    // No session yet: nothing to ask the backend about.
    typed(&mut app, "/mcp");
    key(&mut app, KeyCode::Esc);
    assert_eq!(key(&mut app, KeyCode::Enter), vec![]);
    app.update(Msg::Conn(ConnEvent::Opened {
        session: session("s1"),
        pending_permissions: vec![],
    }));
    typed(&mut app, "/mcp");
    key(&mut app, KeyCode::Esc);
    assert_eq!(key(&mut app, KeyCode::Enter), vec![Command::McpStatus]);
    typed(&mut app, "/mcp trust everything");
    assert_eq!(
        key(&mut app, KeyCode::Enter),
        vec![Command::McpTrust("everything".into())]
    );
    typed(&mut app, "/mcp frobnicate");
    assert_eq!(key(&mut app, KeyCode::Enter), vec![]);
    let server = |name: &str, state: &str, tools: usize| McpServerStatus {
        name: name.into(),
        source: "project".into(),
        transport: "stdio".into(),
        state: state.into(),
        detail: (state == "untrusted").then(|| format!("trust it with /mcp trust {name}")),
        protocol_version: (state == "connected").then(|| "2025-11-25".into()),
        tools: (0..tools).map(|i| format!("mcp__{name}__t{i}")).collect(),
    };
    app.update(Msg::Conn(ConnEvent::Mcp(vec![
        server("everything", "connected", 8),
        server("local", "untrusted", 0),
    ])));
    let notices: Vec<(Level, String)> = app
        .transcript
        .kinds()
        .filter_map(|k| match k {
            EntryKind::Notice { level, text } => Some((*level, text.clone())),
            _ => None,
        })
        .collect();
    let n = notices.len();
    assert!(notices[0].1.contains("no session yet"), "{notices:?}");
    assert!(notices[n - 3].1.contains("usage: /mcp"), "{notices:?}");
    assert_eq!(
        notices[n - 2].1,
        "mcp everything (project stdio): connected, protocol 2025-11-25 — 8 tool(s): \
         mcp__everything__t0, mcp__everything__t1, mcp__everything__t2, mcp__everything__t3, \
         mcp__everything__t4, mcp__everything__t5, +2 more"
    );
    assert_eq!(notices[n - 1].0, Level::Warning);
    assert!(notices[n - 1].1.contains("trust it with /mcp trust local"));
}

#[test]
fn team_commands_go_to_the_backend() {
    let mut app = app();
    typed(&mut app, "/Team");
    key(&mut app, KeyCode::Esc);
    assert_eq!(key(&mut app, KeyCode::Enter), vec![Command::TeamList]);
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.overlay, None);
    typed(&mut app, "/Team crew");
    assert_eq!(
        key(&mut app, KeyCode::Enter),
        vec![Command::TeamEnter {
            team: "crew".into(),
            task: None
        }]
    );
    typed(&mut app, "/Team crew build the page");
    let commands = key(&mut app, KeyCode::Enter);
    let [Command::TeamEnter {
        team,
        task: Some(task),
    }] = &commands[..]
    else {
        panic!("{commands:?}");
    };
    assert_eq!(
        (team.as_str(), task.prompt.as_str()),
        ("crew", "build the page")
    );
    assert_eq!(task.settings, json!({"api_model": "m1"}));
    typed(&mut app, "/TeamOut");
    key(&mut app, KeyCode::Esc);
    assert_eq!(key(&mut app, KeyCode::Enter), vec![Command::TeamExit]);
    typed(&mut app, "/NewTeam my-crew My crew");
    assert_eq!(
        key(&mut app, KeyCode::Enter),
        vec![Command::TeamCreate {
            name: "my-crew".into(),
            display_name: "My crew".into()
        }]
    );
}

#[test]
fn a_team_shows_as_a_group_chat_honouring_its_transcript_choices() {
    use lumina_client::protocol::team::{TeamEntered, TeamMemberThinking, TeamMessageSent};
    let transcript_of = |dialogue: bool, thinking: bool| {
        let mut app = app();
        app.update(Msg::Conn(ConnEvent::Opened {
            session: session("s1"),
            pending_permissions: vec![],
        }));
        let entered = Event::TeamEntered(TeamEntered {
            team_run_id: "t".into(),
            team: "crew".into(),
            display_name: "Crew".into(),
            entry_agent: "lead".into(),
            members: vec!["lead".into(), "qa".into()],
            show_member_dialogue: dialogue,
            show_tool_details: false,
            show_thinking: thinking,
        });
        let side = |seq: u64, stream: &str, event: Event| EventFrame {
            session_id: "s1".into(),
            seq,
            stream: stream.into(),
            stream_seq: seq,
            ts_ms: 500,
            event,
        };
        let message = Event::TeamMessageSent(TeamMessageSent {
            team_run_id: "t".into(),
            msg_id: "m".into(),
            round: 1,
            from: "qa".into(),
            to: "lead".into(),
            text: "criterion 2 fails".into(),
            task_id: "x".into(),
        });
        let tool = Event::ToolStarted {
            run_id: "x".into(),
            step: 1,
            call_id: "c".into(),
            tool: "read_file".into(),
            arguments: json!({"path": "a.txt"}),
        };
        let thought = Event::TeamMemberThinking(TeamMemberThinking {
            team_run_id: "t".into(),
            task_id: "x".into(),
            agent: "qa".into(),
            step: 1,
            text: "\nCriterion 2 needs a test.\nLet me look for one.\nNone found.".into(),
        });
        app.update(Msg::Conn(ConnEvent::Events(vec![
            side(1, "main", entered),
            side(2, "team/t", message),
            side(3, "team/t/qa", thought),
            side(4, "team/t/qa", tool),
        ])));
        app.transcript
            .kinds()
            .filter_map(|k| match k {
                EntryKind::Dim(text) => Some(text.clone()),
                _ => None,
            })
            .collect::<Vec<String>>()
    };
    assert_eq!(
        transcript_of(true, false),
        vec![
            "team Crew (crew): lead, qa".to_string(),
            "[team/t] qa → lead: criterion 2 fails".to_string(),
        ]
    );
    assert_eq!(
        transcript_of(false, false),
        vec!["team Crew (crew): lead, qa".to_string()]
    );
    // show_thinking: the member's thinking, collapsed to its first line, dim.
    assert_eq!(
        transcript_of(false, true),
        vec![
            "team Crew (crew): lead, qa".to_string(),
            "[team/t/qa] qa thinking: Criterion 2 needs a test. (+2 lines)".to_string(),
        ]
    );
}

fn team_info(name: &str, error: Option<&str>) -> TeamInfo {
    TeamInfo {
        name: name.into(),
        display_name: format!("The {name}"),
        source: "builtin".into(),
        error: error.map(str::to_string),
    }
}

#[test]
fn team_picker_enters_the_chosen_team_and_refuses_a_broken_one() {
    let mut app = app();
    typed(&mut app, "/Team");
    key(&mut app, KeyCode::Esc);
    assert_eq!(key(&mut app, KeyCode::Enter), vec![Command::TeamList]);
    assert_eq!(
        app.overlay,
        Some(Overlay::Teams {
            items: None,
            selected: 0
        })
    );
    // Enter while the list is loading does nothing.
    assert_eq!(key(&mut app, KeyCode::Enter), vec![]);
    app.update(Msg::Conn(ConnEvent::Teams(vec![
        team_info("deep-research", None),
        team_info("broken", Some("team.yaml: `agents`: missing")),
        team_info("product-development", None),
    ])));
    key(&mut app, KeyCode::Down);
    assert_eq!(key(&mut app, KeyCode::Enter), vec![]);
    let notice = app.transcript.kinds().last().cloned();
    let Some(EntryKind::Notice { level, text }) = notice else {
        panic!("no notice: {notice:?}");
    };
    assert_eq!(level, Level::Error);
    assert!(
        text.contains("broken") && text.contains("`agents`"),
        "{text}"
    );
    assert!(matches!(
        app.overlay,
        Some(Overlay::Teams { selected: 1, .. })
    ));
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    assert_eq!(
        key(&mut app, KeyCode::Enter),
        vec![Command::TeamEnter {
            team: "product-development".into(),
            task: None
        }]
    );
    assert_eq!(app.overlay, None);
}

#[test]
fn team_picker_closes_when_the_list_fails() {
    let mut app = app();
    typed(&mut app, "/Team");
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Enter);
    app.update(Msg::Conn(ConnEvent::Failed {
        request_id: None,
        message: "/Team failed: not connected".into(),
    }));
    assert_eq!(app.overlay, None);
}
