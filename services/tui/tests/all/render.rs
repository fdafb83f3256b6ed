//! Rendering snapshots of every screen and dialog: the app is fed protocol frames and keys
//! exactly as the live loop does, then drawn into ratatui's `TestBackend` at 80×24 and
//! 250×70. Review changes with `cargo insta review` (or `INSTA_UPDATE=always` and a diff).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use lumina_client::protocol::methods::SessionInfo;
use lumina_client::protocol::{DeltaFrame, Event, EventFrame, TodoItem, Usage};
use lumina_tui::ui::app::{App, AppOptions, ConnEvent, Msg};
use lumina_tui::ui::render;
use lumina_tui::ui::theme;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::json;

/// A fixed clock: 2025-01-01T00:00:10Z.
const NOW: i64 = 1_735_689_610_000;
const SIZES: [(u16, u16); 2] = [(80, 24), (250, 70)];

fn app() -> App {
    let mut app = App::new(AppOptions {
        project: "webshop".into(),
        model: Some("claude-sonnet".into()),
        settings: json!({}),
        history: vec![],
    });
    app.update(Msg::Tick(NOW));
    app
}

fn draw(app: &mut App, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| render::draw(app, f)).unwrap();
    terminal
}

fn snapshot(name: &str, app: &mut App) {
    for (width, height) in SIZES {
        let terminal = draw(app, width, height);
        insta::assert_snapshot!(format!("{name}_{width}x{height}"), terminal.backend());
    }
}

fn key(app: &mut App, code: KeyCode) {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

struct Journal {
    seq: u64,
}

impl Journal {
    fn new() -> Self {
        Self { seq: 0 }
    }

    fn frames(&mut self, stream: &str, events: Vec<Event>) -> Vec<EventFrame> {
        events
            .into_iter()
            .map(|event| {
                self.seq += 1;
                EventFrame {
                    session_id: "0f3c9a2e-1111-2222-3333-444455556666".into(),
                    seq: self.seq,
                    stream: stream.into(),
                    stream_seq: self.seq,
                    ts_ms: NOW - 4_000,
                    event,
                }
            })
            .collect()
    }

    fn apply(&mut self, app: &mut App, events: Vec<Event>) {
        let frames = self.frames("main", events);
        app.update(Msg::Conn(ConnEvent::Events(frames)));
    }
}

fn info(id: &str, title: &str, ago_ms: i64, status: &str, tokens: u64) -> SessionInfo {
    SessionInfo {
        id: id.into(),
        title: title.into(),
        project_root: "/home/me/webshop".into(),
        created_at_ms: NOW - ago_ms - 60_000,
        updated_at_ms: NOW - ago_ms,
        status: status.into(),
        head_seq: 10,
        last_run: None,
        usage: Usage {
            input_tokens: tokens,
            output_tokens: tokens / 10,
            ..Usage::default()
        },
    }
}

fn opened(app: &mut App) {
    app.update(Msg::Conn(ConnEvent::Opened {
        session: info(
            "0f3c9a2e-1111-2222-3333-444455556666",
            "fix checkout",
            0,
            "idle",
            0,
        ),
        pending_permissions: vec![],
    }));
}

const ANSWER: &str = "## Checkout bug\n\nThe total ignores **discounts** because `apply()` runs *after* rounding.\n\n1. move the call\n2. add a test\n   - with a 10% code\n\n```python\ndef total(cart):\n    # apply first\n    return round(apply(cart.sum), 2)\n```\n\n> Prices are in cents.";

/// A finished turn: answer, a shell call, an edit with a diff, a failing call, tasks.
fn conversation(app: &mut App, journal: &mut Journal) {
    journal.apply(
        app,
        vec![
            Event::RunStarted {
                run_id: "r1".into(),
                idempotency_key: "k1".into(),
                model: "claude-sonnet".into(),
            },
            Event::MessageUser {
                run_id: "r1".into(),
                text: "Why is the checkout total wrong? Fix it.".into(),
                skill: None,
            },
            Event::MessageAssistant {
                run_id: "r1".into(),
                step: 1,
                text: ANSWER.into(),
                tool_calls: vec![],
            },
            Event::ToolStarted {
                run_id: "r1".into(),
                step: 1,
                call_id: "c1".into(),
                tool: "shell".into(),
                arguments: json!({"command": "pytest -q tests/test_cart.py"}),
            },
            Event::ToolCompleted {
                run_id: "r1".into(),
                call_id: "c1".into(),
                tool: "shell".into(),
                is_error: false,
                output: "F.\n1 failed, 1 passed in 0.03s\n".into(),
                metadata: json!({"exit_code": 1}),
            },
            Event::ToolStarted {
                run_id: "r1".into(),
                step: 2,
                call_id: "c2".into(),
                tool: "edit_file".into(),
                arguments: json!({"path": "shop/cart.py", "old_string": "a", "new_string": "b"}),
            },
            Event::PermissionResolved {
                run_id: "r1".into(),
                request_id: "c2".into(),
                decision: lumina_client::protocol::Decision::AllowOnce,
                by: "rule".into(),
                reason: None,
            },
            Event::ToolCompleted {
                run_id: "r1".into(),
                call_id: "c2".into(),
                tool: "edit_file".into(),
                is_error: false,
                output: "updated shop/cart.py".into(),
                metadata: json!({"diff": "--- a/shop/cart.py\n+++ b/shop/cart.py\n@@ -1,3 +1,3 @@\n def total(cart):\n-    return apply(round(cart.sum, 2))\n+    return round(apply(cart.sum), 2)\n"}),
            },
            Event::ToolStarted {
                run_id: "r1".into(),
                step: 2,
                call_id: "c3".into(),
                tool: "read_file".into(),
                arguments: json!({"path": "shop/missing.py"}),
            },
            Event::ToolCompleted {
                run_id: "r1".into(),
                call_id: "c3".into(),
                tool: "read_file".into(),
                is_error: true,
                output: "shop/missing.py does not exist".into(),
                metadata: json!(null),
            },
            Event::TaskUpdated {
                todos: vec![
                    TodoItem { content: "Move apply() before rounding".into(), status: "completed".into(), id: None },
                    TodoItem { content: "Add a discount test".into(), status: "in_progress".into(), id: None },
                    TodoItem { content: "Run the suite".into(), status: "pending".into(), id: None },
                ],
            },
            Event::UsageRecorded {
                run_id: "r1".into(),
                step: 2,
                usage: Usage { input_tokens: 52_000, output_tokens: 1_300, ..Usage::default() },
                context_tokens: 128_000,
                max_tokens: 200_000,
            },
            Event::Warning {
                code: "slow_tool".into(),
                message: "pytest took longer than expected".into(),
                run_id: None,
            },
            Event::MessageAssistant {
                run_id: "r1".into(),
                step: 3,
                text: "Fixed: discounts now apply before rounding.".into(),
                tool_calls: vec![],
            },
            Event::RunCompleted {
                run_id: "r1".into(),
                result: "Fixed".into(),
                usage: Usage::default(),
            },
        ],
    );
}

fn live_turn(app: &mut App, journal: &mut Journal) {
    journal.apply(
        app,
        vec![
            Event::RunStarted {
                run_id: "r2".into(),
                idempotency_key: "k2".into(),
                model: "claude-sonnet".into(),
            },
            Event::MessageUser {
                run_id: "r2".into(),
                text: "Now add the test".into(),
                skill: None,
            },
        ],
    );
}

#[test]
fn welcome_screen() {
    snapshot("welcome", &mut app());
}

#[test]
fn transcript_with_markdown_tools_and_diff() {
    let mut app = app();
    let mut journal = Journal::new();
    opened(&mut app);
    conversation(&mut app, &mut journal);
    snapshot("transcript", &mut app);
    // Scrolled to the top: the start of the conversation and the "more below" tag.
    app.update(Msg::Key(KeyEvent::new(
        KeyCode::Home,
        KeyModifiers::CONTROL,
    )));
    let terminal = draw(&mut app, 80, 24);
    insta::assert_snapshot!("transcript_top_80x24", terminal.backend());
}

#[test]
fn diff_lines_are_red_and_green() {
    let mut app = app();
    let mut journal = Journal::new();
    conversation(&mut app, &mut journal);
    let terminal = draw(&mut app, 250, 70);
    let buffer = terminal.backend().buffer();
    let row_of = |needle: &str| {
        (0..70u16)
            .find(|&y| {
                let line: String = (0..250u16)
                    .map(|x| buffer[(x, y)].symbol().to_string())
                    .collect();
                line.contains(needle)
            })
            .unwrap_or_else(|| panic!("{needle} not on screen"))
    };
    let added = row_of("+    return round(apply(cart.sum), 2)");
    let removed = row_of("-    return apply(round(cart.sum, 2))");
    assert_eq!(buffer[(4, added)].fg, theme::diff_added().fg.unwrap());
    assert_eq!(buffer[(4, removed)].fg, theme::diff_removed().fg.unwrap());
}

#[test]
fn expanded_tool_call() {
    let mut app = app();
    let mut journal = Journal::new();
    conversation(&mut app, &mut journal);
    // Select the edit (the second tool call from the end) and expand it.
    for _ in 0..2 {
        app.update(Msg::Key(KeyEvent::new(KeyCode::Up, KeyModifiers::ALT)));
    }
    app.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('o'),
        KeyModifiers::CONTROL,
    )));
    snapshot("expanded_tool", &mut app);
}

#[test]
fn streaming_answer_with_running_tool_and_status_line() {
    let mut app = app();
    let mut journal = Journal::new();
    opened(&mut app);
    conversation(&mut app, &mut journal);
    live_turn(&mut app, &mut journal);
    app.update(Msg::Conn(ConnEvent::Delta(DeltaFrame {
        session_id: "0f3c9a2e-1111-2222-3333-444455556666".into(),
        run_id: "r2".into(),
        step: 1,
        channel: "text".into(),
        text: "I'll add a test with a **10%** code and run".into(),
    })));
    journal.apply(
        &mut app,
        vec![Event::ToolStarted {
            run_id: "r2".into(),
            step: 1,
            call_id: "c9".into(),
            tool: "shell".into(),
            arguments: json!({"command": "pytest -q"}),
        }],
    );
    snapshot("streaming", &mut app);
}

fn permission(
    app: &mut App,
    journal: &mut Journal,
    tool: &str,
    arguments: serde_json::Value,
    preview: &str,
) {
    journal.apply(
        app,
        vec![
            Event::ToolStarted {
                run_id: "r2".into(),
                step: 1,
                call_id: "c7".into(),
                tool: tool.into(),
                arguments: arguments.clone(),
            },
            Event::PermissionRequested {
                run_id: "r2".into(),
                request_id: "p7".into(),
                call_id: "c7".into(),
                tool: tool.into(),
                arguments,
                args_hash: "h".into(),
                preview: Some(preview.into()),
            },
        ],
    );
}

#[test]
fn permission_dialog_for_an_edit_shows_the_diff() {
    let mut app = app();
    let mut journal = Journal::new();
    conversation(&mut app, &mut journal);
    live_turn(&mut app, &mut journal);
    permission(
        &mut app,
        &mut journal,
        "write_file",
        json!({"path": "tests/test_discount.py", "content": "..."}),
        "--- /dev/null\n+++ b/tests/test_discount.py\n@@ -0,0 +1,5 @@\n+from shop.cart import total\n+\n+def test_discount():\n+    cart = Cart([100], code=\"TEN\")\n+    assert total(cart) == 90\n",
    );
    snapshot("permission_edit", &mut app);
}

#[test]
fn permission_dialog_for_the_shell_and_the_deny_reason() {
    let mut app = app();
    let mut journal = Journal::new();
    live_turn(&mut app, &mut journal);
    permission(
        &mut app,
        &mut journal,
        "shell",
        json!({"command": "rm -rf build && make release", "timeout_ms": 600000}),
        "rm -rf build && make release",
    );
    key(&mut app, KeyCode::Down);
    snapshot("permission_shell", &mut app);
    key(&mut app, KeyCode::Char('3'));
    typed(&mut app, "not the release build");
    let terminal = draw(&mut app, 80, 24);
    insta::assert_snapshot!("permission_reason_80x24", terminal.backend());
}

#[test]
fn sessions_picker() {
    let mut app = app();
    opened(&mut app);
    typed(&mut app, "/sessions");
    key(&mut app, KeyCode::Enter);
    let terminal = draw(&mut app, 80, 24);
    insta::assert_snapshot!("sessions_loading_80x24", terminal.backend());
    app.update(Msg::Conn(ConnEvent::Sessions(vec![
        info(
            "0f3c9a2e-1111-2222-3333-444455556666",
            "fix checkout",
            5_000,
            "running",
            53_300,
        ),
        info(
            "7b1d4c00-aaaa-bbbb-cccc-ddddeeeeffff",
            "Write the release notes for 2.4 and publish them to the docs site",
            3_600_000,
            "idle",
            1_200,
        ),
        info(
            "c2a9e811-0000-1111-2222-333344445555",
            "",
            90_000_000,
            "idle",
            0,
        ),
    ])));
    key(&mut app, KeyCode::Down);
    snapshot("sessions", &mut app);
}

#[test]
fn help_screen() {
    let mut app = app();
    typed(&mut app, "/help");
    key(&mut app, KeyCode::Enter);
    snapshot("help", &mut app);
}

#[test]
fn command_palette_and_file_completion() {
    let mut app = app();
    typed(&mut app, "/");
    let terminal = draw(&mut app, 80, 24);
    insta::assert_snapshot!("palette_80x24", terminal.backend());
    app.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('u'),
        KeyModifiers::CONTROL,
    )));
    app.update(Msg::Files(vec![
        "shop/".into(),
        "shop/cart.py".into(),
        "shop/checkout.py".into(),
        "tests/test_cart.py".into(),
    ]));
    typed(&mut app, "look at @car");
    let terminal = draw(&mut app, 80, 24);
    insta::assert_snapshot!("files_80x24", terminal.backend());
}

#[test]
fn reconnect_banner_and_disconnected_state() {
    let mut app = app();
    let mut journal = Journal::new();
    opened(&mut app);
    conversation(&mut app, &mut journal);
    typed(&mut app, "half-typed prompt");
    app.update(Msg::Conn(ConnEvent::Lost {
        reason: "connection reset by peer".into(),
    }));
    app.update(Msg::Conn(ConnEvent::Retrying {
        attempt: 3,
        remaining_secs: 24,
        error: "connection refused".into(),
    }));
    snapshot("reconnecting", &mut app);
    app.update(Msg::Conn(ConnEvent::GaveUp {
        reason: "connection refused".into(),
    }));
    let terminal = draw(&mut app, 80, 24);
    insta::assert_snapshot!("disconnected_80x24", terminal.backend());
}

#[test]
fn other_streams_and_unknown_kinds_are_dim_lines() {
    let mut app = app();
    let mut journal = Journal::new();
    live_turn(&mut app, &mut journal);
    let frames = journal.frames(
        "team/reviewer",
        vec![
            Event::MessageAssistant {
                run_id: "t1".into(),
                step: 1,
                text: "The patch looks right.\nOne nit.".into(),
                tool_calls: vec![],
            },
            Event::Unknown,
        ],
    );
    app.update(Msg::Conn(ConnEvent::Events(frames)));
    journal.apply(&mut app, vec![Event::Unknown]);
    let terminal = draw(&mut app, 80, 24);
    insta::assert_snapshot!("side_streams_80x24", terminal.backend());
}

#[test]
fn recalled_memory_names_its_source_ids() {
    let mut app = app();
    let mut journal = Journal::new();
    live_turn(&mut app, &mut journal);
    journal.apply(
        &mut app,
        vec![Event::MemoryRecalled {
            run_id: "r2".into(),
            source_ids: ["s1:4", "s1:9", "s2:1", "note:7"]
                .map(String::from)
                .to_vec(),
        }],
    );
    let terminal = draw(&mut app, 120, 30);
    let text: String = terminal
        .backend()
        .buffer()
        .content()
        .iter()
        .map(|c| c.symbol())
        .collect();
    assert!(
        text.contains("memory: 4 earlier item(s) recalled — s1:4, s1:9, s2:1, +1 more"),
        "{text}"
    );
}

#[test]
fn an_mcp_sign_in_shows_its_url_and_its_end() {
    let mut app = app();
    let mut journal = Journal::new();
    live_turn(&mut app, &mut journal);
    journal.apply(
        &mut app,
        vec![
            Event::McpSignInRequired {
                run_id: "r2".into(),
                server: "docs".into(),
                url: "http://127.0.0.1:9/authorize?state=s".into(),
            },
            Event::McpSignInEnded {
                run_id: "r2".into(),
                server: "docs".into(),
                outcome: lumina_client::protocol::SignInOutcome::TimedOut,
                detail: String::new(),
            },
        ],
    );
    let terminal = draw(&mut app, 120, 30);
    let text: String = terminal
        .backend()
        .buffer()
        .content()
        .iter()
        .map(|c| c.symbol())
        .collect();
    assert!(
        text.contains(
            "MCP server `docs` needs you to sign in: open http://127.0.0.1:9/authorize?state=s"
        ),
        "{text}"
    );
    assert!(
        text.contains("mcp docs: nobody signed in in time; going on without its tools"),
        "{text}"
    );
}

#[test]
fn multi_line_input_grows() {
    let mut app = app();
    typed(&mut app, "first line");
    app.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT)));
    typed(
        &mut app,
        "second line that is long enough to wrap around the eighty column terminal width",
    );
    let terminal = draw(&mut app, 80, 24);
    insta::assert_snapshot!("multiline_input_80x24", terminal.backend());
}

/// `cargo test -p lumina-tui --test all -- --ignored --nocapture bench` prints the same
/// figures as `lumina --bench-render`.
#[test]
#[ignore = "a benchmark, not a test: prints timings"]
fn bench_render_10k_events() {
    let report = lumina_tui::ui::bench::run(10_000, 250, 70);
    println!("{}", lumina_tui::ui::bench::format(&report));
    assert!(report.entries > 1000);
}
