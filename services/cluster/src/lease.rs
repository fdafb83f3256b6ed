//! Session leases with fencing tokens.
//!
//! One instance owns a session at a time. The lease key holds `"{fence}|{instance_id}"` with
//! a TTL; every acquisition takes a new, strictly larger fencing token from a per-session
//! counter that has no TTL, so tokens only grow while Redis keeps its data.
//!
//! Redis is allowed to lose everything (SYSTEM.md §6). After a Redis restart the counter
//! starts again from zero, so a Redis fence alone is *not* enough for correctness:
//! PostgreSQL records the largest fence that wrote to a session and refuses writes carrying a
//! smaller one. An owner that knows the recorded fence passes it to
//! [`Leases::acquire_with_floor`], which lifts the counter above it, so the new owner's
//! writes are accepted and any older owner's are refused.
//!
//! Renew and release compare the whole value, so a handle from an earlier acquisition (even
//! by the same instance) can neither extend nor delete a newer lease.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tracing::{debug, instrument};

use crate::conn::Redis;
use crate::error::{ClusterError, Result};

/// Takes the lease if it is free or already ours, and a new fence above `max(counter, floor)`.
/// Returns the fence, or nil when another instance holds the lease.
const ACQUIRE: &str = r#"
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, '|', 1, true)
  if not sep or string.sub(cur, sep + 1) ~= ARGV[1] then
    return false
  end
end
local floor = tonumber(ARGV[3])
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
if floor > counter then
  redis.call('SET', KEYS[2], ARGV[3])
end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], string.format('%d', fence) .. '|' .. ARGV[1], 'PX', ARGV[2])
return fence
"#;

/// Extends the lease only if it still holds exactly our value.
const RENEW: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"#;

/// Deletes the lease only if it still holds exactly our value.
const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;

/// Lease settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LeaseOptions {
    /// Lifetime of a lease that is not renewed. Default 10000 ms.
    pub ttl_ms: u64,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions { ttl_ms: 10_000 }
    }
}

/// A lease this instance acquired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The session the lease is for.
    pub session_key: String,
    /// The holder.
    pub instance_id: String,
    /// The fencing token every PostgreSQL write of this owner carries.
    pub fence: u64,
    /// When the acquire request was sent: Redis started the TTL later than this, so
    /// `acquired_at + ttl` is a safe local bound on the lease's life.
    pub acquired_at: Instant,
}

impl Lease {
    /// The value stored under the lease key.
    fn value(&self) -> String {
        format!("{}|{}", self.fence, self.instance_id)
    }
}

/// Acquires, renews and releases session leases. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Leases {
    redis: Redis,
    ttl: Duration,
    acquire: std::sync::Arc<redis::Script>,
    renew: std::sync::Arc<redis::Script>,
    release: std::sync::Arc<redis::Script>,
}

impl Leases {
    /// Leases in the namespace of `redis`.
    pub fn new(redis: Redis, options: LeaseOptions) -> Self {
        Leases {
            redis,
            ttl: Duration::from_millis(options.ttl_ms.max(3)),
            acquire: std::sync::Arc::new(redis::Script::new(ACQUIRE)),
            renew: std::sync::Arc::new(redis::Script::new(RENEW)),
            release: std::sync::Arc::new(redis::Script::new(RELEASE)),
        }
    }

    /// The lease TTL.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Takes the lease on `session_key` for `instance_id` if nobody else holds it, with a
    /// fresh fence. `None` when another instance holds it.
    pub async fn acquire(&self, session_key: &str, instance_id: &str) -> Result<Option<Lease>> {
        self.acquire_with_floor(session_key, instance_id, 0).await
    }

    /// Like [`Leases::acquire`], but the new fence is also larger than `min_fence` — pass
    /// the largest fence PostgreSQL recorded for the session, so a Redis that lost its
    /// counters cannot hand out a fence the journal would refuse.
    #[instrument(skip_all, fields(session = %session_key, instance_id = %instance_id, fence))]
    pub async fn acquire_with_floor(
        &self,
        session_key: &str,
        instance_id: &str,
        min_fence: u64,
    ) -> Result<Option<Lease>> {
        let keys = self.redis.keys();
        let mut invocation = self.acquire.prepare_invoke();
        invocation
            .key(keys.lease(session_key))
            .key(keys.fence(session_key))
            .arg(instance_id)
            .arg(self.ttl.as_millis() as u64)
            .arg(min_fence);
        let acquired_at = Instant::now();
        let fence: Option<u64> = self.redis.eval(&invocation).await?;
        let Some(fence) = fence else {
            debug!(session = session_key, "lease held by another instance");
            return Ok(None);
        };
        tracing::Span::current().record("fence", fence);
        debug!(session = session_key, fence, "lease acquired");
        Ok(Some(Lease {
            session_key: session_key.to_owned(),
            instance_id: instance_id.to_owned(),
            fence,
            acquired_at,
        }))
    }

    /// Extends the lease by the TTL if it is still exactly ours; `false` when it expired or
    /// was taken over.
    #[instrument(skip_all, fields(session = %lease.session_key, fence = lease.fence))]
    pub async fn renew(&self, lease: &Lease) -> Result<bool> {
        let mut invocation = self.renew.prepare_invoke();
        invocation
            .key(self.redis.keys().lease(&lease.session_key))
            .arg(lease.value())
            .arg(self.ttl.as_millis() as u64);
        let renewed: i64 = self.redis.eval(&invocation).await?;
        Ok(renewed == 1)
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

    /// The current holder and fence of a session's lease, if any.
    pub async fn owner(&self, session_key: &str) -> Result<Option<(String, u64)>> {
        let value: Option<String> = self
            .redis
            .query(redis::cmd("GET").arg(self.redis.keys().lease(session_key)))
            .await?;
        value.map(|v| parse_value(&v)).transpose()
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

fn parse_value(value: &str) -> Result<(String, u64)> {
    let (fence, instance) = value
        .split_once('|')
        .ok_or_else(|| ClusterError::protocol(format!("malformed lease value {value:?}")))?;
    let fence = fence
        .parse()
        .map_err(|_| ClusterError::protocol(format!("malformed lease fence {value:?}")))?;
    Ok((instance.to_owned(), fence))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn lease_values_round_trip_with_separators_in_the_instance_id() {
        assert_eq!(parse_value("7|a|b").unwrap(), ("a|b".to_owned(), 7));
        assert!(parse_value("x|a").is_err());
        assert!(parse_value("7").is_err());
    }
}
