//! The full-screen UI end to end: the real `lumina` binary in a tmux pane (120×40) against a
//! real local backend it starts itself and the scripted model server. Keys go in with
//! `send-keys`, the screen comes back with `capture-pane`. Skipped, with a notice, when
//! tmux is not installed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lumina_testkit::{ScriptedModelServer, Turn};
use serde_json::json;

use crate::support::{backend_bin, backend_pid, stop_backend};

/// `tmux` on the private server `socket`, in UTF-8 whatever the caller's locale (otherwise
/// tmux may show the UI's symbols as `_`).
fn tmux_command(socket: &str) -> Command {
    let mut command = Command::new("tmux");
    command.env("LC_ALL", "C.UTF-8").args(["-u", "-L", socket]);
    command
}

/// A private tmux server (its own socket) running one pane; killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn available() -> bool {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn start(command: &Path) -> Tmux {
        let socket = format!("lumina-e2e-{}", std::process::id());
        let shell = format!("{}; echo EXITED $?; sleep 60", command.display());
        let status = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                "120",
                "-y",
                "40",
            ])
            .arg(shell)
            .status()
            .unwrap();
        assert!(status.success());
        Tmux { socket }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = tmux_command(&self.socket).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p"])
    }

    /// Types literal text.
    fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-l", text]);
    }

    /// Presses keys by tmux name (`Enter`, `C-c`, `1`).
    fn press(&self, key: &str) {
        self.tmux(&["send-keys", key]);
    }

    /// Polls the screen until `ready` holds; fails with the last screen after `timeout`.
    async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; the screen:\n{screen}");
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = tmux_command(&self.socket).arg("kill-server").status();
    }
}

/// Stops the backend the UI started, whatever happens in the test.
struct BackendGuard(PathBuf);

impl Drop for BackendGuard {
    fn drop(&mut self) {
        stop_backend(&self.0);
    }
}

/// A script that runs `lumina` in `project` with a clean environment.
fn launcher(dir: &Path, project: &Path, app: &Path, model: &ScriptedModelServer) -> PathBuf {
    let script = dir.join("run-lumina.sh");
    let vars = [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", dir.display().to_string()),
        ("LUMINA_HOME", app.display().to_string()),
        ("LUMINA_BACKEND_BIN", backend_bin().display().to_string()),
        ("LUMINA_API_KEY", "tui-test-key".into()),
        ("LUMINA_API_BASE_URL", model.base_url()),
        ("LUMINA_API_MODEL", "scripted-model".into()),
        ("LUMINA_API_TYPE", "anthropic".into()),
    ];
    let assignments: Vec<String> = vars.iter().map(|(k, v)| format!("{k}='{v}'")).collect();
    let text = format!(
        "#!/bin/sh\ncd '{}' || exit 9\nexec env -i TERM=\"$TERM\" {} '{}'\n",
        project.display(),
        assignments.join(" "),
        env!("CARGO_BIN_EXE_lumina"),
    );
    std::fs::write(&script, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

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
    let _backend = BackendGuard(app.clone());
    let tmux = Tmux::start(&launcher(tmp.path(), &project, &app, &model));
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
