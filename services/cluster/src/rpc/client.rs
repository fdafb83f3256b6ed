//! The calling side: adds requests to a target's stream and waits for the reply, which one
//! background reader per instance takes from the instance's reply stream and routes to the
//! waiting call by correlation id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::streams::StreamReadReply;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{debug, instrument, warn};
use uuid::Uuid;

use super::{field, now_ms, HandlerError, RpcOptions};
use crate::conn::{BlockingConn, Redis};
use crate::error::{ClusterError, Result};

/// Replies read at once by the reader.
const READ_COUNT: usize = 256;

type Reply = std::result::Result<serde_json::Value, HandlerError>;
type Pending = Mutex<HashMap<Uuid, oneshot::Sender<Reply>>>;

/// Calls other instances. Cheap to clone; the reply reader stops when the last clone is
/// dropped.
#[derive(Clone)]
pub struct RpcClient {
    inner: Arc<Inner>,
    _stop: Arc<DropGuard>,
}

struct Inner {
    redis: Redis,
    instance_id: String,
    options: RpcOptions,
    pending: Pending,
}

impl std::fmt::Debug for RpcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcClient")
            .field("instance_id", &self.inner.instance_id)
            .finish_non_exhaustive()
    }
}

fn lock(pending: &Pending) -> std::sync::MutexGuard<'_, HashMap<Uuid, oneshot::Sender<Reply>>> {
    // A map of senders stays usable even if a holder panicked.
    pending.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RpcClient {
    /// Starts the reply reader of `instance_id`.
    pub fn start(redis: Redis, instance_id: &str, options: RpcOptions) -> Result<RpcClient> {
        let conn = redis.blocking()?;
        let inner = Arc::new(Inner {
            redis,
            instance_id: instance_id.to_owned(),
            options,
            pending: Mutex::new(HashMap::new()),
        });
        let cancel = CancellationToken::new();
        tokio::spawn(read_replies(inner.clone(), conn, cancel.clone()));
        Ok(RpcClient {
            inner,
            _stop: Arc::new(cancel.drop_guard()),
        })
    }

    /// The instance replies come back to.
    pub fn instance_id(&self) -> &str {
        &self.inner.instance_id
    }

    /// Calls `method` on `target` and waits up to `timeout` for the reply.
    ///
    /// Fails with [`ClusterError::Unavailable`] when Redis cannot be reached or `target`
    /// serves no RPC stream, [`ClusterError::Timeout`] when no reply came in time, and
    /// [`ClusterError::Remote`] when the handler returned an error.
    pub async fn call(
        &self,
        target: &str,
        method: &str,
        payload: serde_json::Value,
        timeout: Duration,
    ) -> Result<serde_json::Value> {
        self.call_traced(target, method, payload, timeout, None)
            .await
    }

    /// [`RpcClient::call`] carrying a W3C `traceparent` to the handler.
    #[instrument(skip_all, fields(instance_id = %self.inner.instance_id, target = %target, method = %method, id))]
    pub async fn call_traced(
        &self,
        target: &str,
        method: &str,
        payload: serde_json::Value,
        timeout: Duration,
        trace: Option<&str>,
    ) -> Result<serde_json::Value> {
        let deadline = Instant::now() + timeout;
        let id = Uuid::new_v4();
        tracing::Span::current().record("id", tracing::field::display(id));
        let payload = serde_json::to_string(&payload)
            .map_err(|err| ClusterError::protocol(format!("encoding rpc payload: {err}")))?;
        let deadline_ms = now_ms() + timeout.as_millis() as u64;

        // Registered before the request exists, so even an instant reply finds its waiter;
        // the guard removes it however this call ends (including being dropped).
        let (tx, rx) = oneshot::channel();
        lock(&self.inner.pending).insert(id, tx);
        let _guard = PendingGuard {
            pending: &self.inner.pending,
            id,
        };

        let mut xadd = redis::cmd("XADD");
        xadd.arg(self.inner.redis.keys().rpc(target))
            .arg("NOMKSTREAM")
            .arg("MAXLEN")
            .arg("~")
            .arg(self.inner.options.stream_maxlen)
            .arg("*")
            .arg(field::ID)
            .arg(id.to_string())
            .arg(field::FROM)
            .arg(&self.inner.instance_id)
            .arg(field::METHOD)
            .arg(method)
            .arg(field::PAYLOAD)
            .arg(payload)
            .arg(field::TIMEOUT)
            .arg(timeout.as_millis() as u64)
            .arg(field::DEADLINE)
            .arg(deadline_ms);
        if let Some(trace) = trace {
            xadd.arg(field::TRACE).arg(trace);
        }
        let added: Option<String> =
            match tokio::time::timeout_at(deadline, self.inner.redis.query(&xadd)).await {
                Ok(added) => added?,
                Err(_) => return Err(ClusterError::Timeout),
            };
        if added.is_none() {
            debug!(target, "rpc target has no request stream");
            return Err(ClusterError::Unavailable(format!(
                "instance {target} is not serving rpc"
            )));
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(HandlerError(message)))) => Err(ClusterError::Remote(message)),
            Ok(Err(_)) => Err(ClusterError::Unavailable(
                "rpc reply reader stopped".to_owned(),
            )),
            Err(_) => {
                debug!(target, method, "rpc call timed out");
                Err(ClusterError::Timeout)
            }
        }
    }
}

struct PendingGuard<'a> {
    pending: &'a Pending,
    id: Uuid,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(self.pending).remove(&self.id);
    }
}

/// Reads the reply stream and completes waiting calls, until cancelled.
///
/// Plain `XREAD` from the last seen id (no consumer group): only this process reads its
/// reply stream, and starting at `0-0` just replays stale replies nobody waits for.
/// Consumed entries are deleted so the stream stays small.
async fn read_replies(inner: Arc<Inner>, mut conn: BlockingConn, cancel: CancellationToken) {
    let key = inner.redis.keys().reply(&inner.instance_id);
    let block_ms = inner.redis.options().block_ms;
    let mut last_id = "0-0".to_owned();
    let mut failing = false;
    loop {
        let mut xread = redis::cmd("XREAD");
        xread
            .arg("COUNT")
            .arg(READ_COUNT)
            .arg("BLOCK")
            .arg(block_ms)
            .arg("STREAMS")
            .arg(&key)
            .arg(&last_id);
        // Cancelling a plain XREAD loses nothing: no group state is kept server-side.
        let read: Result<Option<StreamReadReply>> = tokio::select! {
            () = cancel.cancelled() => return,
            read = conn.query(&xread) => read,
        };
        match read {
            Ok(reply) => {
                if failing {
                    debug!(instance_id = %inner.instance_id, "rpc reply reader recovered");
                    failing = false;
                }
                let ids = dispatch(&inner, reply.unwrap_or_default(), &mut last_id);
                if !ids.is_empty() {
                    let redis = inner.redis.clone();
                    let key = key.clone();
                    // Off the hot path: the next read need not wait for the cleanup.
                    tokio::spawn(async move {
                        let _ = redis
                            .query::<i64>(redis::cmd("XDEL").arg(&key).arg(&ids))
                            .await;
                    });
                }
            }
            Err(err) => {
                if !failing {
                    warn!(instance_id = %inner.instance_id, error = %err, "rpc reply reader failing");
                    failing = true;
                }
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
        }
    }
}

/// Hands each reply to its waiting call; returns the entry ids read.
fn dispatch(inner: &Inner, reply: StreamReadReply, last_id: &mut String) -> Vec<String> {
    let mut ids = Vec::new();
    for entry in reply.keys.into_iter().flat_map(|k| k.ids) {
        *last_id = entry.id.clone();
        let correlation = entry
            .get::<String>(field::ID)
            .and_then(|id| Uuid::parse_str(&id).ok());
        let outcome: Option<Reply> = if let Some(ok) = entry.get::<String>(field::OK) {
            Some(
                serde_json::from_str(&ok)
                    .map_err(|err| HandlerError(format!("undecodable reply: {err}"))),
            )
        } else {
            entry
                .get::<String>(field::ERR)
                .map(|message| Err(HandlerError(message)))
        };
        match (correlation, outcome) {
            (Some(id), Some(outcome)) => {
                if let Some(tx) = lock(&inner.pending).remove(&id) {
                    // The caller may have given up at this very moment; nothing to do then.
                    let _ = tx.send(outcome);
                }
            }
            _ => warn!(instance_id = %inner.instance_id, entry = %entry.id, "malformed rpc reply"),
        }
        ids.push(entry.id);
    }
    ids
}
