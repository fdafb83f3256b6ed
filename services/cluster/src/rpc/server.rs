//! The serving side: reads the instance's request stream through a consumer group, runs the
//! handler concurrently (bounded by a semaphore), writes replies and acknowledges.
//!
//! Entries are acknowledged and deleted only after the reply is written, so a crash leaves
//! them pending; the next incarnation with the same instance id claims them (`XAUTOCLAIM`)
//! and either serves them or, once their timeout has passed (on Redis's clock: see
//! [`super::clock`]), drops them. A Redis restart
//! loses the stream and its group; the server notices `NOGROUP` and recreates both.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, instrument, warn, Instrument};
use uuid::Uuid;

use super::clock::RedisClock;
use super::{field, now_ms, HandlerError, RpcHandler, RpcOptions, RpcRequest, GROUP};
use crate::conn::Redis;
use crate::error::{is_missing_group, ClusterError, Result};

/// Most entries taken by one read or claim.
const READ_COUNT: usize = 128;

/// Serves one instance's request stream with handler `H`.
pub struct RpcServer<H> {
    redis: Redis,
    instance_id: String,
    handler: Arc<H>,
    options: RpcOptions,
}

impl<H> std::fmt::Debug for RpcServer<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcServer")
            .field("instance_id", &self.instance_id)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// What request tasks share with the read loop.
struct Shared<H> {
    redis: Redis,
    key: String,
    handler: Arc<H>,
    options: RpcOptions,
    /// Entry ids being handled right now; a claim sweep must not hand them out twice.
    in_flight: Mutex<HashSet<String>>,
    /// Redis's clock, read on every claim sweep: how long a request waited.
    clock: RedisClock,
}

impl<H: RpcHandler> RpcServer<H> {
    /// Creates `instance_id`'s request stream and consumer group, so calls are accepted
    /// from the moment this returns (they queue until [`RpcServer::run`] reads them).
    #[instrument(skip_all, fields(instance_id = %instance_id))]
    pub async fn bind(
        redis: Redis,
        instance_id: &str,
        handler: H,
        options: RpcOptions,
    ) -> Result<Self> {
        ensure_group(&redis, &redis.keys().rpc(instance_id)).await?;
        Ok(RpcServer {
            redis,
            instance_id: instance_id.to_owned(),
            handler: Arc::new(handler),
            options,
        })
    }

    /// Serves until `shutdown` is cancelled, then finishes the requests in hand and deletes
    /// the request stream so callers fail fast until the instance serves again.
    ///
    /// Redis failures are logged and retried, never returned. An in-flight blocking read is
    /// not cancelled (entries it returned would be left pending), so shutdown may take up to
    /// the BLOCK time. Dropping the future instead (a crash) aborts running handlers and
    /// leaves their requests pending for the next incarnation.
    pub async fn run(self, shutdown: CancellationToken) {
        let shared = Arc::new(Shared {
            key: self.redis.keys().rpc(&self.instance_id),
            redis: self.redis.clone(),
            handler: self.handler,
            options: self.options,
            in_flight: Mutex::new(HashSet::new()),
            clock: RedisClock::default(),
        });
        let me = self.instance_id;
        info!(instance_id = %me, "rpc server started");
        let mut conn = match self.redis.blocking() {
            Ok(conn) => conn,
            Err(err) => {
                // Only a client-side configuration error gets here; bind() succeeded with
                // the same settings.
                warn!(instance_id = %me, error = %err, "rpc server cannot open its connection");
                return;
            }
        };
        let permits = Arc::new(Semaphore::new(shared.options.max_concurrency.max(1)));
        let mut tasks = JoinSet::new();
        let claim_every = Duration::from_millis(shared.options.claim_interval_ms.max(1));
        // Claim at once: a restarted instance finds what its previous incarnation read.
        let mut next_claim = Instant::now();
        let mut failing = false;

        while !shutdown.is_cancelled() {
            while tasks.try_join_next().is_some() {}
            if Instant::now() >= next_claim {
                next_claim = Instant::now() + claim_every;
                if let Err(err) = shared.clock.refresh(&shared.redis).await {
                    debug!(instance_id = %me, error = %err, "reading the redis clock failed");
                }
                match claim_pending(&shared, &me).await {
                    Ok(entries) => spawn_all(&shared, &permits, &mut tasks, &me, entries),
                    Err(err) if is_missing_group(&err) => {
                        let _ = ensure_group(&shared.redis, &shared.key).await;
                    }
                    Err(err) => debug!(instance_id = %me, error = %err, "rpc claim sweep failed"),
                }
            }
            // Read only as many entries as can start at once; the rest stay in the stream.
            let free = tokio::select! {
                () = shutdown.cancelled() => break,
                permit = permits.clone().acquire_owned() => match permit {
                    Ok(p) => { drop(p); permits.available_permits().clamp(1, READ_COUNT) }
                    Err(_) => break,
                },
            };
            let mut read = redis::cmd("XREADGROUP");
            read.arg("GROUP")
                .arg(GROUP)
                .arg(&me)
                .arg("COUNT")
                .arg(free)
                .arg("BLOCK")
                .arg(self.redis.options().block_ms)
                .arg("STREAMS")
                .arg(&shared.key)
                .arg(">");
            match conn.query::<Option<StreamReadReply>>(&read).await {
                Ok(reply) => {
                    if failing {
                        info!(instance_id = %me, "rpc server reading again");
                        failing = false;
                    }
                    let entries = reply
                        .map(|r| r.keys.into_iter().flat_map(|k| k.ids).collect())
                        .unwrap_or_default();
                    spawn_all(&shared, &permits, &mut tasks, &me, entries);
                }
                Err(err) if is_missing_group(&err) => {
                    // Redis lost the stream (restart) or someone deleted it: serve again.
                    warn!(instance_id = %me, "rpc stream or group missing, recreating");
                    if let Err(err) = ensure_group(&shared.redis, &shared.key).await {
                        failing = true;
                        warn!(instance_id = %me, error = %err, "recreating rpc group failed");
                        pause(&shutdown).await;
                    }
                }
                Err(err) => {
                    if !failing {
                        warn!(instance_id = %me, error = %err, "rpc server read failing");
                        failing = true;
                    }
                    pause(&shutdown).await;
                }
            }
        }

        while tasks.join_next().await.is_some() {}
        if let Err(err) = shared
            .redis
            .query::<i64>(redis::cmd("DEL").arg(&shared.key))
            .await
        {
            warn!(instance_id = %me, error = %err, "deleting rpc stream on shutdown failed");
        }
        info!(instance_id = %me, "rpc server stopped");
    }
}

async fn pause(shutdown: &CancellationToken) {
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = tokio::time::sleep(Duration::from_millis(200)) => {}
    }
}

/// Creates the stream and its group (reading from the start: with `NOMKSTREAM` callers, a
/// fresh stream holds only requests meant for us). An existing group is kept.
async fn ensure_group(redis: &Redis, key: &str) -> Result<()> {
    let mut create = redis::cmd("XGROUP");
    create
        .arg("CREATE")
        .arg(key)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM");
    match redis.query::<()>(&create).await {
        Ok(()) => Ok(()),
        Err(ClusterError::Protocol(message)) if message.starts_with("BUSYGROUP") => Ok(()),
        Err(err) => Err(err),
    }
}

/// Claims entries read but left unacknowledged for longer than `claim_min_idle_ms`, except
/// those this server is handling right now.
async fn claim_pending<H>(shared: &Shared<H>, me: &str) -> Result<Vec<StreamId>> {
    let mut claimed = Vec::new();
    let mut cursor = "0-0".to_owned();
    // Bounded so a huge backlog cannot stall reading new requests.
    for _ in 0..8 {
        let mut cmd = redis::cmd("XAUTOCLAIM");
        cmd.arg(&shared.key)
            .arg(GROUP)
            .arg(me)
            .arg(shared.options.claim_min_idle_ms)
            .arg(&cursor)
            .arg("COUNT")
            .arg(READ_COUNT);
        let reply: StreamAutoClaimReply = shared.redis.query(&cmd).await?;
        {
            let in_flight = lock(&shared.in_flight);
            claimed.extend(
                reply
                    .claimed
                    .into_iter()
                    .filter(|e| !in_flight.contains(&e.id)),
            );
        }
        cursor = reply.next_stream_id;
        if cursor == "0-0" {
            break;
        }
    }
    if !claimed.is_empty() {
        info!(
            instance_id = me,
            count = claimed.len(),
            "claimed unacknowledged rpc requests"
        );
    }
    Ok(claimed)
}

fn lock(set: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
    // A set of ids stays consistent even if a holder panicked.
    set.lock().unwrap_or_else(PoisonError::into_inner)
}

fn spawn_all<H: RpcHandler>(
    shared: &Arc<Shared<H>>,
    permits: &Arc<Semaphore>,
    tasks: &mut JoinSet<()>,
    me: &str,
    entries: Vec<StreamId>,
) {
    for entry in entries {
        if !lock(&shared.in_flight).insert(entry.id.clone()) {
            continue;
        }
        // Claimed entries may exceed the free permits; they then wait for one in their own
        // task instead of blocking the read loop.
        let held = permits.clone().try_acquire_owned().ok();
        let permits = permits.clone();
        let shared = shared.clone();
        let me = me.to_owned();
        tasks.spawn(async move {
            let _permit = match held {
                Some(permit) => Some(permit),
                None => permits.acquire_owned().await.ok(),
            };
            let entry_id = entry.id.clone();
            serve(&shared, &me, entry).await;
            lock(&shared.in_flight).remove(&entry_id);
        });
    }
}

/// Handles one entry: skip it if expired or malformed, otherwise run the handler, write the
/// reply and acknowledge, in one round trip.
async fn serve<H: RpcHandler>(shared: &Shared<H>, me: &str, entry: StreamId) {
    let request = match parse(&entry, &shared.clock) {
        Ok(request) => request,
        Err(reason) => {
            warn!(instance_id = me, entry = %entry.id, reason, "dropping malformed rpc request");
            finish(shared, me, &entry.id, None).await;
            return;
        }
    };
    if request.is_expired() {
        debug!(instance_id = me, id = %request.id, "skipping expired rpc request");
        finish(shared, me, &entry.id, None).await;
        return;
    }
    let span = tracing::info_span!(
        "rpc_serve",
        instance_id = me,
        from = %request.from_instance,
        method = %request.method,
        id = %request.id
    );
    let (id, from, deadline) = (request.id, request.from_instance.clone(), request.deadline);
    let outcome = AssertUnwindSafe(shared.handler.handle(request))
        .catch_unwind()
        .instrument(span)
        .await
        .unwrap_or_else(|_| Err(HandlerError::from("rpc handler panicked")));
    let reply = (Instant::now() < deadline).then_some((id, from.as_str(), outcome));
    finish(shared, me, &entry.id, reply).await;
}

/// Writes the reply (if any), acknowledges and deletes the request entry.
#[instrument(skip_all, fields(instance_id = me, entry = entry_id))]
async fn finish<H>(
    shared: &Shared<H>,
    me: &str,
    entry_id: &str,
    reply: Option<(
        Uuid,
        &str,
        std::result::Result<serde_json::Value, HandlerError>,
    )>,
) {
    let mut pipe = redis::pipe();
    if let Some((id, from, outcome)) = reply {
        let (kind, body) = match outcome {
            Ok(value) => match serde_json::to_string(&value) {
                Ok(json) => (field::OK, json),
                Err(err) => (field::ERR, format!("undecodable handler result: {err}")),
            },
            Err(HandlerError(message)) => (field::ERR, message),
        };
        pipe.cmd("XADD")
            .arg(shared.redis.keys().reply(from))
            .arg("MAXLEN")
            .arg("~")
            .arg(shared.options.stream_maxlen)
            .arg("*")
            .arg(field::ID)
            .arg(id.to_string())
            .arg(kind)
            .arg(body)
            .ignore();
    }
    pipe.cmd("XACK")
        .arg(&shared.key)
        .arg(GROUP)
        .arg(entry_id)
        .ignore()
        .cmd("XDEL")
        .arg(&shared.key)
        .arg(entry_id)
        .ignore();
    if let Err(err) = shared.redis.query_pipe::<()>(&pipe).await {
        // Left pending: a later claim sweep finds it, by then usually expired and dropped.
        warn!(instance_id = me, entry = entry_id, error = %err, "writing rpc reply failed");
    }
}

fn parse(entry: &StreamId, clock: &RedisClock) -> std::result::Result<RpcRequest, &'static str> {
    let id = entry
        .get::<String>(field::ID)
        .and_then(|id| Uuid::parse_str(&id).ok())
        .ok_or("missing or invalid id")?;
    let from_instance = entry.get::<String>(field::FROM).ok_or("missing from")?;
    let method = entry.get::<String>(field::METHOD).ok_or("missing method")?;
    let payload = entry
        .get::<String>(field::PAYLOAD)
        .and_then(|p| serde_json::from_str(&p).ok())
        .ok_or("missing or invalid payload")?;
    let now = Instant::now();
    let deadline = match entry.get::<u64>(field::TIMEOUT) {
        Some(timeout_ms) => clock.deadline(&entry.id, timeout_ms, now),
        // A caller of the previous release sends only its wall-clock deadline.
        None => {
            let deadline_ms = entry.get::<u64>(field::DEADLINE).ok_or("missing timeout")?;
            now + Duration::from_millis(deadline_ms.saturating_sub(now_ms()))
        }
    };
    Ok(RpcRequest {
        id,
        from_instance,
        method,
        payload,
        deadline,
        trace: entry.get::<String>(field::TRACE),
    })
}
