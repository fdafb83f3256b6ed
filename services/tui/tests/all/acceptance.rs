//! Acceptance checks of the full-screen UI (issue 4) that the tmux walk-through in `tmux.rs`
//! does not cover: the backend dying mid-stream, resizing mid-stream, and resuming an
//! earlier session from `/sessions`. Each runs the real `lumina` binary in its own tmux
//! server against a real local backend and the scripted model server, and waits only by
//! polling the screen (the one pause is in the fixture: a slowed backend restart, so the
//! reconnect banner stays up long enough to be seen). Skipped, with a notice, when tmux is
//! not installed.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use lumina_testkit::{ScriptedModelServer, Turn};

use crate::support::{
    backend_bin, backend_pid, launcher_with_backend, slow_starting_backend, BackendGuard, Tmux,
};

/// Generous: the machine running these may be small and busy.
const LONG: Duration = Duration::from_secs(45);

/// How long a backend (re)start pauses once [`Ui::slow_down_backend_starts`] was called.
const SLOW_START_SECS: u32 = 2;

/// One UI under test, with everything that must outlive it.
struct Ui {
    tmux: Tmux,
    app: PathBuf,
    slow_marker: PathBuf,
    // Dropped after `tmux` (fields drop in order): stops `lumina`, then its backend.
    _backend: BackendGuard,
    _tmp: tempfile::TempDir,
}

/// Starts `lumina` in a `width`×`height` tmux window and waits for the welcome screen.
/// `None` (after a notice) when tmux is not installed.
async fn start_ui(model: &ScriptedModelServer, width: u16, height: u16) -> Option<Ui> {
    if !Tmux::available() {
        eprintln!("notice: skipping the tmux acceptance test: tmux is not installed");
        return None;
    }
    backend_bin();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let app = tmp.path().join("app");
    std::fs::create_dir_all(&project).unwrap();
    let backend = BackendGuard::new(tmp.path(), &app);
    let slow_marker = tmp.path().join("slow-start");
    let backend_bin = slow_starting_backend(tmp.path(), &slow_marker, SLOW_START_SECS);
    let launcher = launcher_with_backend(tmp.path(), &project, &app, model, &backend_bin);
    let tmux = Tmux::start(&launcher, width, height);
    tmux.wait_for("the welcome screen", LONG, |s| s.contains("Type a prompt"))
        .await;
    Some(Ui {
        tmux,
        app,
        slow_marker,
        _backend: backend,
        _tmp: tmp,
    })
}

impl Ui {
    /// From now on a backend start takes [`SLOW_START_SECS`] longer.
    fn slow_down_backend_starts(&self) {
        std::fs::write(&self.slow_marker, "").unwrap();
    }
}

/// The assistant messages on screen, each as one line of text: a block starts with `● `
/// in the first column and goes on with the lines indented by two spaces; wrapped lines
/// are joined with one space and the streaming cursor is dropped.
fn assistant_blocks(screen: &str) -> Vec<String> {
    let mut blocks: Vec<String> = Vec::new();
    let mut open = false;
    for line in screen.lines() {
        if let Some(rest) = line.strip_prefix("● ") {
            blocks.push(rest.trim().to_string());
            open = true;
        } else if open && line.starts_with("  ") && !line.trim().is_empty() {
            let block = blocks.last_mut().unwrap();
            block.push(' ');
            block.push_str(line.trim());
        } else {
            open = false;
        }
    }
    blocks
        .into_iter()
        .map(|b| b.trim_end_matches('▍').trim_end().to_string())
        .collect()
}

/// The last three rows of the screen — the input's top rule, the input line and the status
/// line — when they are exactly that, each on a row of its own, and the screen is `height`
/// rows of at most `width` columns (the UI drew for the current size).
fn bottom_rows(screen: &str, width: usize, height: usize) -> Option<(&str, &str, &str)> {
    let lines: Vec<&str> = screen.lines().collect();
    if lines.len() != height || lines.iter().any(|l| l.chars().count() > width) {
        return None;
    }
    let [rule, input, status] = lines[height - 3..] else {
        return None;
    };
    let rule_ok =
        rule.starts_with('─') && rule.contains("Enter send") && rule.chars().count() == width;
    let input_ok = input.starts_with('›');
    let status_ok = status.contains(" tokens") && !status.contains('›') && !status.contains('─');
    (rule_ok && input_ok && status_ok).then_some((rule, input, status))
}

/// [`bottom_rows`], failing with the screen when the layout is not right.
fn bottom(screen: &str, width: usize, height: usize) -> (&str, &str, &str) {
    bottom_rows(screen, width, height).unwrap_or_else(|| {
        panic!(
            "expected {width}×{height} ending in the input's rule, the input line and the \
             status line, each on a row of its own:\n{screen}"
        )
    })
}

const STORY: &str = "Once upon a midnight build the compiler began to sing. It sang of borrowed \
                     references that never dangled, of lifetimes that stretched exactly as far \
                     as they had to and not one scope further, of traits that fitted together \
                     like the teeth of a well oiled gear. The linker hummed along in a lower \
                     voice, and somewhere far below the kernel kept time. By dawn every test \
                     was green and the story reached its quiet and final ending.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_backend_mid_stream_reconnects_and_keeps_the_draft() {
    let model = ScriptedModelServer::start(vec![
        Turn::text(STORY).with_chunk_delay_ms(150),
        Turn::text("Answering the kept draft after the crash."),
    ])
    .unwrap();
    let Some(ui) = start_ui(&model, 120, 40).await else {
        return;
    };
    let tmux = &ui.tmux;

    tmux.type_text("tell me the long story");
    tmux.press("Enter");
    let streaming = tmux
        .wait_for("the answer to stream", LONG, |s| {
            s.contains("Once upon a midnight build") && s.contains('▍')
        })
        .await;
    assert!(!streaming.contains("final ending"), "{streaming}");

    // A draft is being typed while the answer streams.
    tmux.type_text("keep this draft");
    tmux.wait_for("the draft in the input, still streaming", LONG, |s| {
        s.contains("› keep this draft") && s.contains('▍')
    })
    .await;

    // The restart takes a moment (as it may on a busy machine), so the banner is sure to be
    // on screen long enough to be seen.
    ui.slow_down_backend_starts();
    let pid = backend_pid(&ui.app).unwrap();
    let killed_at = Instant::now();
    Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();

    // The banner shows while the UI restarts the backend…
    tmux.wait_for("the reconnect banner", LONG, |s| {
        s.lines()
            .next()
            .is_some_and(|l| l.contains("connection lost"))
            && s.contains("◌ reconnecting")
            && s.contains("› keep this draft")
    })
    .await;
    // Typing goes on during the outage.
    tmux.type_text(" and this");
    // …and clears once it is back, within the 30 s reconnect window.
    tmux.wait_for("the reconnect", Duration::from_secs(30), |s| {
        s.contains("reconnected to") && !s.contains("connection lost") && s.contains("● connected")
    })
    .await;
    assert!(killed_at.elapsed() < Duration::from_secs(30));
    assert_ne!(backend_pid(&ui.app), Some(pid), "a new backend runs");

    // The new backend closes the run the crash cut short; the UI shows it as interrupted
    // and stops streaming.
    let done = tmux
        .wait_settled("the interrupted run", LONG, |s| {
            s.contains("⚠ interrupted: the backend stopped before it ended")
                && s.contains("› keep this draft and this")
                && s.contains("reconnected to")
                && s.contains("● connected")
        })
        .await;
    assert!(!done.contains('▍'), "the streaming cursor is gone:\n{done}");
    assert!(!done.contains("esc to interrupt"), "no turn runs:\n{done}");
    assert!(!done.contains("final ending"), "{done}");
    for (line, what) in [
        ("› tell me the long story", "the prompt"),
        ("Once upon a midnight build", "the streamed answer"),
        ("interrupted: the backend stopped", "the interruption"),
        ("reconnected to", "the reconnect notice"),
    ] {
        assert_eq!(done.matches(line).count(), 1, "{what} shows once:\n{done}");
    }
    let (_, input, status) = bottom(&done, 120, 40);
    assert_eq!(
        input, "› keep this draft and this",
        "the draft is kept:\n{done}"
    );
    assert!(status.contains("● connected"), "{done}");

    // The kept draft goes out as the next prompt on the new backend.
    tmux.press("Enter");
    let after = tmux
        .wait_settled("the answer after the crash", LONG, |s| {
            s.contains("Answering the kept draft after the crash.")
                && !s.contains("esc to interrupt")
        })
        .await;
    assert_eq!(
        after.matches("› keep this draft and this").count(),
        1,
        "{after}"
    );
    assert_eq!(after.matches("› tell me the long story").count(), 1);
    assert_eq!(model.request_count(), 2);
}

/// An answer that scrolls at 80×24 but fits 250×70: numbered sentences, so a lost or
/// repeated piece shows.
fn report() -> String {
    let sentences: Vec<String> = (1..=45)
        .map(|i| format!("Sentence {i} of the resize report adds one more plain fact."))
        .collect();
    format!("{} This is the end of the report.", sentences.join(" "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resizing_mid_stream_rewraps_the_answer_once_with_input_and_status_visible() {
    let report = report();
    // About 680 deltas of 4 characters: some 14 s of streaming, of which about half is
    // needed to fill an 80×24 screen.
    let model =
        ScriptedModelServer::start(vec![Turn::text(report.clone()).with_chunk_delay_ms(20)])
            .unwrap();
    let Some(ui) = start_ui(&model, 250, 70).await else {
        return;
    };
    let tmux = &ui.tmux;

    tmux.type_text("write the resize report");
    tmux.press("Enter");
    tmux.wait_for("the answer to stream", LONG, |s| {
        s.contains("Sentence 1 of the resize report") && s.contains('▍')
    })
    .await;

    tmux.resize(80, 24);
    tmux.wait_for("the UI at 80×24", LONG, |s| {
        bottom_rows(s, 80, 24).is_some()
    })
    .await;
    // Still streaming at the small size, the answer outgrows the screen and the view
    // follows it: the prompt scrolls off, the streaming cursor stays on the transcript's
    // last row, and what shows is one contiguous piece of the answer.
    tmux.wait_for("the answer to scroll along at 80×24", LONG, |s| {
        bottom_rows(s, 80, 24).is_some()
            && !s.contains("› write the resize report")
            && follows(s, &report)
    })
    .await;

    tmux.resize(250, 70);
    let done = tmux
        .wait_settled("the whole answer at 250×70", LONG, |s| {
            bottom_rows(s, 250, 70).is_some()
                && s.contains("end of the report.")
                && !s.contains('▍')
                && !s.contains("esc to interrupt")
        })
        .await;
    assert_eq!(
        assistant_blocks(&done),
        vec![report],
        "the full answer, exactly once:\n{done}"
    );
    assert_eq!(done.matches("› write the resize report").count(), 1);
    let (_, input, status) = bottom(&done, 250, 70);
    assert_eq!(input, "›", "{done}");
    assert!(status.contains("● connected"), "{done}");
}

/// Whether `screen` shows the streaming `answer` followed: the row with the streaming
/// cursor is the transcript's last (then the entry's blank separator and the activity
/// line), and the rows down to it are one contiguous piece of the answer.
fn follows(screen: &str, answer: &str) -> bool {
    let rows: Vec<&str> = screen.lines().collect();
    let Some(cursor) = rows.iter().position(|l| l.contains('▍')) else {
        return false;
    };
    let last_row = rows.get(cursor + 1).is_some_and(|r| r.is_empty())
        && rows
            .get(cursor + 2)
            .is_some_and(|r| r.contains("esc to interrupt"));
    let visible: Vec<&str> = rows[..=cursor]
        .iter()
        .map(|l| l.trim_end_matches('▍').trim())
        .map(|l| l.strip_prefix("● ").unwrap_or(l))
        .filter(|l| !l.is_empty())
        .collect();
    last_row && answer.contains(&visible.join(" "))
}

/// The 8-character id prefix the sessions picker shows in `row`.
fn picker_id(row: &str) -> String {
    let tokens: Vec<&str> = row
        .trim_matches(|c: char| c == '│' || c.is_whitespace())
        .split_whitespace()
        .filter(|t| *t != "●")
        .collect();
    tokens[0].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_picker_resumes_an_earlier_session_with_its_history() {
    let model = ScriptedModelServer::start(vec![
        Turn::text("Alpha answer: the alpha report is ready."),
        Turn::text("Beta answer: the beta report is ready."),
        Turn::text("Alpha again: continuing where we left off."),
    ])
    .unwrap();
    let Some(ui) = start_ui(&model, 120, 40).await else {
        return;
    };
    let tmux = &ui.tmux;
    let idle = |s: &str| !s.contains("esc to interrupt");

    tmux.type_text("write the alpha report");
    tmux.press("Enter");
    tmux.wait_for("the alpha answer", LONG, |s| {
        s.contains("Alpha answer: the alpha report is ready.") && idle(s)
    })
    .await;

    tmux.type_text("/new");
    tmux.press("Enter");
    let fresh = tmux
        .wait_settled("a new session", LONG, |s| {
            s.contains("new session: it is created with your first prompt")
        })
        .await;
    assert!(!fresh.contains("alpha"), "{fresh}");

    tmux.type_text("write the beta report");
    tmux.press("Enter");
    tmux.wait_for("the beta answer", LONG, |s| {
        s.contains("Beta answer: the beta report is ready.") && idle(s)
    })
    .await;

    tmux.type_text("/sessions");
    tmux.press("Enter");
    let picker = tmux
        .wait_settled("both sessions in the picker", LONG, |s| {
            s.contains("┌ Sessions")
                && s.contains("write the alpha report")
                && s.contains("write the beta report")
        })
        .await;
    let lines: Vec<&str> = picker.lines().collect();
    let first_item = lines.iter().position(|l| l.contains("┌ Sessions")).unwrap() + 1;
    // The picker's rows (the transcript behind it shows the prompts too).
    let row = |title: &str| {
        (first_item..lines.len())
            .find(|&i| lines[i].contains('│') && lines[i].contains(title))
            .unwrap_or_else(|| panic!("no picker row for {title}:\n{picker}"))
    };
    let (alpha, beta) = (row("write the alpha report"), row("write the beta report"));
    assert!(
        lines[beta].contains('●') && !lines[alpha].contains('●'),
        "the open session is marked:\n{picker}"
    );
    let alpha_id = picker_id(lines[alpha]);
    // The selection starts at the first row; walk down to the alpha session.
    for _ in first_item..alpha {
        tmux.press("Down");
    }
    tmux.press("Enter");

    let resumed = tmux
        .wait_settled("the alpha session", LONG, |s| {
            !s.contains("┌ Sessions") && s.contains("Alpha answer: the alpha report is ready.")
        })
        .await;
    for expected in [
        "› write the alpha report",
        "Alpha answer: the alpha report is ready.",
    ] {
        assert_eq!(
            resumed.matches(expected).count(),
            1,
            "{expected} once:\n{resumed}"
        );
    }
    for absent in ["write the beta report", "Beta answer"] {
        assert!(!resumed.contains(absent), "{absent} shown:\n{resumed}");
    }
    let (_, input, status) = bottom(&resumed, 120, 40);
    assert_eq!(input, "›");
    assert!(status.contains(&alpha_id), "{alpha_id} is open:\n{resumed}");

    // The resumed session really continues on the backend: the model sees its history.
    tmux.type_text("continue the alpha report");
    tmux.press("Enter");
    tmux.wait_for("the answer in the resumed session", LONG, |s| {
        s.contains("Alpha again: continuing where we left off.") && idle(s)
    })
    .await;
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let body = requests[2].body.to_string();
    assert!(body.contains("write the alpha report"), "{body}");
    assert!(
        body.contains("Alpha answer: the alpha report is ready."),
        "{body}"
    );
    // The beta session is not in the history (the Memory Fabric may recall it into the
    // system prompt as earlier evidence).
    let messages = requests[2].body["messages"].to_string();
    assert!(!messages.contains("beta report"), "{body}");
}
