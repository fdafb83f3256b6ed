//! The MCP client: one [`ClientSession`] per connected server, over a [`Transport`]
//! (stdio, Streamable HTTP, legacy HTTP+SSE), in either era (handshake ≤ 2025-11-25, or
//! stateless 2026-07-28) — see [`lifecycle`] for how the era is detected.

pub mod auth;
mod handlers;
mod headers;
mod http;
mod legacy_sse;
pub mod lifecycle;
mod rpc;
mod sse_body;
mod stdio;
mod transport;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use url::Url;

pub use handlers::elicit as elicitation_defaults;
pub use http::StreamableHttp;
pub use legacy_sse::LegacySse;
pub use stdio::{StdioSpec, StdioTransport};
pub use transport::{Inbound, InboundTx, Negotiated, Transport, TransportKind};

use crate::Error;
use rpc::Rpc;

/// How to reach a server, with `${VAR}` already expanded. `Debug` redacts values.
#[derive(Clone, PartialEq, Eq)]
pub enum Endpoint {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: Url,
        headers: Vec<(String, String)>,
        mode: HttpMode,
        /// The `"oauth"` settings of the definition (secret expanded), if any.
        oauth: Option<OAuthSettings>,
    },
}

/// A server definition's `"oauth"` object: pre-registered credentials and extra scopes.
/// `Debug` redacts the secret.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OAuthSettings {
    pub client_id: Option<String>,
    pub client_secret: Option<lumina_config::Secret>,
    pub scopes: Vec<String>,
}

impl Endpoint {
    /// A Streamable HTTP / auto endpoint without headers or OAuth settings.
    pub fn http(url: Url, mode: HttpMode) -> Self {
        Endpoint::Http {
            url,
            headers: Vec::new(),
            mode,
            oauth: None,
        }
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Stdio { command, env, .. } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("env_keys", &env.iter().map(|(k, _)| k).collect::<Vec<_>>())
                .finish_non_exhaustive(),
            Endpoint::Http {
                url,
                headers,
                mode,
                oauth,
            } => f
                .debug_struct("Http")
                .field("origin", &url.origin().ascii_serialization())
                .field(
                    "header_names",
                    &headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                )
                .field("mode", mode)
                .field("oauth", oauth)
                .finish(),
        }
    }
}

/// Which HTTP transport to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpMode {
    /// Streamable HTTP, falling back to HTTP+SSE when `initialize` gets 400/404/405.
    Auto,
    /// Streamable HTTP only (`"type": "http"`).
    Streamable,
    /// The 2024-11-05 HTTP+SSE transport (`"type": "sse"`).
    LegacySse,
}

/// Which era to speak (`"protocol"` in the server definition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ProtocolPref {
    /// Probe `server/discover`; fall back to the `initialize` handshake.
    #[default]
    Auto,
    /// Handshake only (`"2025-11-25"`).
    Handshake,
    /// Stateless 2026-07-28 only.
    Stateless,
}

/// Connection settings (defaults: auto era, probe 3 s (stdio) / 5 s (HTTP), 30 s requests,
/// no OAuth).
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub protocol: ProtocolPref,
    /// `None`: 3 s for stdio, 5 s for HTTP.
    pub probe_timeout: Option<Duration>,
    /// Timeout of lifecycle requests (`initialize`, `tools/list`, `ping`).
    pub request_timeout: Duration,
    /// A name for logs (the server's configured name).
    pub label: String,
    /// Authorization for HTTP servers that answer `401` (kept across reconnects by the
    /// caller). `None`: a `401` fails the connection.
    pub auth: Option<Arc<auth::OAuth>>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            protocol: ProtocolPref::Auto,
            probe_timeout: None,
            request_timeout: Duration::from_secs(30),
            label: "mcp".into(),
            auth: None,
        }
    }
}

/// What the server told us when the session started.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    pub protocol_version: String,
    pub stateless: bool,
    pub transport: TransportKind,
    pub server_info: Value,
    pub capabilities: Value,
    pub instructions: Option<String>,
}

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// `inputSchema`, `{"type":"object"}` when absent.
    pub input_schema: Value,
    /// `annotations.readOnlyHint == true` (a hint from an untrusted server).
    pub read_only_hint: bool,
}

/// A `tools/call` result. `is_error` results are results: the model sees them.
#[derive(Debug, Clone, PartialEq)]
pub struct CallToolResult {
    pub content: Vec<Value>,
    pub structured_content: Option<Value>,
    pub is_error: bool,
}

/// One connected server.
pub struct ClientSession {
    rpc: Arc<Rpc>,
    info: SessionInfo,
    request_timeout: Duration,
}

/// Pages of `tools/list` followed at most (a guard against cursor loops).
const MAX_PAGES: usize = 100;

impl ClientSession {
    /// Connects and runs the lifecycle (era detection, handshake or discovery).
    pub async fn connect(endpoint: &Endpoint, opts: &ConnectOptions) -> Result<Self, Error> {
        let (rpc, info) = lifecycle::establish(endpoint, opts).await?;
        tracing::info!(
            server = %opts.label, transport = %info.transport,
            protocol_version = %info.protocol_version, "mcp server connected"
        );
        Ok(Self {
            rpc,
            info,
            request_timeout: opts.request_timeout,
        })
    }

    pub fn info(&self) -> &SessionInfo {
        &self.info
    }

    pub fn protocol_version(&self) -> &str {
        &self.info.protocol_version
    }

    /// Why the session ended, once it has (process exit, stream closed, ...).
    pub fn closed_reason(&self) -> Option<String> {
        self.rpc.closed_reason()
    }

    /// Whether the server announced a changed tool list since the last [`Self::list_tools`].
    pub fn tools_changed(&self) -> bool {
        self.rpc.tools_changed.load(Ordering::Acquire)
    }

    /// The server process id (stdio).
    pub fn process_id(&self) -> Option<u32> {
        self.rpc.transport.process_id()
    }

    /// The server's last stderr line (stdio), at most 200 characters.
    pub fn last_stderr(&self) -> Option<String> {
        self.rpc.transport.last_stderr()
    }

    /// All tools, following `nextCursor`.
    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, Error> {
        self.rpc.tools_changed.store(false, Ordering::Release);
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map(|c| json!({"cursor": c}));
            let page = self
                .rpc
                .request("tools/list", params, self.request_timeout, None)
                .await?;
            let items = page
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| Error::Protocol("tools/list result has no `tools` array".into()))?;
            tools.extend(items.iter().filter_map(|t| parse_tool(t, &self.rpc.label)));
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() && cursor.as_deref() != Some(next) => {
                    cursor = Some(next.to_string())
                }
                _ => return Ok(tools),
            }
        }
        Err(Error::Protocol(format!(
            "tools/list returned more than {MAX_PAGES} pages"
        )))
    }

    /// Calls a tool. On timeout or cancellation the server is told and the call fails with
    /// [`Error::Timeout`] / [`Error::Cancelled`]; the session stays usable.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        cancel: Option<&CancellationToken>,
    ) -> Result<CallToolResult, Error> {
        let params = json!({"name": name, "arguments": arguments});
        let result = self
            .rpc
            .request("tools/call", Some(params), timeout, cancel)
            .await?;
        let content = match result.get("content") {
            Some(Value::Array(items)) => items.clone(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                return Err(Error::Protocol(
                    "tools/call `content` is not an array".into(),
                ))
            }
        };
        Ok(CallToolResult {
            content,
            structured_content: result.get("structuredContent").cloned(),
            is_error: result
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// Liveness check (`ping`; `server/discover` in the stateless era, which has no ping).
    pub async fn ping(&self) -> Result<(), Error> {
        let method = if self.info.stateless {
            "server/discover"
        } else {
            "ping"
        };
        self.rpc
            .request(method, None, self.request_timeout, None)
            .await
            .map(|_| ())
    }

    /// Ends the session (stdio: stop the process; HTTP: DELETE the session).
    pub async fn close(&self) {
        self.rpc.mark_closed("the session was closed".into());
        self.rpc.transport.close().await;
    }
}

fn parse_tool(v: &Value, label: &str) -> Option<ToolInfo> {
    let Some(name) = v
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    else {
        tracing::warn!(server = label, "ignoring an mcp tool without a name");
        return None;
    };
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    Some(ToolInfo {
        name: name.to_string(),
        title: text("title"),
        description: text("description"),
        input_schema: match v.get("inputSchema") {
            Some(s @ Value::Object(_)) => s.clone(),
            _ => json!({"type": "object"}),
        },
        read_only_hint: v
            .pointer("/annotations/readOnlyHint")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}
