//! `lumina --bench-render`: frame render times over a long synthetic session (10,000 events
//! by default) and the memory it takes. Not a test — timings never gate anything — but the
//! numbers show whether the per-entry cache keeps frames cheap.

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use lumina_client::protocol::{DeltaFrame, Event, EventFrame, TodoItem, Usage};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::json;

use super::app::{App, AppOptions, ConnEvent, Msg};
use super::render;

/// Frame times of one scenario, in microseconds.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub frames: usize,
    pub p50_us: u128,
    pub p99_us: u128,
    pub max_us: u128,
}

impl Stats {
    fn from(mut samples: Vec<u128>) -> Self {
        samples.sort_unstable();
        let at = |q: f64| {
            let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
            samples.get(index).copied().unwrap_or(0)
        };
        Self {
            frames: samples.len(),
            p50_us: at(0.50),
            p99_us: at(0.99),
            max_us: samples.last().copied().unwrap_or(0),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub events: usize,
    pub entries: usize,
    pub width: u16,
    pub height: u16,
    pub apply_ms: u128,
    pub first_frame_us: u128,
    pub follow: Stats,
    pub streaming: Stats,
    pub page_up: Stats,
    pub page_down_from_top: Stats,
    pub rss_before_kb: Option<u64>,
    pub rss_after_kb: Option<u64>,
}

/// Resident memory of this process, from `/proc/self/status` (Linux).
pub fn rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

fn frame(seq: u64, event: Event) -> EventFrame {
    EventFrame {
        session_id: "bench".into(),
        seq,
        stream: "main".into(),
        stream_seq: seq,
        ts_ms: 1_700_000_000_000 + i64::try_from(seq).unwrap_or(0),
        event,
    }
}

const ANSWER: &str = "## Plan\n\nI looked at **the build** and found *two* problems in `src/lib.rs`:\n\n\
1. the `parse` function ignores errors\n2. a test expects the old output\n\n\
- first, fix the parser\n  - keep the API\n- then update the test\n\n\
```rust\nfn parse(input: &str) -> Result<Config, Error> {\n    let value = serde_json::from_str(input)?; // 42\n    Ok(Config::from(value))\n}\n```\n\n\
> Note: the rest of the crate already handles the error.\n\nDone — see the [docs](https://example.com/docs) for details.";

/// `count` events of a plausible agent session: prompts, markdown answers, shell calls,
/// edits with diffs and task updates.
pub fn synthetic_events(count: usize) -> Vec<EventFrame> {
    let mut out = Vec::with_capacity(count);
    let mut seq = 0u64;
    let mut turn = 0u64;
    while out.len() < count {
        turn += 1;
        let run = format!("run-{turn}");
        let mut push = |event: Event| {
            seq += 1;
            out.push(frame(seq, event));
        };
        push(Event::RunStarted {
            run_id: run.clone(),
            idempotency_key: format!("k{turn}"),
            model: "claude-bench".into(),
        });
        push(Event::MessageUser {
            run_id: run.clone(),
            text: format!(
                "Turn {turn}: please fix the failing build and explain what you changed."
            ),
            skill: None,
        });
        push(Event::MessageAssistant {
            run_id: run.clone(),
            step: 1,
            text: ANSWER.into(),
            tool_calls: Vec::new(),
        });
        let call = format!("call-{turn}");
        push(Event::ToolStarted {
            run_id: run.clone(),
            step: 1,
            call_id: call.clone(),
            tool: "shell".into(),
            arguments: json!({"command": "cargo test --workspace"}),
        });
        push(Event::ToolCompleted {
            run_id: run.clone(),
            call_id: call,
            tool: "shell".into(),
            is_error: false,
            output: (0..30).map(|i| format!("test case_{i} ... ok\n")).collect(),
            metadata: json!({"exit_code": 0}),
        });
        let edit = format!("edit-{turn}");
        push(Event::ToolStarted {
            run_id: run.clone(),
            step: 2,
            call_id: edit.clone(),
            tool: "edit_file".into(),
            arguments: json!({"path": "src/lib.rs", "old_string": "a", "new_string": "b"}),
        });
        push(Event::ToolCompleted {
            run_id: run.clone(),
            call_id: edit,
            tool: "edit_file".into(),
            is_error: false,
            output: "updated src/lib.rs".into(),
            metadata: json!({"diff": "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,4 +1,4 @@\n fn parse() {\n-    old();\n+    new();\n }\n"}),
        });
        push(Event::TaskUpdated {
            todos: vec![
                TodoItem {
                    content: "fix the parser".into(),
                    status: "completed".into(),
                    id: None,
                },
                TodoItem {
                    content: "update the test".into(),
                    status: "in_progress".into(),
                    id: None,
                },
            ],
        });
        push(Event::UsageRecorded {
            run_id: run.clone(),
            step: 2,
            usage: Usage {
                input_tokens: 1200,
                output_tokens: 300,
                ..Usage::default()
            },
            context_tokens: 40_000,
            max_tokens: 200_000,
        });
        push(Event::RunCompleted {
            run_id: run,
            result: "done".into(),
            usage: Usage::default(),
        });
    }
    out.truncate(count);
    out
}

fn timed_draw(terminal: &mut Terminal<TestBackend>, app: &mut App) -> u128 {
    let start = Instant::now();
    let _ = terminal.draw(|f| render::draw(app, f));
    start.elapsed().as_micros()
}

fn key(code: KeyCode, modifiers: KeyModifiers) -> Msg {
    Msg::Key(KeyEvent::new(code, modifiers))
}

/// Builds the session, then measures frames in four scenarios.
pub fn run(events: usize, width: u16, height: u16) -> Report {
    let rss_before_kb = rss_kb();
    let mut app = App::new(AppOptions {
        project: "bench".into(),
        ..AppOptions::default()
    });
    let frames = synthetic_events(events);
    let start = Instant::now();
    app.update(Msg::Conn(ConnEvent::Events(frames)));
    let apply_ms = start.elapsed().as_millis();
    let mut terminal = match Terminal::new(TestBackend::new(width, height)) {
        Ok(terminal) => terminal,
        Err(never) => match never {},
    };
    let first_frame_us = timed_draw(&mut terminal, &mut app);
    let follow = Stats::from(
        (0..200)
            .map(|_| timed_draw(&mut terminal, &mut app))
            .collect(),
    );

    // A long answer streaming in, one delta per frame.
    app.update(Msg::Conn(ConnEvent::Events(vec![frame(
        u64::try_from(events).unwrap_or(0) + 1,
        Event::RunStarted {
            run_id: "live".into(),
            idempotency_key: "live".into(),
            model: "claude-bench".into(),
        },
    )])));
    let streaming = Stats::from(
        (0..300)
            .map(|i| {
                let text = if i % 40 == 39 {
                    "\n\n".to_string()
                } else {
                    format!("word{i} **bold** ")
                };
                app.update(Msg::Conn(ConnEvent::Delta(DeltaFrame {
                    session_id: "bench".into(),
                    run_id: "live".into(),
                    step: 1,
                    channel: "text".into(),
                    text,
                })));
                timed_draw(&mut terminal, &mut app)
            })
            .collect(),
    );
    let page_up = Stats::from(
        (0..300)
            .map(|_| {
                app.update(key(KeyCode::PageUp, KeyModifiers::NONE));
                timed_draw(&mut terminal, &mut app)
            })
            .collect(),
    );
    app.update(key(KeyCode::Home, KeyModifiers::CONTROL));
    let page_down_from_top = Stats::from(
        (0..300)
            .map(|_| {
                app.update(key(KeyCode::PageDown, KeyModifiers::NONE));
                timed_draw(&mut terminal, &mut app)
            })
            .collect(),
    );
    Report {
        events,
        entries: app.transcript.len(),
        width,
        height,
        apply_ms,
        first_frame_us,
        follow,
        streaming,
        page_up,
        page_down_from_top,
        rss_before_kb,
        rss_after_kb: rss_kb(),
    }
}

/// The report as printed by `--bench-render`.
pub fn format(report: &Report) -> String {
    let stats = |name: &str, s: &Stats| {
        format!(
            "  {name:<22} frames {:>4}  p50 {:>7.3} ms  p99 {:>7.3} ms  max {:>7.3} ms\n",
            s.frames,
            s.p50_us as f64 / 1000.0,
            s.p99_us as f64 / 1000.0,
            s.max_us as f64 / 1000.0
        )
    };
    let kb = |v: Option<u64>| {
        v.map_or("n/a".to_string(), |kb| {
            format!("{:.1} MiB", kb as f64 / 1024.0)
        })
    };
    let mut out = format!(
        "render benchmark: {} events → {} transcript entries, {}x{} cells\n",
        report.events, report.entries, report.width, report.height
    );
    out.push_str(&format!(
        "  reduce all events       {} ms\n",
        report.apply_ms
    ));
    out.push_str(&format!(
        "  first frame             {:.3} ms\n",
        report.first_frame_us as f64 / 1000.0
    ));
    out.push_str(&stats("idle (follow)", &report.follow));
    out.push_str(&stats("streaming deltas", &report.streaming));
    out.push_str(&stats("PageUp", &report.page_up));
    out.push_str(&stats("PageDown from the top", &report.page_down_from_top));
    out.push_str(&format!(
        "  memory (RSS)            {} before, {} after\n",
        kb(report.rss_before_kb),
        kb(report.rss_after_kb)
    ));
    out
}
