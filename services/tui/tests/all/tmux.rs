//! The full-screen UI end to end: the real `lumina` binary in a tmux pane (120×40) against a
//! real local backend it starts itself and the scripted model server. Keys go in with
//! `send-keys`, the screen comes back with `capture-pane`. Skipped, with a notice, when
//! tmux is not installed.

use std::process::Command;
use std::time::Duration;

use lumina_testkit::{ScriptedModelServer, Turn};
use serde_json::json;

use crate::support::{backend_bin, backend_pid, launcher, BackendGuard, Tmux};

const ANSWER: &str = "I will create the task list now. It gets two entries, one per line, and \
                      then I check that the file reads back as expected before I report.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_streams_the_answer_and_approves_a_write_in_the_dialog() {
    if !Tmux::available() {
        eprintln!("notice: skipping the tmux end-to-end test: tmux is not installed");
        return;
    }
    backend_bin();
    let model = ScriptedModelServer::start(vec![
        Turn::text(ANSWER).with_chunk_delay_ms(60).with_tool_call(
            "write_file",
            json!({"path": "notes/todo.md", "content": "- ship it\n- test it\n"}),
        ),
        Turn::text("Wrote **notes/todo.md** with 2 tasks."),
        Turn::text("Still here after the reconnect."),
    ])
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let app = tmp.path().join("app");
    std::fs::create_dir_all(&project).unwrap();
    let _backend = BackendGuard::new(tmp.path(), &app);
    let tmux = Tmux::start(&launcher(tmp.path(), &project, &app, &model), 120, 40);
    let long = Duration::from_secs(60);

    tmux.wait_for("the welcome screen", long, |s| s.contains("Type a prompt"))
        .await;
    tmux.type_text("write the todo file");
    tmux.press("Enter");

    // The answer streams in: a partial text with the streaming cursor, then all of it.
    let partial = tmux
        .wait_for("streamed text", long, |s| {
            s.contains("I will create") && s.contains('▍')
        })
        .await;
    assert!(!partial.contains("reads back as expected"), "{partial}");
    assert!(partial.contains("› write the todo file"), "{partial}");

    // The write needs approval: the dialog shows the exact diff.
    let dialog = tmux
        .wait_for("the permission dialog", long, |s| {
            s.contains("Permission needed")
        })
        .await;
    for expected in [
        "write_file notes/todo.md",
        "+++ b/notes/todo.md",
        "+- ship it",
        "1. Allow once",
    ] {
        assert!(dialog.contains(expected), "{expected} missing:\n{dialog}");
    }
    assert!(
        dialog.contains("before I report."),
        "the full answer is shown:\n{dialog}"
    );
    assert!(!project.join("notes/todo.md").exists());
    tmux.press("1");

    let done = tmux
        .wait_for("the final answer", long, |s| {
            s.contains("Wrote notes/todo.md with 2 tasks.")
        })
        .await;
    for expected in [
        "✓ write_file notes/todo.md",
        "allowed by you",
        "+- test it",
        "● connected",
    ] {
        assert!(done.contains(expected), "{expected} missing:\n{done}");
    }
    assert!(!done.contains("Permission needed"));
    assert_eq!(
        std::fs::read_to_string(project.join("notes/todo.md")).unwrap(),
        "- ship it\n- test it\n"
    );

    // A bracketed paste of a long log folds into a placeholder instead of flooding the input.
    let log: String = (1..=30).map(|i| format!("log line {i}\n")).collect();
    tmux.tmux(&["set-buffer", "--", &log]);
    tmux.tmux(&["paste-buffer", "-p"]);
    tmux.wait_for("the folded paste", long, |s| {
        s.contains("› [Pasted text #1 +30 lines]")
    })
    .await;
    tmux.press("C-u");

    // Reconnect: the backend dies; the UI starts a new one, resumes the session and keeps
    // the text being typed. Every event still shows exactly once.
    tmux.type_text("are you there?");
    let pid = backend_pid(&app).unwrap();
    Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    let back = tmux
        .wait_for("the reconnect", long, |s| s.contains("reconnected to"))
        .await;
    assert!(
        back.contains("› are you there?"),
        "the draft is kept:\n{back}"
    );
    assert_eq!(
        back.matches("Wrote notes/todo.md with 2 tasks.").count(),
        1,
        "{back}"
    );
    assert_eq!(back.matches("› write the todo file").count(), 1, "{back}");
    tmux.press("Enter");
    tmux.wait_for("an answer after the reconnect", long, |s| {
        s.contains("Still here after the reconnect.")
    })
    .await;

    // Ctrl-C twice quits and restores the terminal; the session id is printed.
    tmux.press("C-c");
    tmux.wait_for("the quit hint", long, |s| {
        s.contains("press Ctrl-C again to quit")
    })
    .await;
    tmux.press("C-c");
    let exit = tmux
        .wait_for("lumina to exit", long, |s| s.contains("EXITED"))
        .await;
    assert!(exit.contains("EXITED 0"), "{exit}");
    assert!(exit.contains("continue it with `lumina --resume"), "{exit}");
    assert_eq!(model.request_count(), 3);
}
