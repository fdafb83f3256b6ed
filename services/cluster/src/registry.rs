//! The instance registry: which instances are alive, where to reach them and whether they
//! are draining — and the liveness every session lease of an instance rests on.
//!
//! Each instance keeps a key with a TTL alive by a heartbeat; an instance that dies simply
//! stops renewing and disappears after its TTL. A sorted set scored by expiry (Redis server
//! time, so instance clocks do not matter) makes the live set listable without `SCAN`.
//!
//! Liveness is per instance, not per session: an entry carries the instance's
//! *incarnation* (a fresh id each time it registers), and a session lease names the
//! incarnation that took it (see [`crate::lease`]). A lease is valid exactly as long as that
//! incarnation's entry exists, so one heartbeat renews every lease an instance holds and the
//! Redis cost does not grow with the number of sessions it owns. A heartbeat only *extends*
//! an entry that still carries its incarnation: once the entry lapsed (the process was
//! paused past its TTL, Redis was unreachable or restarted) the instance takes a new
//! incarnation, so leases of the old one stay dead for everybody and
//! [`Registration::liveness`] tells the lease keeper to drop them.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, instrument, warn};
use uuid::Uuid;

use crate::conn::Redis;
use crate::error::{ClusterError, Result};

/// Writes the entry with its TTL and records the expiry in the instance set. With
/// `ARGV[5] == 'renew'` only an entry that still carries incarnation `ARGV[4]` is extended
/// (returns 0 and writes nothing otherwise), so a lapsed incarnation is never revived.
const HEARTBEAT: &str = r#"
if ARGV[5] == 'renew' then
  local cur = redis.call('GET', KEYS[1])
  if not cur then return 0 end
  local ok, rec = pcall(cjson.decode, cur)
  if not ok or type(rec) ~= 'table' or rec.incarnation ~= ARGV[4] then return 0 end
end
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
    /// Which life of the instance wrote the entry (leases name it; see the module doc).
    #[serde(default)]
    incarnation: String,
}

/// This process's standing in the registry, published by its heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Liveness {
    /// The incarnation the entry carries; leases taken under another one are dead.
    pub incarnation: String,
    /// Until when this process may rely on its entry (and so on every lease of this
    /// incarnation): the send time of the last confirmed heartbeat plus the TTL, less a
    /// tenth of it for clock-rate differences and the time needed to stop writing. Redis
    /// started the entry's TTL after that send, so nobody else can find the entry gone
    /// before this moment. `None` until confirmed.
    pub valid_until: Option<Instant>,
}

impl Liveness {
    /// Whether the entry is still provably alive.
    pub fn is_valid(&self) -> bool {
        self.valid_until.is_some_and(|until| Instant::now() < until)
    }
}

/// Reads and writes registry entries. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Registry {
    redis: Redis,
    heartbeat: Arc<redis::Script>,
    live: Arc<redis::Script>,
}

/// How a heartbeat writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    /// Creates or replaces the entry (registration, a new incarnation).
    Register,
    /// Extends the entry only if it still carries the record's incarnation.
    Renew,
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

    /// Registers `instance_id` under a new incarnation and keeps it registered with a
    /// heartbeat every `ttl / 4` until the returned [`Registration`] is deregistered or
    /// dropped. Dropping it without [`Registration::deregister`] behaves like a crash: the
    /// entry lapses after `ttl`.
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
            incarnation: new_incarnation(),
        };
        let sent_at = Instant::now();
        self.write(instance_id, &record, ttl, Write::Register)
            .await?;
        let (live, _) = watch::channel(Liveness {
            incarnation: record.incarnation.clone(),
            valid_until: Some(valid_until(sent_at, ttl)),
        });
        let shared = Arc::new(Shared {
            registry: self.clone(),
            instance_id: instance_id.to_owned(),
            ttl,
            record: Mutex::new(record),
            live,
            confirming: tokio::sync::Mutex::new(()),
        });
        let task = tokio::spawn(heartbeat(shared.clone()));
        debug!(
            instance_id,
            ttl_ms = ttl.as_millis() as u64,
            "instance registered"
        );
        Ok(Registration { shared, task })
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

    /// The incarnation of a live instance (see the module docs); `None` when it is not live.
    pub async fn incarnation(&self, instance_id: &str) -> Result<Option<String>> {
        let record: Option<String> = self
            .redis
            .query(redis::cmd("GET").arg(self.redis.keys().instance(instance_id)))
            .await?;
        record
            .map(|r| {
                serde_json::from_str::<Record>(&r)
                    .map(|r| r.incarnation)
                    .map_err(|err| {
                        ClusterError::protocol(format!("registry entry of {instance_id}: {err}"))
                    })
            })
            .transpose()
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

    /// Writes the entry; `false` when a [`Write::Renew`] found the incarnation gone.
    async fn write(
        &self,
        instance_id: &str,
        record: &Record,
        ttl: Duration,
        mode: Write,
    ) -> Result<bool> {
        let keys = self.redis.keys();
        let json = serde_json::to_string(record)
            .map_err(|err| ClusterError::protocol(format!("encoding registry entry: {err}")))?;
        let mut invocation = self.heartbeat.prepare_invoke();
        invocation
            .key(keys.instance(instance_id))
            .key(keys.instances())
            .arg(instance_id)
            .arg(json)
            .arg(ttl.as_millis() as u64)
            .arg(&record.incarnation)
            .arg(match mode {
                Write::Register => "register",
                Write::Renew => "renew",
            });
        let written: i64 = self.redis.eval(&invocation).await?;
        Ok(written == 1)
    }
}

fn new_incarnation() -> String {
    Uuid::new_v4().simple().to_string()
}

fn valid_until(sent_at: Instant, ttl: Duration) -> Instant {
    sent_at + ttl - ttl / 10
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

/// What the heartbeat task shares with the [`Registration`].
struct Shared {
    registry: Registry,
    instance_id: String,
    ttl: Duration,
    record: Mutex<Record>,
    live: watch::Sender<Liveness>,
    /// One confirmation at a time (the heartbeat and `set_draining`), so two writers never
    /// both start a new incarnation.
    confirming: tokio::sync::Mutex<()>,
}

impl Shared {
    fn record(&self) -> std::sync::MutexGuard<'_, Record> {
        // A plain value: consistent even if a holder panicked.
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Extends the entry; when it lapsed, registers a new incarnation (and says so first,
    /// so the lease keeper drops the old incarnation's leases before anything else runs).
    async fn confirm(&self) -> Result<()> {
        let _one = self.confirming.lock().await;
        let record = self.record().clone();
        let sent_at = Instant::now();
        if self
            .registry
            .write(&self.instance_id, &record, self.ttl, Write::Renew)
            .await?
        {
            self.live.send_modify(|live| {
                if live.incarnation == record.incarnation {
                    live.valid_until = Some(valid_until(sent_at, self.ttl));
                }
            });
            return Ok(());
        }
        let incarnation = new_incarnation();
        warn!(
            instance_id = %self.instance_id,
            old = %record.incarnation,
            new = %incarnation,
            "registry entry had lapsed; registering a new incarnation (every lease of the old one is lost)"
        );
        let record = {
            let mut current = self.record();
            current.incarnation = incarnation.clone();
            current.clone()
        };
        self.live.send_replace(Liveness {
            incarnation: incarnation.clone(),
            valid_until: None,
        });
        let sent_at = Instant::now();
        self.registry
            .write(&self.instance_id, &record, self.ttl, Write::Register)
            .await?;
        self.live.send_modify(|live| {
            if live.incarnation == incarnation {
                live.valid_until = Some(valid_until(sent_at, self.ttl));
            }
        });
        Ok(())
    }
}

async fn heartbeat(shared: Arc<Shared>) {
    let mut ticker = tokio::time::interval(shared.ttl / 4);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        if let Err(err) = shared.confirm().await {
            warn!(instance_id = %shared.instance_id, error = %err, "registry heartbeat failed");
        }
    }
}

/// A live registration; keeps heartbeating until deregistered or dropped.
pub struct Registration {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("instance_id", &self.shared.instance_id)
            .field("draining", &self.shared.record().draining)
            .finish_non_exhaustive()
    }
}

impl Registration {
    /// The registered instance id.
    pub fn instance_id(&self) -> &str {
        &self.shared.instance_id
    }

    /// The current incarnation (a new one after the entry lapsed).
    pub fn incarnation(&self) -> String {
        self.shared.live.borrow().incarnation.clone()
    }

    /// This process's liveness as the heartbeat confirms it; the lease keeper watches it.
    pub fn liveness(&self) -> watch::Receiver<Liveness> {
        self.shared.live.subscribe()
    }

    /// Whether the last confirmed heartbeat still keeps the entry alive (for `/readyz`).
    pub fn is_registered(&self) -> bool {
        self.shared.live.borrow().is_valid()
    }

    /// Heartbeats now instead of at the next tick: when the entry is gone (Redis lost it),
    /// this registers a new incarnation at once.
    pub async fn confirm(&self) -> Result<()> {
        self.shared.confirm().await
    }

    /// Sets the draining flag other instances read, and writes it at once.
    #[instrument(skip_all, fields(instance_id = %self.shared.instance_id, draining))]
    pub async fn set_draining(&self, draining: bool) -> Result<()> {
        self.shared.record().draining = draining;
        self.shared.confirm().await
    }

    /// Stops the heartbeat and removes the entry at once.
    pub async fn deregister(self) -> Result<()> {
        self.task.abort();
        self.shared
            .registry
            .deregister(&self.shared.instance_id)
            .await
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.task.abort();
    }
}
