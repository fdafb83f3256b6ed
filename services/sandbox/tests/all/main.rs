//! Integration tests of lumina-sandbox: real commands (`bash -c`) spawned through a
//! prepared [`Sandbox`], against a temporary tree laid out like a host: two session
//! workspaces and an AppRoot with `config/` and `state/run/backend.json`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod confine;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use lumina_sandbox::{Policy, Sandbox};
use tempfile::TempDir;

/// `<tmp>/ws` (this session's workspace), `<tmp>/other-ws` (another session's, holding
/// `secret.txt`) and `<tmp>/approot` (with `config/settings.json` and
/// `state/run/backend.json`), all outside each other.
pub struct Host {
    _dir: TempDir,
    pub base: PathBuf,
    pub ws: PathBuf,
    pub other_ws: PathBuf,
    pub app_root: PathBuf,
}

pub const TOKEN: &str = "bearer-token-of-the-backend";

pub fn host() -> Host {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let ws = base.join("ws");
    let other_ws = base.join("other-ws");
    let app_root = base.join("approot");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&other_ws).unwrap();
    std::fs::create_dir_all(app_root.join("config")).unwrap();
    std::fs::create_dir_all(app_root.join("state/run")).unwrap();
    std::fs::write(other_ws.join("secret.txt"), "other session's secret").unwrap();
    std::fs::write(
        app_root.join("config/settings.json"),
        r#"{"api_key":"sk-x"}"#,
    )
    .unwrap();
    std::fs::write(
        app_root.join("state/run/backend.json"),
        format!(r#"{{"url":"ws://127.0.0.1:1","token":"{TOKEN}"}}"#),
    )
    .unwrap();
    std::fs::write(ws.join("mine.txt"), "my file").unwrap();
    Host {
        _dir: dir,
        base,
        ws,
        other_ws,
        app_root,
    }
}

impl Host {
    /// This workspace, the AppRoot protected, tight limits so the tests cannot hurt the
    /// machine.
    pub fn policy(&self) -> Policy {
        let mut policy = Policy::new(&self.ws);
        policy.protected = vec![self.app_root.clone()];
        policy.limits.processes = 64;
        policy.limits.cpu_seconds = 30;
        policy.limits.file_size_bytes = 1 << 20;
        policy
    }
}

/// What a command did.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub output: String,
    pub timed_out: bool,
}

impl Ran {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs `script` with `bash -c` in `cwd`, confined by `policy` (or not at all), killing
/// its process group after `timeout`.
pub async fn run(policy: Option<&Policy>, cwd: &Path, script: &str, timeout: Duration) -> Ran {
    use std::os::unix::process::ExitStatusExt;
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(format!("exec 2>&1; {script}"))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut sandbox = policy.map(|p| Sandbox::prepare(p).unwrap());
    if let Some(sandbox) = sandbox.as_mut() {
        sandbox.apply(&mut cmd);
    }
    let child = cmd.spawn().unwrap();
    let pid = child.id().unwrap();
    let waited = tokio::time::timeout(timeout, child.wait_with_output()).await;
    let timed_out = waited.is_err();
    if timed_out {
        kill_group(pid);
    }
    if let Some(sandbox) = sandbox {
        sandbox.finish();
    }
    match waited {
        Ok(out) => {
            let out = out.unwrap();
            Ran {
                code: out.status.code(),
                signal: out.status.signal(),
                output: String::from_utf8_lossy(&out.stdout).into_owned(),
                timed_out,
            }
        }
        Err(_) => Ran {
            code: None,
            signal: Some(9),
            output: String::new(),
            timed_out,
        },
    }
}

/// SIGKILL to the process group of a child spawned with `process_group(0)`.
#[allow(unsafe_code)]
fn kill_group(pgid: u32) {
    let pgid = libc::pid_t::try_from(pgid).unwrap();
    assert!(pgid > 1);
    // SAFETY: killpg takes two integers; the group's leader is our unreaped child.
    unsafe { libc::killpg(pgid, libc::SIGKILL) };
}

pub const SHORT: Duration = Duration::from_secs(20);
