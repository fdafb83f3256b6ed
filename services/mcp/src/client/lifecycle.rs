//! Connecting: transport choice and era detection (docs/specs/mcp.md#era-detection).
//!
//! - `auto` first sends `server/discover` with the stateless `_meta` (and, over HTTP, the
//!   `MCP-Protocol-Version: 2026-07-28` / `Mcp-Method` headers). A result listing
//!   2026-07-28 in `supportedVersions` selects the stateless era for the whole session.
//!   Anything else that says "not a modern server" — method not found, a non-modern result,
//!   HTTP 400 with an unrecognised body, 404, 405, a timeout — falls back to the handshake.
//! - The handshake offers 2025-11-25 and accepts 2025-11-25, 2025-06-18, 2025-03-26 and
//!   2024-11-05, then sends `notifications/initialized` and opens the GET stream (HTTP).
//! - Over HTTP in `auto` mode, `initialize` answered with 400/404/405 means an old
//!   HTTP+SSE (2024-11-05) server: connect to it with [`LegacySse`].

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use url::Url;

use super::rpc::Rpc;
use super::transport::{Negotiated, INBOUND_CAPACITY};
use super::{
    ConnectOptions, Endpoint, HttpMode, LegacySse, ProtocolPref, SessionInfo, StdioSpec,
    StdioTransport, StreamableHttp, Transport,
};
use crate::jsonrpc::code;
use crate::version;
use crate::Error;

/// What Lumina calls itself in `clientInfo`.
pub const CLIENT_NAME: &str = "lumina";
/// Default `server/discover` wait: stdio servers may be slow to start; HTTP is a round trip.
const STDIO_PROBE_TIMEOUT: Duration = Duration::from_secs(3);
const HTTP_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

use lumina_mcp_proto::meta::{
    CLIENT_CAPABILITIES as META_CAPABILITIES, CLIENT_INFO as META_CLIENT_INFO,
    PROTOCOL_VERSION as META_VERSION, SERVER_INFO as META_SERVER_INFO,
};

fn client_info() -> Value {
    json!({"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")})
}

/// The `_meta` every stateless request carries. No capabilities: server requests need
/// multi-round-trip support, which this client does not have.
pub fn stateless_meta() -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(META_VERSION.into(), Value::from(version::STATELESS));
    meta.insert(META_CAPABILITIES.into(), json!({}));
    meta.insert(META_CLIENT_INFO.into(), client_info());
    meta
}

/// The `initialize` request's params.
pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": version::LATEST_HANDSHAKE,
        "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": client_info(),
    })
}

pub(crate) async fn establish(
    endpoint: &Endpoint,
    opts: &ConnectOptions,
) -> Result<(Arc<Rpc>, SessionInfo), Error> {
    let label = opts.label.clone();
    match endpoint {
        Endpoint::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let (tx, rx) = mpsc::channel(INBOUND_CAPACITY);
            let spec = StdioSpec {
                command: command.clone(),
                args: args.clone(),
                env: env.clone(),
                cwd: cwd.clone(),
                label: label.clone(),
            };
            let transport: Arc<dyn Transport> = Arc::new(StdioTransport::spawn(spec, tx)?);
            let rpc = Rpc::start(transport, rx, label);
            let probe = opts.probe_timeout.unwrap_or(STDIO_PROBE_TIMEOUT);
            closing_on_error(rpc, |rpc| run(rpc, opts, probe)).await
        }
        Endpoint::Http {
            url, headers, mode, ..
        } => {
            let client = reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(Error::http)?;
            if *mode == HttpMode::LegacySse {
                return legacy(client, url, headers, opts).await;
            }
            let (tx, rx) = mpsc::channel(INBOUND_CAPACITY);
            let transport = StreamableHttp::new(
                client.clone(),
                url.clone(),
                headers,
                tx,
                label.clone(),
                opts.auth.clone(),
            )?;
            let rpc = Rpc::start(Arc::new(transport), rx, label);
            let probe = opts.probe_timeout.unwrap_or(HTTP_PROBE_TIMEOUT);
            match closing_on_error(rpc, |rpc| run(rpc, opts, probe)).await {
                Err(Error::HttpStatus {
                    status: 400 | 404 | 405,
                    ..
                }) if *mode == HttpMode::Auto && opts.protocol != ProtocolPref::Stateless => {
                    tracing::debug!(server = %opts.label, "initialize refused; trying the HTTP+SSE transport");
                    legacy(client, url, headers, opts).await
                }
                other => other,
            }
        }
    }
}

async fn legacy(
    client: reqwest::Client,
    url: &Url,
    headers: &[(String, String)],
    opts: &ConnectOptions,
) -> Result<(Arc<Rpc>, SessionInfo), Error> {
    if opts.protocol == ProtocolPref::Stateless {
        return Err(Error::Protocol(
            "the HTTP+SSE transport cannot speak 2026-07-28".into(),
        ));
    }
    let (tx, rx) = mpsc::channel(INBOUND_CAPACITY);
    let transport = LegacySse::connect(
        client,
        url.clone(),
        headers,
        tx,
        opts.label.clone(),
        opts.auth.clone(),
    )
    .await?;
    let rpc = Rpc::start(Arc::new(transport), rx, opts.label.clone());
    closing_on_error(rpc, |rpc| handshake(rpc, opts)).await
}

/// Runs `f`; on error the transport is closed (a spawned server is stopped).
async fn closing_on_error<'a, F, Fut>(rpc: Arc<Rpc>, f: F) -> Result<(Arc<Rpc>, SessionInfo), Error>
where
    F: FnOnce(Arc<Rpc>) -> Fut,
    Fut: std::future::Future<Output = Result<SessionInfo, Error>> + 'a,
{
    match f(rpc.clone()).await {
        Ok(info) => Ok((rpc, info)),
        Err(e) => {
            rpc.mark_closed(e.to_string());
            rpc.transport.close().await;
            Err(e)
        }
    }
}

async fn run(
    rpc: Arc<Rpc>,
    opts: &ConnectOptions,
    probe_timeout: Duration,
) -> Result<SessionInfo, Error> {
    if opts.protocol != ProtocolPref::Handshake {
        rpc.set_meta(Some(stateless_meta()));
        rpc.transport.set_negotiated(&Negotiated {
            protocol_version: Some(version::STATELESS.into()),
            stateless: true,
        });
        let probe = rpc.probe("server/discover", probe_timeout).await;
        match classify(probe) {
            Probe::Modern(result) => return Ok(stateless_info(&rpc, result)),
            Probe::Legacy(why) if opts.protocol == ProtocolPref::Auto => {
                tracing::debug!(server = %opts.label, why, "no stateless mcp; using initialize");
                rpc.set_meta(None);
                rpc.transport.set_negotiated(&Negotiated::default());
            }
            Probe::Legacy(why) => {
                return Err(Error::Protocol(format!(
                    "the server does not speak {}: {why}",
                    version::STATELESS
                )))
            }
            Probe::Fatal(e) => return Err(e),
        }
    }
    handshake(rpc, opts).await
}

enum Probe {
    Modern(Value),
    Legacy(String),
    Fatal(Error),
}

fn classify(probe: Result<Value, Error>) -> Probe {
    match probe {
        Ok(result) => {
            let modern = result
                .get("supportedVersions")
                .and_then(Value::as_array)
                .is_some_and(|v| v.iter().any(|v| v.as_str() == Some(version::STATELESS)));
            if modern {
                Probe::Modern(result)
            } else {
                Probe::Legacy("server/discover result does not list 2026-07-28".into())
            }
        }
        Err(Error::HttpStatus {
            status: 400,
            rpc: Some(e),
        }) if [code::HEADER_MISMATCH, code::MISSING_CLIENT_CAPABILITY].contains(&e.code) => {
            Probe::Fatal(Error::Protocol(format!(
                "the server refused the stateless request: {e}"
            )))
        }
        Err(
            e @ Error::HttpStatus {
                status: 401 | 403, ..
            },
        ) => Probe::Fatal(e),
        Err(e @ (Error::HttpStatus { .. } | Error::Rpc { .. } | Error::Timeout { .. })) => {
            Probe::Legacy(e.to_string())
        }
        // A reply the client could not read: a legacy server answering something odd.
        Err(e @ Error::Protocol(_)) => Probe::Legacy(e.to_string()),
        Err(e) => Probe::Fatal(e),
    }
}

fn stateless_info(rpc: &Rpc, result: Value) -> SessionInfo {
    let server_info = result
        .pointer(&format!("/_meta/{}", META_SERVER_INFO.replace('/', "~1")))
        .or_else(|| result.get("serverInfo"))
        .cloned()
        .unwrap_or(Value::Null);
    SessionInfo {
        protocol_version: version::STATELESS.into(),
        stateless: true,
        transport: rpc.transport.kind(),
        server_info,
        capabilities: result.get("capabilities").cloned().unwrap_or(Value::Null),
        instructions: result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

async fn handshake(rpc: Arc<Rpc>, opts: &ConnectOptions) -> Result<SessionInfo, Error> {
    let result = rpc
        .request(
            "initialize",
            Some(initialize_params()),
            opts.request_timeout,
            None,
        )
        .await?;
    let Some(version) = result.get("protocolVersion").and_then(Value::as_str) else {
        return Err(Error::Protocol(
            "the initialize result has no protocolVersion".into(),
        ));
    };
    if !version::is_handshake(version) {
        return Err(Error::UnsupportedVersion(version.to_string()));
    }
    rpc.transport.set_negotiated(&Negotiated {
        protocol_version: Some(version.to_string()),
        stateless: false,
    });
    rpc.notify("notifications/initialized", None).await?;
    rpc.transport.start_listening().await;
    Ok(SessionInfo {
        protocol_version: version.to_string(),
        stateless: false,
        transport: rpc.transport.kind(),
        server_info: result.get("serverInfo").cloned().unwrap_or(Value::Null),
        capabilities: result.get("capabilities").cloned().unwrap_or(Value::Null),
        instructions: result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}
