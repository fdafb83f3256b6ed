//! The transport abstraction: how messages reach a server and come back.
//!
//! A transport sends with [`Transport::send`] and delivers everything the server says
//! (responses, server requests, notifications) to the session's inbound channel, so the
//! session's request/response matching is the same for stdio, Streamable HTTP and the
//! legacy HTTP+SSE transport.

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::jsonrpc::{Id, Message};
use crate::Error;

/// Which wire a session uses (what `/mcp` shows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportKind {
    Stdio,
    /// Streamable HTTP (2025-03-26 and later, including stateless 2026-07-28).
    Http,
    /// The deprecated HTTP+SSE transport (2024-11-05).
    Sse,
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TransportKind::Stdio => "stdio",
            TransportKind::Http => "http",
            TransportKind::Sse => "sse",
        })
    }
}

/// What a transport hands to its session.
#[derive(Debug)]
pub enum Inbound {
    Message(Message),
    /// The request `id` can no longer be answered (its response stream broke for good).
    RequestFailed {
        id: Id,
        error: Error,
    },
    /// The transport is gone; every pending request fails with this reason.
    Closed(String),
}

/// The sending half of a session's inbound channel.
pub type InboundTx = mpsc::Sender<Inbound>;

/// Capacity of the inbound channel: a flooding server is slowed down, not buffered.
pub(crate) const INBOUND_CAPACITY: usize = 256;

/// What the lifecycle decided, for transports whose framing depends on it (HTTP headers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Negotiated {
    /// Sent as `MCP-Protocol-Version` (HTTP) once known.
    pub protocol_version: Option<String>,
    /// 2026-07-28: no session, no GET stream, `Mcp-Method`/`Mcp-Name` headers.
    pub stateless: bool,
}

#[async_trait]
pub trait Transport: Send + Sync + 'static {
    fn kind(&self) -> TransportKind;

    /// Sends one message. For HTTP a request's reply (and anything the server sends on its
    /// response stream) is delivered to the inbound channel before this returns; dropping
    /// the future abandons the request (the stateless revision's cancellation).
    async fn send(&self, msg: &Message) -> Result<(), Error>;

    /// Applies the negotiated version / era.
    fn set_negotiated(&self, _negotiated: &Negotiated) {}

    /// Opens the optional server→client stream (Streamable HTTP after the handshake).
    async fn start_listening(&self) {}

    /// Ends the connection (stdio: close stdin, wait, kill; HTTP: DELETE the session).
    async fn close(&self);

    /// The server process id (stdio).
    fn process_id(&self) -> Option<u32> {
        None
    }

    /// The server's last stderr line (stdio), trimmed.
    fn last_stderr(&self) -> Option<String> {
        None
    }

    /// Total time spent authorizing so far; request timeouts do not count it.
    fn auth_time(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}
