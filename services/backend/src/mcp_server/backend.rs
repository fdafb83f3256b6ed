//! How the MCP server reaches a Lumina backend: a configured URL with a fixed token, a URL
//! whose token each HTTP request brings (the backend verifies it), or the local backend of
//! the AppRoot, found through its endpoint file and started when none is running.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lumina_client::protocol::WS_PATH;
use lumina_client::{Client, ClientError, Notifications};
use lumina_config::{AppRoot, Secret};

use crate::endpoint;

/// How long a freshly started local backend may take to write its endpoint file.
const START_TIMEOUT: Duration = Duration::from_secs(15);
const START_POLL: Duration = Duration::from_millis(100);

/// Why the backend could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The backend refused the credential (never includes it).
    #[error("the Lumina backend refused the credential")]
    Unauthorized,
    /// Connecting or starting failed.
    #[error("the Lumina backend is unavailable: {0}")]
    Unavailable(String),
    /// A call failed (the backend's own error message).
    #[error("{0}")]
    Call(String),
}

impl From<ClientError> for BackendError {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::Unauthorized(_) => BackendError::Unauthorized,
            ClientError::Connect(m) => BackendError::Unavailable(m),
            ClientError::Server(e) => BackendError::Call(e.message),
            other => BackendError::Call(other.to_string()),
        }
    }
}

/// Where the backend is.
#[derive(Debug, Clone)]
pub enum Target {
    /// `ws://…` with a token configured at start.
    Fixed { url: String, token: Secret },
    /// `ws://…`; every HTTP request carries its own bearer.
    PerRequest { url: String },
    /// The AppRoot's local backend (`state/run/backend.json`).
    Local { app_root: AppRoot },
}

impl Target {
    /// True when no credential was configured: HTTP requests must bring one.
    pub fn needs_bearer(&self) -> bool {
        matches!(self, Target::PerRequest { .. })
    }

    pub fn is_local(&self) -> bool {
        matches!(self, Target::Local { .. })
    }

    /// A new connection. `bearer` is the request's token (used only by `PerRequest`).
    pub async fn connect(
        &self,
        bearer: Option<&Secret>,
    ) -> Result<(Client, Notifications), BackendError> {
        match self {
            Target::Fixed { url, token } => Ok(Client::connect(url, Some(token.expose())).await?),
            Target::PerRequest { url } => {
                let bearer = bearer.ok_or(BackendError::Unauthorized)?;
                Ok(Client::connect(url, Some(bearer.expose())).await?)
            }
            Target::Local { app_root } => connect_local(app_root).await,
        }
    }

    /// Whether an HTTP request's bearer may use this backend — the WebSocket's rule: the
    /// backend verifies a forwarded bearer; a configured token or the local backend's token
    /// (from its 0600 endpoint file) must be presented exactly.
    pub async fn verify_bearer(&self, bearer: &Secret) -> Result<(), BackendError> {
        let expected = match self {
            Target::PerRequest { .. } => {
                let (client, _notes) = self.connect(Some(bearer)).await?;
                client.close();
                return Ok(());
            }
            Target::Fixed { token, .. } => token.expose().to_string(),
            Target::Local { app_root } => {
                let file = app_root.backend_file();
                let live = || endpoint::read(&file).filter(|e| endpoint::is_live_backend(e.pid));
                match live() {
                    Some(found) => found.token,
                    None => {
                        let (client, _notes) = connect_local(app_root).await?;
                        client.close();
                        live().map(|e| e.token).ok_or_else(|| {
                            BackendError::Unavailable("the local backend stopped".into())
                        })?
                    }
                }
            }
        };
        let same: bool =
            subtle::ConstantTimeEq::ct_eq(bearer.expose().as_bytes(), expected.as_bytes()).into();
        if same {
            Ok(())
        } else {
            Err(BackendError::Unauthorized)
        }
    }
}

/// `http(s)://` becomes `ws(s)://`; a URL without a path gets `/v1/ws`.
pub fn ws_url(url: &str) -> String {
    let url = url.trim();
    let url = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => format!("ws://{rest}"),
        (_, Some(rest)) => format!("wss://{rest}"),
        _ => url.to_string(),
    };
    let has_path = url
        .split_once("://")
        .is_some_and(|(_, rest)| rest.trim_end_matches('/').contains('/'));
    if has_path {
        url
    } else {
        format!("{}{WS_PATH}", url.trim_end_matches('/'))
    }
}

async fn connect_local(app_root: &AppRoot) -> Result<(Client, Notifications), BackendError> {
    let file = app_root.backend_file();
    if let Some(found) = endpoint::read(&file).filter(|e| endpoint::is_live_backend(e.pid)) {
        match Client::connect(&found.url, Some(&found.token)).await {
            Ok(connected) => return Ok(connected),
            Err(ClientError::Connect(message)) => {
                tracing::info!(%message, "the recorded local backend does not answer; starting one")
            }
            Err(other) => return Err(other.into()),
        }
    }
    let pid = start_local(app_root)?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(found) = endpoint::read(&file).filter(|e| endpoint::is_live_backend(e.pid)) {
            // Another invocation may have won a start race: its backend is as good.
            if let Ok(connected) = Client::connect(&found.url, Some(&found.token)).await {
                tracing::info!(
                    pid = found.pid,
                    started = pid,
                    "connected to the local backend"
                );
                return Ok(connected);
            }
        }
        if Instant::now() >= deadline {
            return Err(BackendError::Unavailable(format!(
                "the local backend (pid {pid}) did not become ready within {} s; see {}",
                START_TIMEOUT.as_secs(),
                app_root.logs_dir().join("backend.log").display()
            )));
        }
        tokio::time::sleep(START_POLL).await;
    }
}

/// Starts `lumina-backend serve` (this executable) detached, in its own process group so it
/// outlives this MCP server, logging to `state/logs/backend.log`.
fn start_local(app_root: &AppRoot) -> Result<u32, BackendError> {
    let unavailable =
        |what: &str, e: std::io::Error| BackendError::Unavailable(format!("{what}: {e}"));
    let logs = app_root.logs_dir();
    std::fs::create_dir_all(&logs)
        .map_err(|e| unavailable("cannot create the log directory", e))?;
    let log_path = logs.join("backend.log");
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| unavailable("cannot open backend.log", e))?;
    let log_err = log
        .try_clone()
        .map_err(|e| unavailable("cannot open backend.log", e))?;
    let exe: PathBuf = std::env::current_exe()
        .map_err(|e| unavailable("cannot find the lumina-backend executable", e))?;
    let child = Command::new(exe)
        .arg("serve")
        .arg("--app-root")
        .arg(app_root.path())
        .current_dir(app_root.path())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .process_group(0)
        .spawn()
        .map_err(|e| unavailable("cannot start lumina-backend serve", e))?;
    tracing::info!(pid = child.id(), "started a local backend");
    Ok(child.id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_normalized() {
        assert_eq!(ws_url("ws://h:1"), "ws://h:1/v1/ws");
        assert_eq!(ws_url("http://h:1/"), "ws://h:1/v1/ws");
        assert_eq!(ws_url("ws://h:1/v1/ws"), "ws://h:1/v1/ws");
        assert_eq!(ws_url("https://h/x/ws"), "wss://h/x/ws");
    }
}
