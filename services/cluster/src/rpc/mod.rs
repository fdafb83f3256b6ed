//! Request/reply RPC between instances over Redis Streams.
//!
//! Every instance serves a request stream `lumina:{c}:rpc:{instance}` through a consumer
//! group and receives replies on its own stream `lumina:{c}:reply:{instance}`; replies are
//! routed to waiting callers by correlation id. Both streams are capped (`MAXLEN ~`) so a
//! dead peer cannot make them grow without bound.
//!
//! Callers add requests with `NOMKSTREAM`: only a serving instance creates its stream, so
//! calling an instance that never served, shut down, or was cleaned up by
//! [`recover_dead_instance`] fails at once instead of waiting for the timeout.
//!
//! A request carries its timeout, not a point in time: the server subtracts the time the
//! request waited in the stream, measured on Redis's clock ([`clock`]), so instance clocks
//! may disagree by any amount and no call is dropped or kept alive by a skewed clock. (The
//! wall-clock `deadline` field is still written for servers of the previous release, and
//! read from callers of it, during a rolling upgrade.)

mod client;
mod clock;
mod server;

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use uuid::Uuid;

pub use client::RpcClient;
pub use server::RpcServer;

use crate::conn::Redis;
use crate::error::Result;

/// The consumer group every request stream is read through.
const GROUP: &str = "lumina-rpc";

/// One request as the handler sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcRequest {
    /// Correlation id; the reply carries it back.
    pub id: Uuid,
    /// The calling instance (where the reply goes).
    pub from_instance: String,
    /// What to do.
    pub method: String,
    /// Arguments.
    pub payload: serde_json::Value,
    /// When the caller stops waiting, on this process's monotonic clock.
    pub deadline: Instant,
    /// W3C `traceparent` of the caller, carried opaquely.
    pub trace: Option<String>,
}

impl RpcRequest {
    /// Time left until the caller gives up (zero once the deadline has passed).
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Whether the caller has given up.
    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.deadline
    }
}

/// Serves requests. Implemented for every `Fn(RpcRequest) -> impl Future<Output =
/// Result<Value, HandlerError>>`; an `Err` reaches the caller as [`crate::ClusterError::Remote`].
///
/// Handlers run concurrently and are not cancelled at the deadline (they may not be
/// cancel-safe); a reply that comes too late is simply not sent.
pub trait RpcHandler: Send + Sync + 'static {
    /// Handles one request.
    fn handle(
        &self,
        request: RpcRequest,
    ) -> impl Future<Output = Result<serde_json::Value, HandlerError>> + Send;
}

impl<F, Fut> RpcHandler for F
where
    F: Fn(RpcRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<serde_json::Value, HandlerError>> + Send,
{
    fn handle(
        &self,
        request: RpcRequest,
    ) -> impl Future<Output = Result<serde_json::Value, HandlerError>> + Send {
        self(request)
    }
}

/// A handler's refusal: its message reaches the caller as [`crate::ClusterError::Remote`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HandlerError(pub String);

impl From<String> for HandlerError {
    fn from(message: String) -> Self {
        HandlerError(message)
    }
}

impl From<&str> for HandlerError {
    fn from(message: &str) -> Self {
        HandlerError(message.to_owned())
    }
}

/// RPC settings shared by client and server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RpcOptions {
    /// Requests handled at once by one server. Default 64.
    pub max_concurrency: usize,
    /// Approximate cap of request and reply streams (`MAXLEN ~`). Default 10000.
    pub stream_maxlen: usize,
    /// A request read but not acknowledged for this long is claimed again (it was read by a
    /// crashed incarnation of this instance). Default 10000 ms.
    pub claim_min_idle_ms: u64,
    /// How often the server looks for such requests. Default 5000 ms.
    pub claim_interval_ms: u64,
}

impl Default for RpcOptions {
    fn default() -> Self {
        RpcOptions {
            max_concurrency: 64,
            stream_maxlen: 10_000,
            claim_min_idle_ms: 10_000,
            claim_interval_ms: 5_000,
        }
    }
}

/// Deletes a dead instance's request and reply streams so callers fail fast instead of
/// queueing requests nobody will read. Returns how many requests were still queued.
///
/// Only call this for an instance the registry no longer lists as live: a live server
/// recreates its stream on its next read, but requests queued meanwhile are lost.
pub async fn recover_dead_instance(redis: &Redis, dead_id: &str) -> Result<u64> {
    let keys = redis.keys();
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("XLEN")
        .arg(keys.rpc(dead_id))
        .cmd("DEL")
        .arg(keys.rpc(dead_id))
        .ignore()
        .cmd("DEL")
        .arg(keys.reply(dead_id))
        .ignore();
    let (queued,): (u64,) = redis.query_pipe(&pipe).await?;
    tracing::info!(
        instance_id = dead_id,
        queued,
        "rpc streams of dead instance removed"
    );
    Ok(queued)
}

/// Wall-clock milliseconds since the Unix epoch (only for the previous release's `deadline`).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Field names of request and reply entries.
mod field {
    pub const ID: &str = "id";
    pub const FROM: &str = "from";
    pub const METHOD: &str = "method";
    pub const PAYLOAD: &str = "payload";
    /// Wall-clock deadline, Unix epoch milliseconds (the previous release's only field).
    pub const DEADLINE: &str = "deadline";
    /// Milliseconds the caller waits, counted from the entry's id on Redis's clock.
    pub const TIMEOUT: &str = "timeout";
    pub const TRACE: &str = "trace";
    pub const OK: &str = "ok";
    pub const ERR: &str = "err";
}
