//! Calendar arithmetic for event times (milliseconds since the Unix epoch, UTC), written out
//! here (Howard Hinnant's civil-date algorithms) rather than pulling in a date crate.

/// A UTC calendar date and time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    /// Year, e.g. 2023.
    pub year: i64,
    /// Month, 1..=12.
    pub month: u32,
    /// Day of the month, 1..=31.
    pub day: u32,
    /// Hour, 0..=23.
    pub hour: u32,
    /// Minute, 0..=59.
    pub minute: u32,
}

const MS_PER_DAY: i64 = 86_400_000;

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Milliseconds since the epoch of a UTC date and time.
pub fn to_ms(civil: Civil) -> i64 {
    days_from_civil(civil.year, civil.month, civil.day) * MS_PER_DAY
        + i64::from(civil.hour) * 3_600_000
        + i64::from(civil.minute) * 60_000
}

/// The UTC date and time of `ms` since the epoch.
pub fn civil(ms: i64) -> Civil {
    let days = ms.div_euclid(MS_PER_DAY);
    let rest = ms.rem_euclid(MS_PER_DAY);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    Civil {
        year,
        // Both are in range by construction (1..=12, 1..=31); the fallbacks never apply.
        month: u32::try_from(month).unwrap_or(1),
        day: u32::try_from(day).unwrap_or(1),
        hour: u32::try_from(rest / 3_600_000).unwrap_or(0),
        minute: u32::try_from(rest % 3_600_000 / 60_000).unwrap_or(0),
    }
}

/// "8 May 2023": the words of an event's date, as indexed and shown to a model.
pub fn date_words(ms: i64) -> String {
    let c = civil(ms);
    let month = crate::text::month_name(c.month);
    let mut name = month.to_owned();
    if let Some(first) = name.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    format!("{} {} {}", c.day, name, c.year)
}

/// "2023-05-08 13:56 UTC".
pub fn display(ms: i64) -> String {
    let c = civil(ms);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} UTC",
        c.year, c.month, c.day, c.hour, c.minute
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let c = Civil {
            year: 2023,
            month: 5,
            day: 8,
            hour: 13,
            minute: 56,
        };
        let ms = to_ms(c);
        assert_eq!(ms, 1_683_554_160_000);
        assert_eq!(civil(ms), c);
        assert_eq!(date_words(ms), "8 May 2023");
        assert_eq!(display(ms), "2023-05-08 13:56 UTC");
        assert_eq!(civil(0).year, 1970);
        assert_eq!(civil(-1).year, 1969);
    }
}
