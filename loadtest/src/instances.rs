//! The instances file `scripts/local-cluster` writes (`$work/instances.json`) and what the
//! `failover` scenario does with it: find an instance's current pid, `kill -9` it (only a
//! live `lumina-backend` process), restart it with its recorded command line and environment,
//! and wait for its `/readyz`.
//!
//! ```json
//! {"version": 1, "cluster_id": "local-dev",
//!  "auth": {"signing_key_dir": "/var/tmp/lumina-cluster-x/home/config/cluster", "tenant": "local"},
//!  "instances": [{"id": "i1", "ws_url": "ws://127.0.0.1:18081/v1/ws",
//!    "http_url": "http://127.0.0.1:18081", "pid": 4242, "pid_file": "i1.pid",
//!    "restart": {"argv": ["/path/lumina-backend", "cluster", "serve"],
//!                "env_file": "i1.env", "cwd": "/path", "log": "i1.log"}}]}
//! ```
//!
//! `scripts/local-cluster --chaos` adds `"services"` (the control socket of
//! `lumina-chaos-services` and the PostgreSQL URL the invariant checks read), and per
//! instance `"netns"` (the network namespace and veth pair it runs behind) or `"faketime"`
//! (the libfaketime offset file it reads), for the `chaos` scenario.
//!
//! Relative paths are relative to the file's directory. `pid_file`, when present, holds the
//! current pid (the loadtest rewrites it after a restart, so the script's clean-up stops the
//! new process). `env_file` has `KEY=VALUE` lines and is the restarted process's whole
//! environment (without one, the process inherits the load generator's).

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::error::{Error, HarnessError, Result};

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instances {
    #[serde(default = "one")]
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Where to mint tokens from when no other credentials are given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<InstancesAuth>,
    /// PostgreSQL and Redis, when they can be controlled (`local-cluster --chaos`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<Services>,
    pub instances: Vec<Instance>,
}

/// The cluster's PostgreSQL and Redis as `lumina-chaos-services` runs them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Services {
    /// Its control socket (`redis stop|start`, `postgres stop|kill|start`).
    pub control: PathBuf,
    /// The journal's database on loopback (trust auth, no password).
    pub postgres_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_port: Option<u16>,
}

/// The network namespace an instance runs in, reached through a veth pair whose two ends
/// have addresses in one private /30 that exists only inside this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Netns {
    pub name: String,
    /// The veth end in the host namespace, and its address (PostgreSQL and Redis listen there).
    pub host_if: String,
    pub host_addr: std::net::Ipv4Addr,
    /// The veth end inside the namespace, and the instance's address.
    pub ns_if: String,
    pub ns_addr: std::net::Ipv4Addr,
}

/// An instance running under libfaketime, its wall-clock offset read from `file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Faketime {
    /// Holds the offset (`+0`, `+5s`, `-5s`); libfaketime re-reads it about every second.
    pub file: PathBuf,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstancesAuth {
    /// A `cluster init-local` directory (`signing-key.pem`, `cluster.json`).
    pub signing_key_dir: PathBuf,
    #[serde(default = "local_tenant")]
    pub tenant: String,
}

fn local_tenant() -> String {
    "local".into()
}

/// One instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    /// `LUMINA_INSTANCE_ID`, as `session.info` reports it in `owner`.
    pub id: String,
    pub ws_url: String,
    /// The probe base URL (`/readyz`).
    pub http_url: String,
    /// The pid at start (see `pid_file` for the current one).
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<Restart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<Netns>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faketime: Option<Faketime>,
}

/// How to start the instance again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Restart {
    pub argv: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Output is appended here (else discarded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<PathBuf>,
}

impl Instances {
    /// Reads and checks the file; relative paths become absolute.
    pub fn load(path: &Path) -> Result<Instances> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::unreadable("the instances file", path, &e))?;
        let mut file: Instances = serde_json::from_str(&text).map_err(|e| {
            Error::Input(format!("{} is not an instances file: {e}", path.display()))
        })?;
        if file.version != 1 {
            return Err(Error::Input(format!(
                "{}: unsupported instances file version {}",
                path.display(),
                file.version
            )));
        }
        if file.instances.is_empty() {
            return Err(Error::Input(format!(
                "{} lists no instances",
                path.display()
            )));
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let absolute = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        if let Some(auth) = &mut file.auth {
            absolute(&mut auth.signing_key_dir);
        }
        if let Some(services) = &mut file.services {
            absolute(&mut services.control);
        }
        for instance in &mut file.instances {
            if let Some(p) = &mut instance.pid_file {
                absolute(p);
            }
            if let Some(f) = &mut instance.faketime {
                absolute(&mut f.file);
            }
            if let Some(restart) = &mut instance.restart {
                for p in [&mut restart.env_file, &mut restart.cwd, &mut restart.log]
                    .into_iter()
                    .flatten()
                {
                    absolute(p);
                }
            }
        }
        Ok(file)
    }

    /// The index of the instance with this id.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.instances.iter().position(|i| i.id == id)
    }
}

impl Instance {
    /// The current pid: the pid file's content when readable, else `pid`.
    pub fn current_pid(&self) -> u32 {
        self.pid_file
            .as_deref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(self.pid)
    }
}

/// Whether `pid` is a live (not zombie) process whose command line names `lumina-backend`.
pub fn is_live_backend(pid: u32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let named = String::from_utf8_lossy(&cmdline).contains("lumina-backend");
    named && !is_zombie_or_gone(pid)
}

fn is_zombie_or_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
            .unwrap_or(true),
        Err(_) => true,
    }
}

/// Sends `signal` (`KILL`, `STOP`, `CONT`, …) to a live `lumina-backend` process.
pub fn signal_backend(pid: u32, signal: &str) -> Result<(), HarnessError> {
    if !is_live_backend(pid) {
        return Err(HarnessError::Unavailable(format!(
            "pid {pid} is not a running lumina-backend"
        )));
    }
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|source| HarnessError::Spawn {
            program: "kill".into(),
            source,
        })?;
    if !status.success() {
        return Err(HarnessError::Failed {
            command: format!("kill -{signal} {pid}"),
            detail: status.to_string(),
        });
    }
    Ok(())
}

/// Sends SIGKILL to a live `lumina-backend` process and waits (up to 10 s) until it is gone.
/// `child` is the handle when this process started it (it is reaped then).
pub fn kill9(pid: u32, child: Option<&mut Child>) -> Result<(), HarnessError> {
    signal_backend(pid, "KILL")?;
    if let Some(child) = child {
        let _ = child.wait();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !is_zombie_or_gone(pid) {
        if Instant::now() > deadline {
            return Err(HarnessError::Unavailable(format!(
                "pid {pid} still runs 10 s after SIGKILL"
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Reads an env file: `KEY=VALUE` per line; blank lines and `#` comments are skipped.
pub fn read_env_file(path: &Path) -> Result<BTreeMap<String, String>, HarnessError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| HarnessError::io(format!("cannot read the env file {}", path.display()), e))?;
    let mut vars = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        match line.split_once('=') {
            Some((key, value)) if !key.is_empty() => {
                vars.insert(key.to_string(), value.to_string());
            }
            _ => {}
        }
    }
    Ok(vars)
}

/// Starts the instance again as recorded (own process group, output appended to its log)
/// and writes the new pid to its pid file.
pub fn restart(instance: &Instance) -> Result<Child, HarnessError> {
    let Some(restart) = &instance.restart else {
        return Err(HarnessError::Unavailable(format!(
            "the instances file has no restart command for {}",
            instance.id
        )));
    };
    let Some((program, args)) = restart.argv.split_first() else {
        return Err(HarnessError::Unavailable(format!(
            "the restart command of {} is empty",
            instance.id
        )));
    };
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null()).process_group(0);
    if let Some(env_file) = &restart.env_file {
        command.env_clear().envs(read_env_file(env_file)?);
    }
    if let Some(cwd) = &restart.cwd {
        command.current_dir(cwd);
    }
    match &restart.log {
        Some(log) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|e| HarnessError::io(format!("cannot open {}", log.display()), e))?;
            let err = file
                .try_clone()
                .map_err(|e| HarnessError::io(format!("cannot open {}", log.display()), e))?;
            command.stdout(file).stderr(err);
        }
        None => {
            command.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
    let child = command.spawn().map_err(|source| HarnessError::Spawn {
        program: program.clone(),
        source,
    })?;
    if let Some(pid_file) = &instance.pid_file {
        std::fs::write(pid_file, format!("{}\n", child.id()))
            .map_err(|e| HarnessError::io(format!("cannot write {}", pid_file.display()), e))?;
    }
    Ok(child)
}

/// `GET base+path` over plain HTTP/1.1; the status, or `None` when nothing answers in 2 s.
pub async fn http_status(base: &url::Url, path: &str) -> Option<u16> {
    let host = base
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = base.port_or_known_default()?;
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = vec![0u8; 512];
        let mut filled = 0;
        while filled < 16 {
            let n = stream.read(&mut head[filled..]).await.ok()?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        let text = String::from_utf8_lossy(&head[..filled]).into_owned();
        text.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
}

/// Polls `/readyz` until it answers 200; the time it took.
pub async fn wait_ready(base: &url::Url, timeout: Duration) -> Result<Duration, HarnessError> {
    let start = Instant::now();
    loop {
        if http_status(base, "/readyz").await == Some(200) {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            return Err(HarnessError::Unavailable(format!(
                "{base} not ready after {timeout:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_and_resolves_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("instances.json");
        std::fs::write(
            &path,
            r#"{"version":1,"auth":{"signing_key_dir":"home/config/cluster"},
               "instances":[{"id":"i1","ws_url":"ws://127.0.0.1:1/v1/ws",
               "http_url":"http://127.0.0.1:1","pid":1,"pid_file":"i1.pid",
               "restart":{"argv":["x"],"env_file":"i1.env"}}]}"#,
        )
        .unwrap();
        let file = Instances::load(&path).unwrap();
        assert_eq!(file.instances[0].pid_file, Some(dir.path().join("i1.pid")));
        assert_eq!(
            file.auth.as_ref().unwrap().signing_key_dir,
            dir.path().join("home/config/cluster")
        );
        assert_eq!(file.auth.as_ref().unwrap().tenant, "local");
        std::fs::write(dir.path().join("i1.pid"), "77\n").unwrap();
        assert_eq!(file.instances[0].current_pid(), 77);
        assert_eq!(file.position("i1"), Some(0));
    }

    #[test]
    fn bad_files_are_input_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("instances.json");
        std::fs::write(&path, "{").unwrap();
        assert_eq!(Instances::load(&path).unwrap_err().exit_code(), 2);
        assert_eq!(
            Instances::load(&dir.path().join("missing.json"))
                .unwrap_err()
                .exit_code(),
            2
        );
    }

    #[test]
    fn env_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.env");
        std::fs::write(&path, "# c\nA=1\nexport B=x=y\n\n").unwrap();
        let vars = read_env_file(&path).unwrap();
        assert_eq!(vars.get("A").map(String::as_str), Some("1"));
        assert_eq!(vars.get("B").map(String::as_str), Some("x=y"));
    }

    #[test]
    fn refuses_to_kill_what_is_not_a_backend() {
        assert!(kill9(std::process::id(), None).is_err());
        assert!(!is_live_backend(u32::MAX));
    }
}
