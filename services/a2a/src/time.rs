//! Timestamps: RFC 3339 UTC on the wire, microseconds since the epoch in stores.

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Now, as RFC 3339 UTC with milliseconds (`2026-01-02T03:04:05.678Z`).
pub fn now_rfc3339() -> String {
    let now = OffsetDateTime::now_utc();
    let now = now
        .replace_nanosecond(now.millisecond() as u32 * 1_000_000)
        .unwrap_or(now);
    now.format(&Rfc3339).unwrap_or_default()
}

/// Microseconds since the epoch of an RFC 3339 timestamp, or `None` when it is not one.
pub fn parse_micros(text: &str) -> Option<i64> {
    let t = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1000).ok()
}

/// Now, microseconds since the epoch.
pub fn now_micros() -> i64 {
    i64::try_from(OffsetDateTime::now_utc().unix_timestamp_nanos() / 1000).unwrap_or(i64::MAX)
}
