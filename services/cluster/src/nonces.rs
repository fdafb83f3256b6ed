//! The replay memory of the signed peer channel shared by every instance: a nonce taken
//! on one instance is refused on all of them (docs/a2a.md#the-cluster). `SET NX` with an
//! expiry: the first instance to see a nonce records it; the key expires when the
//! signature's timestamp has left the window anyway.

use std::time::Duration;

use crate::conn::Redis;
use crate::error::Result;

/// Nonces seen, per key. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Nonces {
    redis: Redis,
}

impl Nonces {
    pub fn new(redis: Redis) -> Self {
        Nonces { redis }
    }

    /// Records `key` for `keep`; whether it was new (`false`: seen before, a replay).
    pub async fn remember(&self, key: &str, keep: Duration) -> Result<bool> {
        let key = format!("{}peer-nonce:{key}", self.redis.keys().prefix());
        let mut cmd = redis::cmd("SET");
        cmd.arg(&key)
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(u64::try_from(keep.as_millis()).unwrap_or(u64::MAX).max(1));
        let set: Option<String> = self.redis.query(&cmd).await?;
        Ok(set.is_some())
    }
}
