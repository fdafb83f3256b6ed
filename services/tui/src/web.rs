//! `lumina --web`: the web console's address (docs/console.md). For the local backend it
//! asks for a one-time sign-in ticket (`console.ticket`) and prints the link — the bearer
//! token never goes into it; `--open` hands the link to `xdg-open` when present. A remote
//! backend's console signs in with a JWT pasted into the page, so only its address is
//! printed.

use std::path::{Path, PathBuf};

use anyhow::Context;
use lumina_client::protocol::methods::Empty;
use lumina_config::{AppRoot, Env};

use crate::backend::{self, BackendFile};

/// The console URL to open.
pub async fn console_url(env: &Env, app_root: &AppRoot) -> anyhow::Result<String> {
    if let Some((url, _jwt)) = backend::remote_target(env)? {
        return Ok(format!("{}/", http_base(&url)));
    }
    let connected = backend::connect(env, app_root).await?;
    let file = BackendFile::read(&app_root.backend_file())?
        .context("the local backend's endpoint file disappeared")?;
    let ticket = connected
        .client
        .calls()
        .console_ticket(&Empty {})
        .await
        .context("the backend did not issue a console ticket")?;
    Ok(format!("{}{}", http_base(&file.url), ticket.login_path))
}

/// `ws://host:port/v1/ws` → `http://host:port` (and `wss` → `https`).
pub fn http_base(ws_url: &str) -> String {
    let url = ws_url.trim();
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("wss://") {
        ("https", rest)
    } else if let Some(rest) = url.strip_prefix("ws://") {
        ("http", rest)
    } else if let Some(rest) = url.strip_prefix("https://") {
        ("https", rest)
    } else {
        ("http", url.strip_prefix("http://").unwrap_or(url))
    };
    let host = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{host}")
}

/// `xdg-open` on `PATH`, if any.
pub fn opener() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("xdg-open"))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Opens `url` with `xdg-open` (detached; its output is dropped).
pub fn open(url: &str) -> anyhow::Result<()> {
    let Some(opener) = opener() else {
        anyhow::bail!("xdg-open is not installed; open the link above yourself");
    };
    std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("cannot run xdg-open")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_base_of_endpoint_urls() {
        assert_eq!(
            http_base("ws://127.0.0.1:4100/v1/ws"),
            "http://127.0.0.1:4100"
        );
        assert_eq!(
            http_base("wss://lumina.example/v1/ws"),
            "https://lumina.example"
        );
        assert_eq!(
            http_base("https://lumina.example"),
            "https://lumina.example"
        );
    }
}
