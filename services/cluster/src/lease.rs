//! Session leases with fencing tokens.
//!
//! One instance owns a session at a time. The lease key holds
//! `"{fence}|{incarnation}|{instance_id}"` and has no TTL of its own: it is valid exactly as
//! long as the registry entry of that instance still carries that incarnation (see
//! [`crate::registry`]). So a lease is renewed by its instance's one heartbeat, and a dead
//! instance's leases are free the moment its entry lapses — any instance may take one over
//! at once, and a gateway can tell a dead owner from a slow one without waiting out an RPC
//! deadline. Every acquisition takes a new, strictly larger fencing token from a
//! per-session counter (no TTL either), so tokens only grow while Redis keeps its data.
//!
//! Redis is allowed to lose everything (docs/design.md#fencing). After a Redis restart
//! the counter starts again from zero, so a Redis fence alone is *not* enough for
//! correctness: PostgreSQL records the largest fence that wrote to a session and refuses
//! writes carrying a smaller one. An owner that knows the recorded fence passes it to
//! [`Leases::acquire_with_floor`], which lifts the counter above it, so the new owner's
//! writes are accepted and any older owner's are refused.
//!
//! Release compares the whole value, so a handle from an earlier acquisition (even by the
//! same instance) cannot delete a newer lease.

use std::sync::Arc;

use tracing::{debug, instrument};

use crate::conn::Redis;
use crate::error::{ClusterError, Result};

/// Shared by the scripts: whether instance `id` is alive as incarnation `inc` (its registry
/// entry, under prefix `ARGV[1]`, exists and carries that incarnation).
const LIVE_FN: &str = r#"
local function live(id, inc)
  local rec = redis.call('GET', ARGV[1] .. id)
  if not rec then return false end
  local ok, r = pcall(cjson.decode, rec)
  return ok and type(r) == 'table' and r.incarnation == inc
end
local function holder(value)
  if not value then return nil end
  return string.match(value, '^(%d+)|([^|]*)|(.*)$')
end
"#;

/// Takes the lease if it is free, already ours, or held by an incarnation that is no longer
/// alive, with a new fence above `max(counter, floor)`. Returns the fence, 0 when a live
/// instance holds the lease, -1 when the caller's own incarnation is not alive.
/// ARGV: entry prefix, instance id, incarnation, floor.
const ACQUIRE: &str = r#"
if not live(ARGV[2], ARGV[3]) then return -1 end
local fence, inc, id = holder(redis.call('GET', KEYS[1]))
if fence and not (id == ARGV[2] and inc == ARGV[3]) and live(id, inc) then
  return 0
end
local floor = tonumber(ARGV[4])
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
if floor > counter then
  redis.call('SET', KEYS[2], ARGV[4])
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], string.format('%d', token) .. '|' .. ARGV[3] .. '|' .. ARGV[2])
return token
"#;

/// The live holder of a lease: `{instance_id, fence}`, or nil when the lease is free or its
/// holder's incarnation is gone. ARGV: entry prefix.
const OWNER: &str = r#"
local fence, inc, id = holder(redis.call('GET', KEYS[1]))
if fence and live(id, inc) then
  return {id, fence}
end
return false
"#;

/// Deletes the lease only if it still holds exactly our value.
const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;

/// Who takes a lease: an instance in one of its lives (see [`crate::Registration`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The instance id (where requests for the session are routed).
    pub instance_id: String,
    /// The incarnation whose registry entry keeps the lease alive.
    pub incarnation: String,
}

/// A lease this instance acquired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The session the lease is for.
    pub session_key: String,
    /// The holder.
    pub instance_id: String,
    /// The holder's incarnation: the lease lives as long as its registry entry.
    pub incarnation: String,
    /// The fencing token every PostgreSQL write of this owner carries.
    pub fence: u64,
}

impl Lease {
    /// The value stored under the lease key.
    fn value(&self) -> String {
        format!("{}|{}|{}", self.fence, self.incarnation, self.instance_id)
    }
}

/// Acquires, inspects and releases session leases. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Leases {
    redis: Redis,
    acquire: Arc<redis::Script>,
    owner: Arc<redis::Script>,
    release: Arc<redis::Script>,
}

impl Leases {
    /// Leases in the namespace of `redis`.
    pub fn new(redis: Redis) -> Self {
        Leases {
            redis,
            acquire: Arc::new(redis::Script::new(&format!("{LIVE_FN}{ACQUIRE}"))),
            owner: Arc::new(redis::Script::new(&format!("{LIVE_FN}{OWNER}"))),
            release: Arc::new(redis::Script::new(RELEASE)),
        }
    }

    /// Takes the lease on `session_key` for `holder` if no live instance holds it, with a
    /// fresh fence. `None` when a live instance (another, or an older incarnation of this
    /// one that is somehow still registered) holds it.
    pub async fn acquire(&self, session_key: &str, holder: &Holder) -> Result<Option<Lease>> {
        self.acquire_with_floor(session_key, holder, 0).await
    }

    /// Like [`Leases::acquire`], but the new fence is also larger than `min_fence` — pass
    /// the largest fence PostgreSQL recorded for the session, so a Redis that lost its
    /// counters cannot hand out a fence the journal would refuse.
    ///
    /// Fails with [`ClusterError::NotRegistered`] when `holder`'s own registry entry does
    /// not carry its incarnation (it lapsed): a lease taken then would be dead at once.
    #[instrument(skip_all, fields(session = %session_key, instance_id = %holder.instance_id, fence))]
    pub async fn acquire_with_floor(
        &self,
        session_key: &str,
        holder: &Holder,
        min_fence: u64,
    ) -> Result<Option<Lease>> {
        let keys = self.redis.keys();
        let mut invocation = self.acquire.prepare_invoke();
        invocation
            .key(keys.lease(session_key))
            .key(keys.fence(session_key))
            .arg(keys.instance(""))
            .arg(&holder.instance_id)
            .arg(&holder.incarnation)
            .arg(min_fence);
        let fence: i64 = self.redis.eval(&invocation).await?;
        match fence {
            -1 => Err(ClusterError::NotRegistered(holder.instance_id.clone())),
            0 => {
                debug!(session = session_key, "lease held by a live instance");
                Ok(None)
            }
            fence => {
                let fence = u64::try_from(fence)
                    .map_err(|_| ClusterError::protocol(format!("lease fence {fence}")))?;
                tracing::Span::current().record("fence", fence);
                debug!(session = session_key, fence, "lease acquired");
                Ok(Some(Lease {
                    session_key: session_key.to_owned(),
                    instance_id: holder.instance_id.clone(),
                    incarnation: holder.incarnation.clone(),
                    fence,
                }))
            }
        }
    }

    /// Deletes the lease if it is still exactly ours; `false` (and nothing deleted) when
    /// someone else holds it by now.
    #[instrument(skip_all, fields(session = %lease.session_key, fence = lease.fence))]
    pub async fn release(&self, lease: &Lease) -> Result<bool> {
        let mut invocation = self.release.prepare_invoke();
        invocation
            .key(self.redis.keys().lease(&lease.session_key))
            .arg(lease.value());
        let deleted: i64 = self.redis.eval(&invocation).await?;
        debug!(
            session = %lease.session_key,
            fence = lease.fence,
            released = deleted == 1,
            "lease release"
        );
        Ok(deleted == 1)
    }

    /// The live holder and fence of a session's lease: `None` when nobody holds it or its
    /// holder's incarnation is no longer alive (the session is free to take over).
    pub async fn owner(&self, session_key: &str) -> Result<Option<(String, u64)>> {
        let keys = self.redis.keys();
        let mut invocation = self.owner.prepare_invoke();
        invocation
            .key(keys.lease(session_key))
            .arg(keys.instance(""));
        let owner: Option<(String, String)> = self.redis.eval(&invocation).await?;
        owner
            .map(|(id, fence)| {
                let fence = fence.parse().map_err(|_| {
                    ClusterError::protocol(format!("malformed lease fence {fence:?}"))
                })?;
                Ok((id, fence))
            })
            .transpose()
    }

    /// The fence counter of a session (0 if Redis has none, e.g. after a restart).
    pub async fn current_fence(&self, session_key: &str) -> Result<u64> {
        let value: Option<u64> = self
            .redis
            .query(redis::cmd("GET").arg(self.redis.keys().fence(session_key)))
            .await?;
        Ok(value.unwrap_or(0))
    }
}
