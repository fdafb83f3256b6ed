//! `idle` (open N connections, hello, hold them, measure the server's RSS per connection)
//! and `connect-storm` (N connects as fast as possible).
//!
//! With `bind_ips`, connections are opened from those loopback source addresses in turn, so
//! more than one address's ~28k ephemeral ports are available. `lumina_client::Client` has
//! no way to choose the source address, so those connections are made here directly with
//! tokio-tungstenite: the same upgrade (bearer header) and `hello` frame, then a task that
//! only reads (answering pings) until the hold ends.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::{SinkExt as _, StreamExt as _};
use lumina_client::Client;
use serde::Serialize;
use tokio::net::TcpSocket;
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::{header::AUTHORIZATION, HeaderValue};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::{base_report, check_count, check_secs, secs, Ctx, MAX_CONNECTIONS};
use crate::error::{Error, Result};
use crate::metrics;
use crate::progress::Progress;
use crate::report::{IdleDetails, Report, StormDetails};

/// `idle` options.
#[derive(Debug, Clone, Serialize)]
pub struct IdleOptions {
    pub connections: usize,
    pub hold_secs: f64,
    /// Loopback source addresses, used in turn (empty: the kernel's choice).
    pub bind_ips: Vec<IpAddr>,
}

/// `connect-storm` options.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectStormOptions {
    pub connections: usize,
    /// Connects in flight at once (0: all of them).
    pub concurrency: usize,
    pub bind_ips: Vec<IpAddr>,
}

/// Ends the hold of the raw connections.
#[derive(Clone)]
struct CancelFlag(Arc<watch::Sender<bool>>);

impl CancelFlag {
    fn new() -> CancelFlag {
        CancelFlag(Arc::new(watch::channel(false).0))
    }

    fn cancel(&self) {
        self.0.send_replace(true);
    }

    async fn cancelled(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|v| *v).await;
    }
}

/// A held connection.
enum Held {
    Client(Client),
    Raw,
}

/// `VmRSS` of `pid` in KiB, from `/proc/<pid>/status`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The soft limit on open files of this process.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

fn check_fd_limit(connections: usize) -> Result<()> {
    if let Some(limit) = open_files_limit() {
        let needed = connections as u64 + 64;
        if needed > limit {
            return Err(Error::Input(format!(
                "{connections} connections need about {needed} open files but the limit is \
                 {limit}; raise it first (ulimit -n {needed})"
            )));
        }
    }
    Ok(())
}

/// Connects one raw WebSocket from `local` and says hello. Returns the time to the upgrade
/// and to the `hello` response.
async fn connect_bound(
    ctx: &Ctx,
    url: &str,
    local: IpAddr,
    shutdown: CancelFlag,
    closed_early: Arc<AtomicU64>,
) -> std::result::Result<(Duration, Duration), RawError> {
    let parsed = url::Url::parse(url)?;
    let host = parsed.host_str().unwrap_or("127.0.0.1");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = if host.eq_ignore_ascii_case("localhost") {
        IpAddr::from([127, 0, 0, 1])
    } else {
        host.parse()
            .map_err(|_| RawError::NotAnAddress(host.to_string()))?
    };
    let port = parsed.port_or_known_default().unwrap_or(80);
    let start = Instant::now();
    let socket = if ip.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(RawError::Socket)?;
    socket
        .bind(SocketAddr::new(local, 0))
        .map_err(|source| RawError::Bind { local, source })?;
    let connect_timeout = ctx.connector.options.connect_timeout;
    let stream = tokio::time::timeout(connect_timeout, socket.connect(SocketAddr::new(ip, port)))
        .await
        .map_err(|_| RawError::Timeout("connect"))?
        .map_err(RawError::Connect)?;
    let mut request = url.into_client_request().map_err(RawError::Request)?;
    if let Some(token) = ctx.target().bearer() {
        let mut value =
            HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| RawError::Token)?;
        value.set_sensitive(true);
        request.headers_mut().insert(AUTHORIZATION, value);
    }
    let (mut ws, _) = tokio::time::timeout(
        connect_timeout,
        tokio_tungstenite::client_async(request, stream),
    )
    .await
    .map_err(|_| RawError::Timeout("upgrade"))?
    .map_err(RawError::Upgrade)?;
    let connected = start.elapsed();
    let hello_start = Instant::now();
    let hello = serde_json::json!({
        "id": "hello", "method": "hello",
        "params": {"protocols": [lumina_client::protocol::PROTOCOL_VERSION], "client": "lumina-loadtest"}
    });
    ws.send(Message::text(hello.to_string()))
        .await
        .map_err(RawError::Send)?;
    let answered = tokio::time::timeout(ctx.connector.options.call_timeout, async {
        while let Some(message) = ws.next().await {
            if let Ok(Message::Text(text)) = message {
                let value: serde_json::Value =
                    serde_json::from_str(text.as_str()).unwrap_or_default();
                if value.get("id").and_then(|v| v.as_str()) == Some("hello") {
                    return value.get("type").and_then(|v| v.as_str()) == Some("response");
                }
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    if !answered {
        return Err(RawError::NoHello);
    }
    let hello_time = hello_start.elapsed();
    tokio::spawn(async move {
        tokio::select! {
            _ = shutdown.cancelled() => {
                let _ = ws.close(None).await;
            }
            _ = async {
                while let Some(Ok(message)) = ws.next().await {
                    if matches!(message, Message::Close(_)) {
                        break;
                    }
                }
            } => {
                closed_early.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    Ok((connected, hello_time))
}

/// Opens connection `i` (client or raw) and counts failures.
async fn open_one(
    ctx: &Ctx,
    i: usize,
    bind_ips: &[IpAddr],
    shutdown: &CancelFlag,
    closed_early: &Arc<AtomicU64>,
) -> Option<Held> {
    let url = ctx.target().url(i).to_string();
    if bind_ips.is_empty() {
        return match ctx.connector.connect(&url, &ctx.metrics).await {
            Ok((client, _notes)) => Some(Held::Client(client)),
            Err(_) => None,
        };
    }
    let local = bind_ips[i % bind_ips.len()];
    match connect_bound(ctx, &url, local, shutdown.clone(), Arc::clone(closed_early)).await {
        Ok((connected, hello)) => {
            ctx.metrics.record(metrics::CONNECT, connected);
            ctx.metrics.record(metrics::HELLO, hello);
            Some(Held::Raw)
        }
        Err(error) => {
            ctx.metrics.error(&format!("connect:{}", error.kind()));
            None
        }
    }
}

/// Why one raw connection (`--bind-ips`) failed.
#[derive(Debug, thiserror::Error)]
enum RawError {
    #[error("invalid URL: {0}")]
    Url(#[from] url::ParseError),
    #[error("{0} is not an IP address")]
    NotAnAddress(String),
    #[error("socket: {0}")]
    Socket(#[source] std::io::Error),
    #[error("bind {local}: {source}")]
    Bind {
        local: IpAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} timed out")]
    Timeout(&'static str),
    #[error("connect: {0}")]
    Connect(#[source] std::io::Error),
    #[error("request: {0}")]
    Request(#[source] WsError),
    #[error("the token cannot be sent in a header")]
    Token,
    #[error("upgrade: {0}")]
    Upgrade(#[source] WsError),
    #[error("send: {0}")]
    Send(#[source] WsError),
    #[error("hello was not answered")]
    NoHello,
}

impl RawError {
    /// The report's error kind: `timeout`, `unauthorized`, `bind` or `connect`.
    fn kind(&self) -> &'static str {
        match self {
            RawError::Timeout(_) => "timeout",
            RawError::Upgrade(WsError::Http(response)) if response.status() == 401 => {
                "unauthorized"
            }
            RawError::Bind { .. } => "bind",
            _ => "connect",
        }
    }
}

async fn open_many(
    ctx: &Ctx,
    n: usize,
    concurrency: usize,
    bind_ips: &[IpAddr],
    shutdown: &CancelFlag,
    closed_early: &Arc<AtomicU64>,
    label: &str,
) -> Vec<Held> {
    let progress = Progress::new(ctx.progress, n as u64, label);
    let held: Vec<Option<Held>> = futures::stream::iter(0..n)
        .map(|i| {
            let progress = progress.clone();
            async move {
                let held = open_one(ctx, i, bind_ips, shutdown, closed_early).await;
                progress.inc(1);
                held
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    progress.finish();
    held.into_iter().flatten().collect()
}

fn close_all(held: &[Held], shutdown: &CancelFlag) {
    shutdown.cancel();
    for h in held {
        if let Held::Client(client) = h {
            client.close();
        }
    }
}

pub(crate) async fn idle(
    ctx: &Ctx,
    o: &IdleOptions,
    name: &str,
    started: (SystemTime, Instant),
) -> Result<Report> {
    check_count("--connections", o.connections, MAX_CONNECTIONS)?;
    check_secs("--hold", o.hold_secs)?;
    check_fd_limit(o.connections)?;
    ctx.preflight().await?;
    let pid = ctx.target().server_pid;
    let rss_before = pid.and_then(rss_kib);
    if pid.is_some() && rss_before.is_none() {
        return Err(Error::Input(format!(
            "cannot read /proc/{}/status (is --server-pid a running process?)",
            pid.unwrap_or_default()
        )));
    }
    let shutdown = CancelFlag::new();
    let closed_early = Arc::new(AtomicU64::new(0));
    let held = open_many(
        ctx,
        o.connections,
        ctx.common.connect_concurrency,
        &o.bind_ips,
        &shutdown,
        &closed_early,
        "connect",
    )
    .await;
    // Let the server settle (allocations of the last upgrades) before reading its RSS.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_after = pid.and_then(rss_kib);
    let hold = secs(o.hold_secs);
    let progress = Progress::new(ctx.progress, hold.as_secs().max(1), "hold (s)");
    let hold_start = Instant::now();
    while hold_start.elapsed() < hold {
        tokio::time::sleep(Duration::from_millis(250).min(hold)).await;
        progress.set_position(hold_start.elapsed().as_secs());
    }
    progress.finish();
    let client_closed = held
        .iter()
        .filter(|h| matches!(h, Held::Client(c) if c.is_closed()))
        .count() as u64;
    let early = client_closed + closed_early.load(Ordering::Relaxed);
    if early > 0 {
        ctx.metrics.count("closed_early", early);
        ctx.metrics.error("closed_during_hold");
    }
    close_all(&held, &shutdown);
    let open = held.len() as u64;
    ctx.metrics.count("connections_open", open);
    let kib_per_connection = match (rss_before, rss_after) {
        (Some(before), Some(after)) if open > 0 => {
            Some((after as f64 - before as f64) / open as f64)
        }
        _ => None,
    };
    let mut report = base_report(ctx, name, o, started);
    report.idle = Some(IdleDetails {
        connections_requested: o.connections as u64,
        connections_open: open,
        closed_early: early,
        hold_ms: u64::try_from(hold.as_millis()).unwrap_or(u64::MAX),
        bind_ips: o.bind_ips.iter().map(ToString::to_string).collect(),
        server_pid: pid,
        rss_before_kib: rss_before,
        rss_after_kib: rss_after,
        kib_per_connection,
    });
    // Give the close handshakes a moment so the server is not left with half the sockets.
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(report)
}

pub(crate) async fn storm(
    ctx: &Ctx,
    o: &ConnectStormOptions,
    name: &str,
    started: (SystemTime, Instant),
) -> Result<Report> {
    check_count("--connections", o.connections, MAX_CONNECTIONS)?;
    check_fd_limit(o.connections)?;
    ctx.preflight().await?;
    let concurrency = if o.concurrency == 0 {
        o.connections
    } else {
        o.concurrency
    };
    let shutdown = CancelFlag::new();
    let closed_early = Arc::new(AtomicU64::new(0));
    let wall = Instant::now();
    let held = open_many(
        ctx,
        o.connections,
        concurrency,
        &o.bind_ips,
        &shutdown,
        &closed_early,
        "storm",
    )
    .await;
    let wall = wall.elapsed();
    close_all(&held, &shutdown);
    let connected = held.len() as u64;
    let mut report = base_report(ctx, name, o, started);
    report.storm = Some(StormDetails {
        connections_requested: o.connections as u64,
        connected,
        concurrency: concurrency as u64,
        wall_ms: u64::try_from(wall.as_millis()).unwrap_or(u64::MAX),
        connects_per_sec: connected as f64 / wall.as_secs_f64().max(1e-6),
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(report)
}
