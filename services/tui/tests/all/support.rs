//! Helpers shared by the end-to-end tests: the backend binary, and a private tmux server
//! driving the real `lumina` binary (keys in with `send-keys`, the screen back with
//! `capture-pane`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use lumina_testkit::ScriptedModelServer;

/// The backend binary next to `lumina`, built on demand when this test runs alone.
pub fn backend_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let lumina = PathBuf::from(env!("CARGO_BIN_EXE_lumina"));
        let bin = lumina.with_file_name("lumina-backend");
        if !bin.exists() {
            let status = std::process::Command::new(env!("CARGO"))
                .args(["build", "-p", "lumina-backend", "--bin", "lumina-backend"])
                .status()
                .unwrap();
            assert!(status.success());
        }
        bin
    })
    .clone()
}

/// Stops the backend recorded in `<app>/state/run/backend.json`, if any.
pub fn stop_backend(app: &Path) {
    if let Some(pid) = backend_pid(app) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
}

/// The pid in `<app>/state/run/backend.json`.
pub fn backend_pid(app: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(app.join("state/run/backend.json")).ok()?;
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()?
        .get("pid")?
        .as_u64()
}

/// `tmux` on the private server `socket`, in UTF-8 whatever the caller's locale (otherwise
/// tmux may show the UI's symbols as `_`).
fn tmux_command(socket: &str) -> Command {
    let mut command = Command::new("tmux");
    command.env("LC_ALL", "C.UTF-8").args(["-u", "-L", socket]);
    command
}

/// A private tmux server (its own socket, one per test) running one pane; killed on drop.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    pub fn available() -> bool {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Runs `command` in a detached `width`×`height` session.
    pub fn start(command: &Path, width: u16, height: u16) -> Tmux {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        // Tests run in parallel threads of one process: the pid alone is not unique.
        let socket = format!(
            "lumina-e2e-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let shell = format!("{}; echo EXITED $?; sleep 60", command.display());
        let status = tmux_command(&socket)
            .args(["-f", "/dev/null", "new-session", "-d", "-x"])
            .arg(width.to_string())
            .arg("-y")
            .arg(height.to_string())
            .arg(shell)
            .status()
            .unwrap();
        assert!(status.success());
        Tmux { socket }
    }

    pub fn tmux(&self, args: &[&str]) -> String {
        let out = tmux_command(&self.socket).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p"])
    }

    /// Types literal text.
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-l", text]);
    }

    /// Presses keys by tmux name (`Enter`, `C-c`, `1`).
    pub fn press(&self, key: &str) {
        self.tmux(&["send-keys", key]);
    }

    /// Resizes the window (and so the pane and the UI's terminal) to `width`×`height`.
    pub fn resize(&self, width: u16, height: u16) {
        let status = tmux_command(&self.socket)
            .args(["resize-window", "-x"])
            .arg(width.to_string())
            .arg("-y")
            .arg(height.to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Like [`Tmux::wait_for`], and the screen is also settled: two captures in a row are
    /// the same, so it is not caught halfway through a redraw.
    pub async fn wait_settled(
        &self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        loop {
            let screen = self.screen();
            if ready(&screen) && screen == last {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what} (settled); the screen:\n{screen}");
            }
            last = screen;
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    }

    /// Polls the screen until `ready` holds; fails with the last screen after `timeout`.
    pub async fn wait_for(
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

/// Stops, whatever happens in the test, the `lumina` a [`launcher`] in `dir` started and
/// then the backend in `app`. In that order: a `lumina` still alive (it dies of the hangup
/// when its tmux server goes, but not at once) would answer the backend's end by starting a
/// new one, which nobody would stop.
pub struct BackendGuard {
    dir: PathBuf,
    app: PathBuf,
}

impl BackendGuard {
    pub fn new(dir: &Path, app: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            app: app.to_path_buf(),
        }
    }
}

impl Drop for BackendGuard {
    fn drop(&mut self) {
        stop_lumina(&self.dir);
        stop_backend(&self.app);
    }
}

/// Where a [`launcher`] in `dir` records the pid of `lumina`.
fn lumina_pid_file(dir: &Path) -> PathBuf {
    dir.join("lumina.pid")
}

/// Ends the `lumina` a [`launcher`] in `dir` started and waits (up to 10 s) until it is gone.
fn stop_lumina(dir: &Path) {
    let Some(pid) = std::fs::read_to_string(lumina_pid_file(dir))
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
    else {
        return;
    };
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        // Gone, or a zombie waiting for its parent: either way it starts nothing more.
        let running = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let state = stat
                    .rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .next()?
                    .to_string();
                Some(state != "Z" && state != "X")
            })
            .unwrap_or(false);
        if !running {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A script that runs `lumina` in `project` with a clean environment.
pub fn launcher(dir: &Path, project: &Path, app: &Path, model: &ScriptedModelServer) -> PathBuf {
    launcher_with_backend(dir, project, app, model, &backend_bin())
}

/// [`launcher`], with `backend` as the backend executable `lumina` starts.
pub fn launcher_with_backend(
    dir: &Path,
    project: &Path,
    app: &Path,
    model: &ScriptedModelServer,
    backend: &Path,
) -> PathBuf {
    let script = dir.join("run-lumina.sh");
    let vars = [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", dir.display().to_string()),
        ("LUMINA_HOME", app.display().to_string()),
        ("LUMINA_BACKEND_BIN", backend.display().to_string()),
        ("LUMINA_API_KEY", "tui-test-key".into()),
        ("LUMINA_API_BASE_URL", model.base_url()),
        ("LUMINA_API_MODEL", "scripted-model".into()),
        ("LUMINA_API_TYPE", "anthropic".into()),
    ];
    let assignments: Vec<String> = vars.iter().map(|(k, v)| format!("{k}='{v}'")).collect();
    // `exec` keeps the pid recorded for [`BackendGuard`].
    let text = format!(
        "#!/bin/sh\ncd '{}' || exit 9\necho $$ > '{}'\nexec env -i TERM=\"$TERM\" {} '{}'\n",
        project.display(),
        lumina_pid_file(dir).display(),
        assignments.join(" "),
        env!("CARGO_BIN_EXE_lumina"),
    );
    write_script(&script, &text);
    script
}

/// A backend executable in `dir` that starts the real one, after a pause of `pause_secs`
/// while the file `marker` exists (so a test can keep a restart, and the UI's reconnect
/// banner, on screen long enough to see). `exec` keeps the pid the backend records.
pub fn slow_starting_backend(dir: &Path, marker: &Path, pause_secs: u32) -> PathBuf {
    let script = dir.join("slow-lumina-backend.sh");
    let text = format!(
        "#!/bin/sh\nif [ -e '{}' ]; then sleep {pause_secs}; fi\nexec '{}' \"$@\"\n",
        marker.display(),
        backend_bin().display(),
    );
    write_script(&script, &text);
    script
}

fn write_script(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
