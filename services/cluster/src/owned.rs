//! Which sessions each instance owns, so that survivors can take over a dead instance's
//! sessions without waiting for a client to touch them. Like everything in Redis this is a
//! hint: the lease decides ownership and PostgreSQL's fence decides what may be written.

use tracing::instrument;

use crate::conn::Redis;
use crate::error::Result;

/// The per-instance sets of owned session keys and the set of every instance ever seen.
#[derive(Debug, Clone)]
pub struct Ownerships {
    redis: Redis,
}

impl Ownerships {
    pub fn new(redis: Redis) -> Self {
        Self { redis }
    }

    fn members_key(&self) -> String {
        format!("{}members", self.redis.keys().prefix())
    }

    fn owned_key(&self, instance_id: &str) -> String {
        format!("{}owned:{instance_id}", self.redis.keys().prefix())
    }

    /// Records that `instance_id` is a cluster member (it may later die and be swept).
    pub async fn join(&self, instance_id: &str) -> Result<()> {
        self.redis
            .query::<i64>(redis::cmd("SADD").arg(self.members_key()).arg(instance_id))
            .await
            .map(|_| ())
    }

    /// Every instance that joined and has not been swept.
    pub async fn members(&self) -> Result<Vec<String>> {
        self.redis
            .query(redis::cmd("SMEMBERS").arg(self.members_key()))
            .await
    }

    /// Removes a swept instance.
    pub async fn leave(&self, instance_id: &str) -> Result<()> {
        self.redis
            .query::<i64>(redis::cmd("DEL").arg(self.owned_key(instance_id)))
            .await?;
        self.redis
            .query::<i64>(redis::cmd("SREM").arg(self.members_key()).arg(instance_id))
            .await
            .map(|_| ())
    }

    #[instrument(skip_all, fields(instance_id = %instance_id, session = %session_key))]
    pub async fn record(&self, instance_id: &str, session_key: &str) -> Result<()> {
        self.redis
            .query::<i64>(
                redis::cmd("SADD")
                    .arg(self.owned_key(instance_id))
                    .arg(session_key),
            )
            .await
            .map(|_| ())
    }

    pub async fn forget(&self, instance_id: &str, session_key: &str) -> Result<()> {
        self.redis
            .query::<i64>(
                redis::cmd("SREM")
                    .arg(self.owned_key(instance_id))
                    .arg(session_key),
            )
            .await
            .map(|_| ())
    }

    /// Session keys `instance_id` recorded as owned.
    pub async fn owned_by(&self, instance_id: &str) -> Result<Vec<String>> {
        self.redis
            .query(redis::cmd("SMEMBERS").arg(self.owned_key(instance_id)))
            .await
    }
}
