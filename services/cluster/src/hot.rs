//! Hot windows: the last N entries of a conversation (opaque strings, JSON to the caller)
//! with the journal seq they are current through, in a Redis list. A cache like the rest of
//! Redis: a window may vanish at any moment (eviction, `FLUSHALL`, a restart) and the caller
//! rebuilds it from the journal. Updates are compare-and-set on the `through` seq, so two
//! instances refreshing the same window at once never append the same entries twice.

use std::sync::Arc;
use std::time::Duration;

use crate::conn::Redis;
use crate::error::{ClusterError, Result};

/// KEYS: list, through. ARGV: expected through (`""` = replace), new through, capacity,
/// ttl ms, entries…. Returns 1 when written, 0 when another writer moved `through` first.
const SAVE: &str = r#"
local current = redis.call('GET', KEYS[2])
if ARGV[1] ~= '' then
  if current ~= ARGV[1] then return 0 end
else
  redis.call('DEL', KEYS[1])
end
for i = 5, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[3]), -1)
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[4])
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return 1
"#;

/// A window as stored: the seq it is current through and its entries, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredWindow {
    pub through_seq: u64,
    pub entries: Vec<String>,
}

/// Hot windows under this cluster's key prefix. Cheap to clone.
#[derive(Clone)]
pub struct HotWindows {
    redis: Redis,
    save: Arc<redis::Script>,
    ttl: Duration,
}

impl std::fmt::Debug for HotWindows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HotWindows")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl HotWindows {
    /// Windows that expire `ttl` after their last update (idle conversations leave Redis).
    pub fn new(redis: Redis, ttl: Duration) -> Self {
        HotWindows {
            redis,
            save: Arc::new(redis::Script::new(SAVE)),
            ttl,
        }
    }

    fn keys(&self, name: &str) -> (String, String) {
        let prefix = self.redis.keys().prefix();
        (
            format!("{prefix}hot:{{{name}}}:list"),
            format!("{prefix}hot:{{{name}}}:through"),
        )
    }

    /// The window `name`, or `None` when Redis does not have it (never built, expired, lost).
    pub async fn load(&self, name: &str) -> Result<Option<StoredWindow>> {
        let (list, through) = self.keys(name);
        let mut pipe = redis::pipe();
        pipe.cmd("GET")
            .arg(&through)
            .cmd("LRANGE")
            .arg(&list)
            .arg(0)
            .arg(-1);
        let (through_seq, entries): (Option<String>, Vec<String>) =
            self.redis.query_pipe(&pipe).await?;
        let Some(through_seq) = through_seq else {
            return Ok(None);
        };
        let through_seq = through_seq
            .parse()
            .map_err(|_| ClusterError::protocol(format!("hot window through {through_seq:?}")))?;
        Ok(Some(StoredWindow {
            through_seq,
            entries,
        }))
    }

    /// Appends `entries` and trims to the last `capacity`, if the stored window is still
    /// current through `expected` (`None`: replace whatever is there). Returns whether it
    /// wrote (false: another writer got there first, which is fine for a cache).
    pub async fn save(
        &self,
        name: &str,
        expected: Option<u64>,
        through_seq: u64,
        capacity: usize,
        entries: &[String],
    ) -> Result<bool> {
        let (list, through) = self.keys(name);
        let mut invocation = self.save.prepare_invoke();
        invocation
            .key(list)
            .key(through)
            .arg(expected.map(|e| e.to_string()).unwrap_or_default())
            .arg(through_seq)
            .arg(capacity.max(1))
            .arg(self.ttl.as_millis().max(1) as u64);
        for entry in entries {
            invocation.arg(entry);
        }
        let written: i64 = self.redis.eval(&invocation).await?;
        Ok(written == 1)
    }
}
