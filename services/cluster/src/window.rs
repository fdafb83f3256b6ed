//! Fixed-window counters shared by every instance (per-tenant rate limits). Like everything
//! in Redis a count may be lost; a limit built on it is best effort, never a correctness
//! rule.

use std::time::Duration;

use crate::conn::Redis;
use crate::error::Result;

/// Counters of events per named window. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Windows {
    redis: Redis,
}

impl Windows {
    pub fn new(redis: Redis) -> Self {
        Windows { redis }
    }

    /// Adds one to the counter of `name` in window `window` and returns the new count; the
    /// counter disappears `keep` after its last increment.
    pub async fn incr(&self, name: &str, window: u64, keep: Duration) -> Result<u64> {
        let key = format!("{}window:{{{name}}}:{window}", self.redis.keys().prefix());
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("INCR")
            .arg(&key)
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(keep.as_millis() as u64)
            .ignore();
        let (count,): (u64,) = self.redis.query_pipe(&pipe).await?;
        Ok(count)
    }
}
