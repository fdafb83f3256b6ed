//! `lumina-backend mcp-server`: Lumina as an MCP server for other agents (tools in
//! [`tools`]), over stdio (default) or Streamable HTTP (`--http ADDR`, endpoint `/mcp`).
//!
//! It is a client of a Lumina backend over the WebSocket protocol. Credentials follow the
//! WebSocket's rules: `--url` (or `$LUMINA_BACKEND_URL`) with `--token-file`,
//! `$LUMINA_TOKEN` or `$LUMINA_JWT`; without `--url`, the AppRoot's local backend and the
//! token of its endpoint file (the backend is started when none runs). In HTTP mode every
//! request must carry `Authorization: Bearer <token>`, as on the WebSocket: without a
//! configured credential it is forwarded to the backend, whose verification is the only
//! authority; with one (or for the local backend) it must equal that token. A refused
//! token is a bare 401. `--no-auth` drops the check (a single-user machine, conformance
//! runs). Tokens are never logged.

mod backend;
mod prompt;
mod tools;
mod transcript;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use async_trait::async_trait;
use lumina_config::{AppRoot, Env, Secret};
use lumina_mcp_server::http::{AuthRejection, HeaderMap, HostPolicy, HttpAuth, HttpOptions};
use lumina_mcp_server::{AuthValue, Handler};

pub use backend::{BackendError, Target};
pub use tools::LuminaTools;

use tools::Bearer;

/// How long a bearer the backend accepted is trusted for HTTP requests that do not reach
/// the backend themselves (tool calls always present it to the backend again).
const BEARER_TTL: Duration = Duration::from_secs(30);
const BEARER_CACHE: usize = 256;

/// The `mcp-server` subcommand's flags.
#[derive(Debug, clap::Args)]
pub struct McpServerArgs {
    /// Serve MCP on stdin/stdout (the default).
    #[arg(long, conflicts_with = "http")]
    pub stdio: bool,
    /// Serve Streamable HTTP at http://ADDR/mcp instead; the bound address is printed first.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// The backend's WebSocket URL (default: the AppRoot's local backend, started when needed).
    #[arg(long, env = "LUMINA_BACKEND_URL")]
    pub url: Option<String>,
    /// File holding the bearer token for --url (else $LUMINA_TOKEN or $LUMINA_JWT).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// AppRoot of the local backend (default: $LUMINA_HOME or ~/.lumina).
    #[arg(long)]
    pub app_root: Option<PathBuf>,
    /// Host names accepted in Host/Origin by --http (repeatable; default: loopback names when
    /// bound to a loopback address).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// --http only: accept requests without a bearer token. Anyone who can reach the port
    /// then acts with this server's credential.
    #[arg(long, requires = "http")]
    pub no_auth: bool,
    /// Serve the MCP conformance suite's fixture tools, resources and prompts instead of
    /// Lumina's sessions (no backend is contacted): the suite's server scenarios then run
    /// through this command's transports and protocol code.
    #[arg(long)]
    pub conformance_fixtures: bool,
}

/// Where the backend is and which credential reaches it.
pub fn resolve_target(args: &McpServerArgs, env: &Env) -> anyhow::Result<Target> {
    let Some(url) = args.url.as_deref().filter(|u| !u.trim().is_empty()) else {
        return Ok(Target::Local {
            app_root: AppRoot::resolve(args.app_root.as_deref(), env)?,
        });
    };
    let url = backend::ws_url(url);
    let token = match &args.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the token file {}", path.display()))?;
            Some(text.trim().to_string()).filter(|t| !t.is_empty())
        }
        None => env
            .get_nonempty("LUMINA_TOKEN")
            .or_else(|| env.get_nonempty("LUMINA_JWT"))
            .map(str::to_string),
    };
    Ok(match token {
        Some(token) => Target::Fixed {
            url,
            token: Secret::new(token),
        },
        None => Target::PerRequest { url },
    })
}

/// Runs the MCP server until its input ends (stdio) or SIGINT/SIGTERM.
pub async fn run(args: McpServerArgs) -> anyhow::Result<()> {
    let env = Env::from_process();
    let target = resolve_target(&args, &env)?;
    let default_project_root = if target.is_local() {
        std::env::current_dir().ok()
    } else {
        None
    };
    let handler: Arc<dyn Handler> = if args.conformance_fixtures {
        Arc::new(lumina_mcp_server::fixtures::Everything)
    } else {
        Arc::new(LuminaTools {
            target: target.clone(),
            default_project_root,
        })
    };
    match args.http {
        None => {
            if target.needs_bearer() && !args.conformance_fixtures {
                bail!(
                    "no credential for {}: pass --token-file or set LUMINA_TOKEN",
                    url_of(&target)
                );
            }
            tracing::info!("lumina mcp server on stdio");
            lumina_mcp_server::serve_process_stdio(handler, terminated()).await?;
        }
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot bind {addr}"))?;
            let bound = listener.local_addr()?;
            println!("{bound}");
            let auth: Option<Arc<dyn HttpAuth>> = (!args.no_auth).then(|| {
                Arc::new(BearerCheck {
                    target: target.clone(),
                    accepted: Mutex::new(HashMap::new()),
                }) as Arc<dyn HttpAuth>
            });
            let options = HttpOptions {
                hosts: if args.allow_hosts.is_empty() {
                    HostPolicy::Auto
                } else {
                    HostPolicy::Allow(args.allow_hosts.clone())
                },
                auth,
                ..HttpOptions::default()
            };
            lumina_mcp_server::http::serve(listener, handler, options, terminated()).await?;
        }
    }
    Ok(())
}

fn url_of(target: &Target) -> &str {
    match target {
        Target::Fixed { url, .. } | Target::PerRequest { url } => url,
        Target::Local { .. } => "the local backend",
    }
}

/// Completes on SIGINT or SIGTERM.
async fn terminated() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("sigterm: stopping the mcp server"),
        _ = int.recv() => tracing::info!("sigint: stopping the mcp server"),
    }
}

/// HTTP auth: the request's bearer must pass [`Target::verify_bearer`]; accepted bearers
/// are remembered briefly.
struct BearerCheck {
    target: Target,
    accepted: Mutex<HashMap<String, Instant>>,
}

impl BearerCheck {
    fn remembered(&self, token: &str) -> bool {
        let accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        accepted
            .get(token)
            .is_some_and(|at| at.elapsed() < BEARER_TTL)
    }

    fn remember(&self, token: &str) {
        let mut accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        if accepted.len() >= BEARER_CACHE {
            accepted.retain(|_, at| at.elapsed() < BEARER_TTL);
            if accepted.len() >= BEARER_CACHE {
                accepted.clear();
            }
        }
        accepted.insert(token.to_string(), Instant::now());
    }
}

#[async_trait]
impl HttpAuth for BearerCheck {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Option<AuthValue>, AuthRejection> {
        let token = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthRejection::Unauthorized)?;
        let bearer = Secret::new(token);
        if !self.remembered(token) {
            match self.target.verify_bearer(&bearer).await {
                Ok(()) => {}
                Err(BackendError::Unauthorized) => {
                    tracing::info!("mcp http request refused: wrong bearer");
                    return Err(AuthRejection::Unauthorized);
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot verify a bearer: backend unavailable");
                    return Err(AuthRejection::Unavailable);
                }
            }
            self.remember(token);
        }
        Ok(Some(Arc::new(Bearer(bearer))))
    }
}
