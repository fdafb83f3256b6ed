//! The instance registry: which instances are alive, where to reach them and whether they
//! are draining.
//!
//! Each instance keeps a key with a TTL alive by a heartbeat; an instance that dies simply
//! stops renewing and disappears after its TTL. A sorted set scored by expiry (Redis server
//! time, so instance clocks do not matter) makes the live set listable without `SCAN`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, instrument, warn};

use crate::conn::Redis;
use crate::error::{ClusterError, Result};

/// Writes the entry with its TTL and records the expiry in the instance set.
const HEARTBEAT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
return 1
"#;

/// Prunes expired members and returns `id, record` pairs of the live ones. The entry keys
/// are derived from `ARGV[1]` (standalone Redis only, like the rest of the registry).
const LIVE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local v = redis.call('GET', ARGV[1] .. id)
  if v then
    table.insert(out, id)
    table.insert(out, v)
  end
end
return out
"#;

/// What the registry knows about a live instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceInfo {
    /// The instance's id.
    pub instance_id: String,
    /// Where other instances and gateways reach it.
    pub advertise_addr: String,
    /// Draining instances take no new leases.
    pub draining: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    advertise_addr: String,
    draining: bool,
}

/// Reads and writes registry entries. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Registry {
    redis: Redis,
    heartbeat: Arc<redis::Script>,
    live: Arc<redis::Script>,
}

impl Registry {
    /// A registry in the namespace of `redis`.
    pub fn new(redis: Redis) -> Self {
        Registry {
            redis,
            heartbeat: Arc::new(redis::Script::new(HEARTBEAT)),
            live: Arc::new(redis::Script::new(LIVE)),
        }
    }

    /// Registers `instance_id` and keeps it registered with a heartbeat every `ttl / 3`
    /// until the returned [`Registration`] is deregistered or dropped. Dropping it without
    /// [`Registration::deregister`] behaves like a crash: the entry lapses after `ttl`.
    #[instrument(skip_all, fields(instance_id = %instance_id))]
    pub async fn register(
        &self,
        instance_id: &str,
        advertise_addr: &str,
        ttl: Duration,
    ) -> Result<Registration> {
        let ttl = ttl.max(Duration::from_millis(30));
        let record = Record {
            advertise_addr: advertise_addr.to_owned(),
            draining: false,
        };
        let sent_at = Instant::now();
        self.write(instance_id, &record, ttl).await?;
        let shared = Arc::new(Mutex::new(Shared {
            record,
            confirmed_until: Some(sent_at + ttl),
        }));
        let task = tokio::spawn(heartbeat(
            self.clone(),
            instance_id.to_owned(),
            ttl,
            shared.clone(),
        ));
        debug!(
            instance_id,
            ttl_ms = ttl.as_millis() as u64,
            "instance registered"
        );
        Ok(Registration {
            registry: self.clone(),
            instance_id: instance_id.to_owned(),
            ttl,
            shared,
            task,
        })
    }

    /// Removes an instance's entry at once.
    #[instrument(skip_all, fields(instance_id = %instance_id))]
    pub async fn deregister(&self, instance_id: &str) -> Result<()> {
        let keys = self.redis.keys();
        let mut pipe = redis::pipe();
        pipe.cmd("DEL")
            .arg(keys.instance(instance_id))
            .ignore()
            .cmd("ZREM")
            .arg(keys.instances())
            .arg(instance_id)
            .ignore();
        self.redis.query_pipe::<()>(&pipe).await
    }

    /// Every instance whose entry has not expired, sorted by id.
    pub async fn live_instances(&self) -> Result<Vec<InstanceInfo>> {
        let keys = self.redis.keys();
        let mut invocation = self.live.prepare_invoke();
        invocation.key(keys.instances()).arg(keys.instance(""));
        let flat: Vec<String> = self.redis.eval(&invocation).await?;
        let mut out = Vec::with_capacity(flat.len() / 2);
        for pair in flat.chunks_exact(2) {
            if let [id, record] = pair {
                out.push(decode(id, record)?);
            }
        }
        out.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
        Ok(out)
    }

    /// The entry of one instance, if it is live.
    pub async fn instance(&self, instance_id: &str) -> Result<Option<InstanceInfo>> {
        let record: Option<String> = self
            .redis
            .query(redis::cmd("GET").arg(self.redis.keys().instance(instance_id)))
            .await?;
        record.map(|r| decode(instance_id, &r)).transpose()
    }

    /// Whether the instance's entry exists (it has heartbeated within its TTL).
    pub async fn is_live(&self, instance_id: &str) -> Result<bool> {
        let exists: bool = self
            .redis
            .query(redis::cmd("EXISTS").arg(self.redis.keys().instance(instance_id)))
            .await?;
        Ok(exists)
    }

    /// Whether a live instance is draining; `false` for instances that are not live.
    pub async fn is_draining(&self, instance_id: &str) -> Result<bool> {
        Ok(self
            .instance(instance_id)
            .await?
            .is_some_and(|info| info.draining))
    }

    async fn write(&self, instance_id: &str, record: &Record, ttl: Duration) -> Result<()> {
        let keys = self.redis.keys();
        let json = serde_json::to_string(record)
            .map_err(|err| ClusterError::protocol(format!("encoding registry entry: {err}")))?;
        let mut invocation = self.heartbeat.prepare_invoke();
        invocation
            .key(keys.instance(instance_id))
            .key(keys.instances())
            .arg(instance_id)
            .arg(json)
            .arg(ttl.as_millis() as u64);
        self.redis.eval::<i64>(&invocation).await.map(drop)
    }
}

fn decode(instance_id: &str, record: &str) -> Result<InstanceInfo> {
    let record: Record = serde_json::from_str(record)
        .map_err(|err| ClusterError::protocol(format!("registry entry of {instance_id}: {err}")))?;
    Ok(InstanceInfo {
        instance_id: instance_id.to_owned(),
        advertise_addr: record.advertise_addr,
        draining: record.draining,
    })
}

struct Shared {
    record: Record,
    /// Until when the last confirmed write keeps the entry alive (measured from when it was
    /// sent, so never later than Redis's own expiry).
    confirmed_until: Option<Instant>,
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    // The guarded data stays consistent even if a holder panicked: it is plain values.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn heartbeat(
    registry: Registry,
    instance_id: String,
    ttl: Duration,
    shared: Arc<Mutex<Shared>>,
) {
    let mut ticker = tokio::time::interval(ttl / 3);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let record = lock(&shared).record.clone();
        let sent_at = Instant::now();
        match registry.write(&instance_id, &record, ttl).await {
            Ok(()) => lock(&shared).confirmed_until = Some(sent_at + ttl),
            Err(err) => warn!(instance_id, error = %err, "registry heartbeat failed"),
        }
    }
}

/// A live registration; keeps heartbeating until deregistered or dropped.
#[derive(Debug)]
pub struct Registration {
    registry: Registry,
    instance_id: String,
    ttl: Duration,
    shared: Arc<Mutex<Shared>>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("draining", &self.record.draining)
            .finish_non_exhaustive()
    }
}

impl Registration {
    /// The registered instance id.
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// Whether the last confirmed heartbeat still keeps the entry alive (for `/readyz`).
    pub fn is_registered(&self) -> bool {
        lock(&self.shared)
            .confirmed_until
            .is_some_and(|until| Instant::now() < until)
    }

    /// Sets the draining flag other instances read, and writes it at once.
    #[instrument(skip_all, fields(instance_id = %self.instance_id, draining))]
    pub async fn set_draining(&self, draining: bool) -> Result<()> {
        let record = {
            let mut shared = lock(&self.shared);
            shared.record.draining = draining;
            shared.record.clone()
        };
        let sent_at = Instant::now();
        self.registry
            .write(&self.instance_id, &record, self.ttl)
            .await?;
        lock(&self.shared).confirmed_until = Some(sent_at + self.ttl);
        Ok(())
    }

    /// Stops the heartbeat and removes the entry at once.
    pub async fn deregister(self) -> Result<()> {
        self.task.abort();
        self.registry.deregister(&self.instance_id).await
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.task.abort();
    }
}
