//! [`Proxy`]: the browser's only way to the network. Chromium is started with
//! `--proxy-server=socks5://127.0.0.1:PORT` and no bypass, not even for loopback, so every
//! TCP connection it opens — page loads, sub-resources, WebSockets, preconnects — arrives
//! here with the host it wants (a SOCKS5 proxy resolves names for Chromium). The
//! [`RequestGuard`] resolves the host once and vets every address
//! ([`RequestGuard::connection`]); the proxy connects to those addresses and no others. No
//! second resolution happens anywhere, so a name whose answers change between two lookups
//! (DNS rebinding) cannot reach an address that was not vetted.
//!
//! Only CONNECT without authentication is served; `fast-socks5` parses the handshake and the
//! request (hostile bytes from the page's side get a protocol error, never a panic). A
//! refusal is logged (host, port, reason), answered with "connection not allowed by
//! ruleset" and kept for the next [`crate::PageState::blocked`].

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fast_socks5::server::Socks5ServerProtocol;
use fast_socks5::{ReplyError, Socks5Command};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::events::{lock, note_blocked};
use crate::{Blocked, Connection, RequestGuard};

/// Connections served at once at most; more are closed at once (Chromium opens far fewer).
const MAX_CONNECTIONS: usize = 256;

type Refused = Arc<Mutex<Vec<Blocked>>>;

/// A running SOCKS5 proxy on `127.0.0.1` and a free port. Stopping it ([`Proxy::stop`]) or
/// dropping it closes the port and every connection it relays.
pub struct Proxy {
    addr: SocketAddr,
    refused: Refused,
    task: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listens on a free loopback port and serves each connection as `guard` decides.
    /// `timeout` bounds the handshake, the guard's decision and each connection attempt.
    pub async fn start(guard: Arc<dyn RequestGuard>, timeout: Duration) -> io::Result<Proxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let refused = Refused::default();
        let task = tokio::spawn(serve(listener, guard, refused.clone(), timeout));
        tracing::debug!(%addr, "browser proxy listening");
        Ok(Proxy {
            addr,
            refused,
            task: Some(task),
        })
    }

    /// Where it listens (`--proxy-server=socks5://<addr>`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The connections refused since the previous call.
    pub fn take_refused(&self) -> Vec<Blocked> {
        std::mem::take(&mut *lock(&self.refused))
    }

    /// Closes the port and every relayed connection, and waits until they are gone.
    pub async fn stop(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Accepts connections until aborted; the connections' tasks live in a `JoinSet` owned
/// here, so aborting this task drops (and so aborts) all of them.
async fn serve(
    listener: TcpListener,
    guard: Arc<dyn RequestGuard>,
    refused: Refused,
    timeout: Duration,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) if connections.len() < MAX_CONNECTIONS => {
                    connections.spawn(relay(stream, guard.clone(), refused.clone(), timeout));
                }
                Ok(_) => tracing::warn!("browser proxy: too many connections, one closed"),
                Err(e) => {
                    // Out of file descriptors and the like: do not spin.
                    tracing::debug!(error = %e, "browser proxy: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Serves one client: the handshake, the CONNECT request, the guard's decision, the
/// connection to a vetted address, then bytes both ways until either side closes.
async fn relay(
    client: TcpStream,
    guard: Arc<dyn RequestGuard>,
    refused: Refused,
    timeout: Duration,
) {
    let request = tokio::time::timeout(timeout, async {
        Socks5ServerProtocol::accept_no_auth(client)
            .await?
            .read_command()
            .await
    })
    .await;
    let (proto, command, target) = match request {
        Ok(Ok(request)) => request,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "browser proxy: not a valid SOCKS5 request");
            return;
        }
        Err(_) => {
            tracing::debug!("browser proxy: the request did not arrive in time");
            return;
        }
    };
    if command != Socks5Command::TCPConnect {
        tracing::debug!(?command, "browser proxy: only CONNECT is served");
        let _ = proto.reply_error(&ReplyError::CommandNotSupported).await;
        return;
    }
    let (host, port) = target.into_string_and_port();
    let verdict = tokio::time::timeout(timeout, guard.connection(&host, port))
        .await
        .unwrap_or_else(|_| Connection::Refused("checking its address timed out".into()));
    let addrs = match verdict {
        Connection::To(addrs) => addrs,
        Connection::Refused(reason) => {
            tracing::info!(host, port, reason, "browser connection blocked");
            let url = match host.parse::<std::net::IpAddr>() {
                Ok(ip) => SocketAddr::new(ip, port).to_string(),
                Err(_) => format!("{host}:{port}"),
            };
            note_blocked(&mut lock(&refused), Blocked { url, reason });
            let _ = proto.reply_error(&ReplyError::ConnectionNotAllowed).await;
            return;
        }
    };
    let Some(mut upstream) = connect_first(&addrs, timeout).await else {
        tracing::debug!(
            host,
            port,
            "browser proxy: no vetted address accepted the connection"
        );
        let _ = proto.reply_error(&ReplyError::HostUnreachable).await;
        return;
    };
    let bound = upstream
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
    let Ok(mut client) = proto.reply_success(bound).await else {
        return;
    };
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        tracing::trace!(host, port, error = %e, "browser proxy: relay ended");
    }
}

/// A connection to the first of `addrs` that accepts one (each attempt bounded by `timeout`).
async fn connect_first(addrs: &[SocketAddr], timeout: Duration) -> Option<TcpStream> {
    for addr in addrs {
        match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Some(stream),
            Ok(Err(e)) => tracing::debug!(%addr, error = %e, "browser proxy: connect failed"),
            Err(_) => tracing::debug!(%addr, "browser proxy: connect timed out"),
        }
    }
    None
}

#[cfg(test)]
mod tests;
