//! The retry policy of the vendors' SDKs (docs/specs/model-streaming.md#retry-policy).

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

/// Server-suggested delays longer than this are ignored in favour of our own backoff.
const MAX_SERVER_DELAY: Duration = Duration::from_secs(60);
const INITIAL_BACKOFF: Duration = Duration::from_millis(500);

/// `x-should-retry: true|false` overrides the status-based decision.
pub(crate) fn should_retry_header(headers: &HeaderMap) -> Option<bool> {
    let v = headers.get("x-should-retry")?.to_str().ok()?.trim();
    if v.eq_ignore_ascii_case("true") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// `retry-after-ms` (float milliseconds), else `retry-after` (float seconds or HTTP-date),
/// honoured only when 0 < delay ≤ 60 s.
pub(crate) fn server_delay(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let delay = if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        Duration::try_from_secs_f64(ms / 1000.0).ok()
    } else {
        let v = header("retry-after")?;
        match v.parse::<f64>() {
            Ok(secs) => Duration::try_from_secs_f64(secs).ok(),
            Err(_) => httpdate::parse_http_date(v)
                .ok()
                .and_then(|at| at.duration_since(now).ok()),
        }
    }?;
    (!delay.is_zero() && delay <= MAX_SERVER_DELAY).then_some(delay)
}

/// `min(0.5 s × 2^attempt, max_backoff) × (1 − 0.25 × jitter)` with `jitter` in [0, 1).
pub(crate) fn backoff(attempt: u32, max_backoff: Duration, jitter: f64) -> Duration {
    let exp = INITIAL_BACKOFF.saturating_mul(1u32 << attempt.min(20));
    exp.min(max_backoff)
        .mul_f64(1.0 - 0.25 * jitter.clamp(0.0, 1.0))
}

/// The sleep before retry number `attempt + 1` (`attempt` counts retries already made).
pub(crate) fn retry_delay(
    attempt: u32,
    server: Option<Duration>,
    max_backoff: Duration,
) -> Duration {
    server.unwrap_or_else(|| backoff(attempt, max_backoff, rand::random::<f64>()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn server_delay_sources_and_bounds() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let d = |pairs: &[(&'static str, &str)]| server_delay(&headers(pairs), now);
        assert_eq!(
            d(&[("retry-after-ms", "250.5")]),
            Some(Duration::from_micros(250_500))
        );
        assert_eq!(
            d(&[("retry-after-ms", "20"), ("retry-after", "5")]),
            Some(Duration::from_millis(20))
        );
        assert_eq!(d(&[("retry-after", "2")]), Some(Duration::from_secs(2)));
        assert_eq!(
            d(&[("retry-after", "1.5")]),
            Some(Duration::from_millis(1500))
        );
        let in_30s = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            d(&[("retry-after", &in_30s)]),
            Some(Duration::from_secs(30))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(d(&[("retry-after", &past)]), None);
        assert_eq!(d(&[("retry-after", "0")]), None);
        assert_eq!(d(&[("retry-after", "61")]), None);
        assert_eq!(d(&[("retry-after", "-3")]), None);
        assert_eq!(d(&[("retry-after", "soon")]), None);
        assert_eq!(d(&[]), None);
    }

    #[test]
    fn backoff_doubles_caps_and_jitters_down() {
        let max = Duration::from_secs(8);
        let no_jitter: Vec<Duration> = (0..6).map(|a| backoff(a, max, 0.0)).collect();
        assert_eq!(
            no_jitter,
            [500, 1000, 2000, 4000, 8000, 8000]
                .map(Duration::from_millis)
                .to_vec()
        );
        assert_eq!(backoff(0, max, 1.0), Duration::from_millis(375));
        assert_eq!(
            backoff(3, Duration::from_millis(10), 0.0),
            Duration::from_millis(10)
        );
        assert_eq!(backoff(u32::MAX, max, 0.0), max);
        for a in 0..5 {
            let d = retry_delay(a, None, max);
            let full = backoff(a, max, 0.0);
            assert!(d <= full && d >= full.mul_f64(0.75), "{d:?}");
        }
        assert_eq!(
            retry_delay(4, Some(Duration::from_secs(3)), max),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn should_retry_override() {
        assert_eq!(
            should_retry_header(&headers(&[("x-should-retry", "true")])),
            Some(true)
        );
        assert_eq!(
            should_retry_header(&headers(&[("x-should-retry", "False")])),
            Some(false)
        );
        assert_eq!(
            should_retry_header(&headers(&[("x-should-retry", "maybe")])),
            None
        );
        assert_eq!(should_retry_header(&headers(&[])), None);
    }
}
