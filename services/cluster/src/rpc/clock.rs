//! Request deadlines on the Redis clock, so instance clocks may disagree by any amount.
//!
//! A caller sends its timeout, not a point in time. Redis stamps every stream entry with its
//! own clock (the id's milliseconds), so a server knows how long a request has waited once it
//! knows Redis's clock: it reads it with `TIME` on every claim sweep and keeps the reading
//! beside the monotonic instant it was taken at. The only clock compared across processes is
//! Redis's, against itself.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::conn::Redis;
use crate::error::Result;

/// The latest reading of Redis's clock.
#[derive(Debug, Default)]
pub(super) struct RedisClock {
    reading: Mutex<Option<Reading>>,
}

#[derive(Debug, Clone, Copy)]
struct Reading {
    /// When the reading was taken here (midway through the `TIME` round trip).
    at: Instant,
    /// Redis's clock then, Unix epoch milliseconds.
    redis_ms: u64,
}

impl RedisClock {
    /// Reads Redis's clock again. A failed read keeps the previous reading.
    pub(super) async fn refresh(&self, redis: &Redis) -> Result<()> {
        let sent = Instant::now();
        let (secs, micros): (u64, u64) = redis.query(&redis::cmd("TIME")).await?;
        let received = Instant::now();
        let reading = Reading {
            at: sent + received.duration_since(sent) / 2,
            redis_ms: secs * 1000 + micros / 1000,
        };
        *self.reading.lock().unwrap_or_else(PoisonError::into_inner) = Some(reading);
        Ok(())
    }

    /// Redis's clock now, estimated from the latest reading (`None` before the first one).
    fn now_ms(&self, now: Instant) -> Option<u64> {
        let reading = (*self.reading.lock().unwrap_or_else(PoisonError::into_inner))?;
        Some(reading.redis_ms + now.saturating_duration_since(reading.at).as_millis() as u64)
    }

    /// The local deadline of a request that entered the stream at `entry_id` with
    /// `timeout_ms` to live: its timeout less the time it has already waited.
    pub(super) fn deadline(&self, entry_id: &str, timeout_ms: u64, now: Instant) -> Instant {
        deadline(entry_id, timeout_ms, self.now_ms(now), now)
    }
}

/// `now + timeout − waited`, where `waited` is Redis's `redis_now_ms` less the entry id's
/// milliseconds (nothing when either is unknown, or the id lies ahead of the reading).
fn deadline(entry_id: &str, timeout_ms: u64, redis_now_ms: Option<u64>, now: Instant) -> Instant {
    let enqueued_ms = entry_id
        .split_once('-')
        .and_then(|(ms, _)| ms.parse::<u64>().ok());
    let waited_ms = match (redis_now_ms, enqueued_ms) {
        (Some(now_ms), Some(enqueued_ms)) => now_ms.saturating_sub(enqueued_ms),
        _ => 0,
    };
    now + Duration::from_millis(timeout_ms.saturating_sub(waited_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: u64 = 1_800_000_000_000;

    fn left(entry_id: &str, timeout_ms: u64, redis_now_ms: Option<u64>) -> Duration {
        let now = Instant::now();
        deadline(entry_id, timeout_ms, redis_now_ms, now).duration_since(now)
    }

    #[test]
    fn the_time_a_request_waited_on_the_redis_clock_counts_against_its_timeout() {
        let id = format!("{}-0", NOW_MS - 4_000);
        assert_eq!(left(&id, 10_000, Some(NOW_MS)), Duration::from_secs(6));
        assert_eq!(left(&id, 3_000, Some(NOW_MS)), Duration::ZERO);
    }

    #[test]
    fn without_a_reading_or_with_an_id_ahead_of_it_the_whole_timeout_is_left() {
        let id = format!("{}-7", NOW_MS + 500);
        assert_eq!(left(&id, 10_000, Some(NOW_MS)), Duration::from_secs(10));
        assert_eq!(left("12-0", 10_000, None), Duration::from_secs(10));
        assert_eq!(
            left("not-an-id", 10_000, Some(NOW_MS)),
            Duration::from_secs(10)
        );
    }

    #[test]
    fn the_estimate_advances_with_the_monotonic_clock() {
        let clock = RedisClock::default();
        let at = Instant::now();
        *clock.reading.lock().unwrap() = Some(Reading {
            at,
            redis_ms: NOW_MS,
        });
        assert_eq!(
            clock.now_ms(at + Duration::from_millis(1_250)),
            Some(NOW_MS + 1_250)
        );
        let id = format!("{NOW_MS}-0");
        let later = at + Duration::from_secs(2);
        assert_eq!(
            clock.deadline(&id, 5_000, later).duration_since(later),
            Duration::from_secs(3)
        );
    }
}
