//! Finding the backend to talk to.
//!
//! Remote mode: `LUMINA_BACKEND_URL` with the bearer `LUMINA_JWT`; nothing is started.
//! Local mode: the backend recorded in `<AppRoot>/state/run/backend.json` when its process is
//! alive and answers `hello`; otherwise `lumina-backend serve --app-root <AppRoot>` is started
//! detached (own process group, output appended to `state/logs/backend.log`) and awaited until
//! it has written its own endpoint file and answers `hello`.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use lumina_client::protocol::methods::HelloResult;
use lumina_client::{Client, ClientError, ConnectOptions, Notifications};
use lumina_config::{AppRoot, Env, Secret};
use serde::Deserialize;
use serde_json::Value;

/// Environment variable naming a remote backend (`ws://host:port[/v1/ws]`).
pub const BACKEND_URL_VAR: &str = "LUMINA_BACKEND_URL";
/// Environment variable holding the bearer JWT for the remote backend.
pub const JWT_VAR: &str = "LUMINA_JWT";
/// Environment variable overriding the backend executable.
pub const BACKEND_BIN_VAR: &str = "LUMINA_BACKEND_BIN";

/// How long a freshly started backend may take to become ready.
const START_TIMEOUT: Duration = Duration::from_secs(15);
const START_POLL: Duration = Duration::from_millis(100);
/// Connect and `hello` budget for probing a backend.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// `state/run/backend.json`, written by the local backend (mode 0600).
#[derive(Debug, Clone, Deserialize)]
pub struct BackendFile {
    pub url: String,
    pub token: Secret,
    pub pid: u32,
    #[serde(default)]
    pub protocol: Option<u32>,
    #[serde(default)]
    pub started_at: Value,
}

impl BackendFile {
    pub fn parse(text: &str) -> Result<BackendFile, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Reads the endpoint file. A missing or unreadable-as-JSON file (e.g. caught mid-write)
    /// is `None`: either way there is no usable backend recorded.
    pub fn read(path: &Path) -> anyhow::Result<Option<BackendFile>> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(BackendFile::parse(&text).ok()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(anyhow!("cannot read {}: {error}", path.display())),
        }
    }
}

/// True when a process with this pid exists. Signalling would need `unsafe` (denied), so on
/// Linux this looks at `/proc`; elsewhere it answers true and the `hello` probe decides.
pub fn pid_alive(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    if cfg!(target_os = "linux") {
        Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

/// The WebSocket endpoint for a configured URL: `http(s)` becomes `ws(s)`, and a URL without
/// a path gets the protocol's `/v1/ws`.
pub fn ws_endpoint(url: &str) -> String {
    let url = url.trim();
    let url = if let Some(rest) = url.strip_prefix("http://") {
        format!("ws://{rest}")
    } else if let Some(rest) = url.strip_prefix("https://") {
        format!("wss://{rest}")
    } else {
        url.to_string()
    };
    let has_path = url
        .split_once("://")
        .map(|(_, rest)| rest.trim_end_matches('/').contains('/'))
        .unwrap_or(true);
    if has_path {
        url
    } else {
        format!(
            "{}{}",
            url.trim_end_matches('/'),
            lumina_client::protocol::WS_PATH
        )
    }
}

/// A connected, greeted backend.
pub struct Connected {
    pub client: Client,
    pub notifications: Notifications,
    pub hello: HelloResult,
}

/// Connects to the remote backend named by the environment, or to the local one (starting
/// it when needed).
pub async fn connect(env: &Env, app_root: &AppRoot) -> anyhow::Result<Connected> {
    match remote_target(env)? {
        Some((url, jwt)) => connect_remote(&url, &jwt).await,
        None => connect_local(env, app_root).await,
    }
}

/// `Some((url, jwt))` in remote mode; an error when the URL is set without a JWT.
pub fn remote_target(env: &Env) -> anyhow::Result<Option<(String, Secret)>> {
    let Some(url) = env.get_nonempty(BACKEND_URL_VAR) else {
        return Ok(None);
    };
    let Some(jwt) = env.get_nonempty(JWT_VAR) else {
        bail!("{BACKEND_URL_VAR} is set but {JWT_VAR} is not: set {JWT_VAR} to a bearer token for that backend");
    };
    Ok(Some((ws_endpoint(url), Secret::new(jwt))))
}

async fn connect_remote(url: &str, jwt: &Secret) -> anyhow::Result<Connected> {
    let options = ConnectOptions::default();
    match greet(url, jwt, options.connect_timeout, options.call_timeout).await {
        Ok(connected) => Ok(connected),
        Err(ClientError::Unauthorized(message)) => Err(anyhow!("{message} (check {JWT_VAR})")),
        Err(error) => Err(anyhow!("{error}")),
    }
}

async fn greet(
    url: &str,
    token: &Secret,
    connect_timeout: Duration,
    call_timeout: Duration,
) -> Result<Connected, ClientError> {
    let options = ConnectOptions {
        connect_timeout,
        ..ConnectOptions::default()
    };
    let (client, notifications) = Client::connect_with(url, Some(token.expose()), options).await?;
    let hello = client
        .with_call_timeout(call_timeout)
        .hello(concat!("lumina/", env!("CARGO_PKG_VERSION")))
        .await?;
    Ok(Connected {
        client,
        notifications,
        hello,
    })
}

/// Connects to the backend in `file` when its process is alive and it answers `hello`.
async fn probe(file: &BackendFile) -> Result<Connected, ClientError> {
    if !pid_alive(file.pid) {
        return Err(ClientError::Connect(format!(
            "the recorded backend (pid {}) is not running",
            file.pid
        )));
    }
    greet(
        &ws_endpoint(&file.url),
        &file.token,
        PROBE_TIMEOUT,
        PROBE_TIMEOUT,
    )
    .await
}

async fn connect_local(env: &Env, app_root: &AppRoot) -> anyhow::Result<Connected> {
    let endpoint_file = app_root.backend_file();
    if let Some(file) = BackendFile::read(&endpoint_file)? {
        // Any failure (dead pid, reused pid, hung or incompatible backend) means: start one.
        if let Ok(connected) = probe(&file).await {
            return Ok(connected);
        }
    }
    let log_path = app_root.logs_dir().join("backend.log");
    let mut child = start_backend(env, app_root, &log_path)?;
    wait_for_backend(&mut child, &endpoint_file, &log_path).await
}

/// The backend executable: `$LUMINA_BACKEND_BIN`, else `lumina-backend` next to this
/// executable, else `lumina-backend` from `PATH`.
pub fn backend_binary(env: &Env) -> PathBuf {
    if let Some(bin) = env.get_nonempty(BACKEND_BIN_VAR) {
        return PathBuf::from(bin);
    }
    if let Ok(exe) = std::env::current_exe() {
        let sibling = exe.with_file_name("lumina-backend");
        if sibling.is_file() {
            return sibling;
        }
    }
    PathBuf::from("lumina-backend")
}

fn start_backend(env: &Env, app_root: &AppRoot, log_path: &Path) -> anyhow::Result<Child> {
    let logs_dir = app_root.logs_dir();
    std::fs::create_dir_all(&logs_dir)
        .with_context(|| format!("cannot create {}", logs_dir.display()))?;
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let log_err = log
        .try_clone()
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let binary = backend_binary(env);
    let mut command = Command::new(&binary);
    command
        .arg("serve")
        .arg("--app-root")
        .arg(app_root.path())
        // Not the project directory: the backend outlives this invocation.
        .current_dir(app_root.path())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        // Own process group: Ctrl-C in this terminal must not stop the shared backend.
        .process_group(0);
    command.spawn().map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound
            && env.get_nonempty(BACKEND_BIN_VAR).is_some()
        {
            anyhow!(
                "cannot start the local backend: {} (from {BACKEND_BIN_VAR}) not found",
                binary.display()
            )
        } else if error.kind() == std::io::ErrorKind::NotFound {
            anyhow!(
                "cannot start the local backend: {} not found (install lumina-backend next to \
                 lumina or on PATH, or set {BACKEND_BIN_VAR})",
                binary.display()
            )
        } else {
            anyhow!("cannot start {}: {error}", binary.display())
        }
    })
}

async fn wait_for_backend(
    child: &mut Child,
    endpoint_file: &Path,
    log_path: &Path,
) -> anyhow::Result<Connected> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut last_error: Option<ClientError> = None;
    loop {
        let exited = child.try_wait().ok().flatten();
        if let Some(file) = BackendFile::read(endpoint_file)? {
            // After our child exited, another invocation's backend may have won a start race.
            if file.pid == child.id() || exited.is_some() {
                match probe(&file).await {
                    Ok(connected) => return Ok(connected),
                    Err(error) => last_error = Some(error),
                }
            }
        }
        if let Some(status) = exited {
            bail!(
                "lumina-backend exited ({status}) before it was ready; see {}",
                log_path.display()
            );
        }
        if Instant::now() >= deadline {
            let detail = last_error
                .map(|error| format!(" (last attempt: {error})"))
                .unwrap_or_default();
            bail!(
                "lumina-backend (pid {}) did not become ready within {} s{detail}; see {}",
                child.id(),
                START_TIMEOUT.as_secs(),
                log_path.display()
            );
        }
        tokio::time::sleep(START_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn parses_the_endpoint_file_and_ignores_extra_fields() {
        let file = BackendFile::parse(
            r#"{"url":"ws://127.0.0.1:4100/v1/ws","token":"tok-123","pid":42,
                "protocol":3,"started_at":"2025-01-01T00:00:00Z","extra":true}"#,
        )
        .unwrap();
        assert_eq!(file.url, "ws://127.0.0.1:4100/v1/ws");
        assert_eq!(file.token.expose(), "tok-123");
        assert_eq!(file.pid, 42);
        assert_eq!(file.protocol, Some(3));
        // The token never shows in diagnostics.
        assert!(!format!("{file:?}").contains("tok-123"));
        assert!(BackendFile::parse(r#"{"url":"ws://x"}"#).is_err());
    }

    #[test]
    fn missing_or_torn_files_mean_no_backend() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("backend.json");
        assert!(BackendFile::read(&path).unwrap().is_none());
        std::fs::write(&path, r#"{"url":"ws://127.0.0.1:1","tok"#).unwrap();
        assert!(BackendFile::read(&path).unwrap().is_none());
        std::fs::write(&path, r#"{"url":"ws://127.0.0.1:1","token":"t","pid":7}"#).unwrap();
        assert_eq!(BackendFile::read(&path).unwrap().unwrap().pid, 7);
    }

    #[test]
    fn stale_pids_are_detected() {
        assert!(pid_alive(std::process::id()));
        // Above Linux's largest possible pid_max (2^22).
        assert!(!pid_alive(4_194_304 + 1));
        assert!(!pid_alive(0));
    }

    #[tokio::test]
    async fn a_stale_pid_is_not_probed() {
        let file =
            BackendFile::parse(r#"{"url":"ws://127.0.0.1:1/v1/ws","token":"t","pid":4194305}"#)
                .unwrap();
        let error = probe(&file).await.err().unwrap();
        assert!(error.to_string().contains("not running"), "{error}");
    }

    #[test]
    fn endpoints_are_normalized() {
        assert_eq!(ws_endpoint("ws://h:1"), "ws://h:1/v1/ws");
        assert_eq!(ws_endpoint("ws://h:1/"), "ws://h:1/v1/ws");
        assert_eq!(ws_endpoint("http://h:1"), "ws://h:1/v1/ws");
        assert_eq!(ws_endpoint("https://h/v1/ws"), "wss://h/v1/ws");
        assert_eq!(ws_endpoint("ws://h:1/custom/ws"), "ws://h:1/custom/ws");
    }

    #[test]
    fn remote_mode_needs_a_jwt() {
        let env = Env::from_pairs([(BACKEND_URL_VAR, "ws://cluster:8080")]);
        let error = remote_target(&env).unwrap_err().to_string();
        assert!(error.contains(JWT_VAR), "{error}");

        let env = Env::from_pairs([(BACKEND_URL_VAR, "ws://cluster:8080"), (JWT_VAR, "jwt")]);
        let (url, jwt) = remote_target(&env).unwrap().unwrap();
        assert_eq!(url, "ws://cluster:8080/v1/ws");
        assert_eq!(jwt.expose(), "jwt");

        assert!(remote_target(&Env::from_pairs([("X", "y")]))
            .unwrap()
            .is_none());
    }
}
