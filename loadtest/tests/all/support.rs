//! Real parts for the load generator's tests: the `lumina-backend` binary (local profile or
//! cluster instances), the scripted model server, and — for the cluster — PostgreSQL and
//! Redis from the test kit.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use lumina_loadtest::{AuthOptions, Common, Config, Scenario, TargetOptions, SLOW_MARKER};
use lumina_testkit::{ScriptedModelServer, Turn};

/// `lumina-backend`: `$LUMINA_BACKEND_BIN`, else the binary next to this package's
/// `lumina-loadtest` in the same target directory, built on demand when missing (as the
/// TUI's tests do).
pub fn backend_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("LUMINA_BACKEND_BIN").filter(|v| !v.is_empty()) {
            return PathBuf::from(bin);
        }
        let bin =
            PathBuf::from(env!("CARGO_BIN_EXE_lumina-loadtest")).with_file_name("lumina-backend");
        if !bin.exists() {
            let status = Command::new(env!("CARGO"))
                .args(["build", "-p", "lumina-backend", "--bin", "lumina-backend"])
                .status()
                .unwrap();
            assert!(status.success(), "building lumina-backend failed");
        }
        bin
    })
    .clone()
}

/// A scripted model: `slow` turns (about a second each) for prompts with [`SLOW_MARKER`],
/// "ok" at once for everything else.
pub fn scripted_model(slow: usize) -> ScriptedModelServer {
    let turns = (0..slow)
        .map(|_| {
            Turn::text("This answer streams slowly so that the run is still going.")
                .with_chunk_delay_ms(50)
                .matching(SLOW_MARKER)
        })
        .collect();
    let model = ScriptedModelServer::start(turns).unwrap();
    model.set_default_turn(Turn::text("ok"));
    model
}

/// `lumina-backend serve` in a temporary AppRoot, answering from a scripted model.
pub struct LocalBackend {
    pub tmp: tempfile::TempDir,
    pub app_root: PathBuf,
    pub project: PathBuf,
    pub model: ScriptedModelServer,
    child: Child,
}

impl LocalBackend {
    pub async fn start(slow_turns: usize) -> LocalBackend {
        let tmp = tempfile::tempdir().unwrap();
        let app_root = tmp.path().join("app");
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let project = project.canonicalize().unwrap();
        let model = scripted_model(slow_turns);
        let log = std::fs::File::create(tmp.path().join("backend.log")).unwrap();
        let child = Command::new(backend_bin())
            .arg("serve")
            .arg("--app-root")
            .arg(&app_root)
            .current_dir(&project)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", tmp.path())
            .env("LUMINA_API_KEY", "loadtest-key")
            .env("LUMINA_API_BASE_URL", model.base_url())
            .env("LUMINA_API_MODEL", "scripted")
            .env("LUMINA_API_TYPE", "anthropic")
            .env("LUMINA_MODEL_MAX_RETRIES", "1")
            // No recall of other sessions' prompts (they carry the slow marker).
            .env("LUMINA_MEMORY_CONTEXT_TOKENS", "0")
            .env("LUMINA_MEMORY_EMBEDDINGS", "none")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let backend = LocalBackend {
            tmp,
            app_root,
            project,
            model,
            child,
        };
        backend.wait_for_endpoint().await;
        backend
    }

    async fn wait_for_endpoint(&self) {
        let file = self.app_root.join("state/run/backend.json");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let pid = std::fs::read_to_string(&file)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v.get("pid").and_then(|p| p.as_u64()));
            if pid == Some(u64::from(self.child.id())) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "backend did not start: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("backend.log")).unwrap_or_default()
    }

    /// A config targeting this backend through its endpoint file.
    pub fn config(&self, scenario: Scenario) -> Config {
        Config {
            target: TargetOptions {
                app_root: Some(self.app_root.clone()),
                auth: AuthOptions::auto(),
                ..TargetOptions::default()
            },
            common: Common {
                project_root: Some(self.project.display().to_string()),
                call_timeout_secs: 20.0,
                run_timeout_secs: 30.0,
                ..Common::default()
            },
            scenario,
            progress: false,
        }
    }
}

impl Drop for LocalBackend {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- backend log ----\n{}", self.log());
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Kills the process named in a pid file (instances the load generator restarted).
pub fn kill_pid_file(path: &Path) {
    if let Some(pid) = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
    {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
