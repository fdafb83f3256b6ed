//! `lumina --list`: the sessions as a table, or the server's JSON array verbatim.

use anyhow::anyhow;
use lumina_client::protocol::methods::{self, SessionInfo};
use lumina_client::Client;
use serde_json::json;

use crate::cli::OutputFormat;

/// Prints the session list to stdout.
pub async fn list_sessions(client: &Client, format: OutputFormat) -> anyhow::Result<()> {
    let id = uuid::Uuid::new_v4().to_string();
    let result = client
        .call_raw(
            id,
            methods::SESSION_LIST,
            json!({ "include_archived": false }),
        )
        .await
        .map_err(|e| anyhow!("cannot list sessions: {e}"))?;
    let sessions = result
        .get("sessions")
        .cloned()
        .ok_or_else(|| anyhow!("cannot list sessions: the answer has no `sessions`"))?;
    match format {
        // Raw: fields this build does not know are passed on.
        OutputFormat::Json | OutputFormat::StreamJson => println!("{sessions}"),
        OutputFormat::Text => {
            let sessions: Vec<SessionInfo> = serde_json::from_value(sessions)
                .map_err(|e| anyhow!("cannot list sessions: unexpected answer: {e}"))?;
            if sessions.is_empty() {
                eprintln!("lumina: no sessions yet; start one with `lumina -p \"...\"`");
            } else {
                print!("{}", render_table(&sessions));
            }
        }
    }
    Ok(())
}

/// Columns ID, UPDATED (UTC), STATUS, TITLE; most recently updated first.
pub fn render_table(sessions: &[SessionInfo]) -> String {
    let mut sorted: Vec<&SessionInfo> = sessions.iter().collect();
    sorted.sort_by_key(|s| std::cmp::Reverse(s.updated_at_ms));
    let rows: Vec<[String; 4]> = sorted
        .iter()
        .map(|s| {
            [
                s.id.clone(),
                format_utc(s.updated_at_ms),
                s.status.to_string(),
                one_line(&s.title),
            ]
        })
        .collect();

    let header = [
        "ID".to_string(),
        "UPDATED (UTC)".to_string(),
        "STATUS".to_string(),
        "TITLE".to_string(),
    ];
    let mut widths = [0usize; 3];
    for row in std::iter::once(&header).chain(rows.iter()) {
        for (width, cell) in widths.iter_mut().zip(row.iter()) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows.iter()) {
        let line = format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn one_line(title: &str) -> String {
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    if title.is_empty() {
        "(untitled)".to_string()
    } else {
        title
    }
}

/// `YYYY-MM-DD HH:MM` in UTC for Unix milliseconds (no time-zone database needed).
pub fn format_utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let second_of_day = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        second_of_day / 3600,
        (second_of_day % 3600) / 60
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use lumina_client::protocol::Usage;
    use pretty_assertions::assert_eq;

    use super::*;

    fn session(id: &str, updated_at_ms: i64, status: &str, title: &str) -> SessionInfo {
        SessionInfo {
            id: id.into(),
            title: title.into(),
            project_root: "/p".into(),
            created_at_ms: 0,
            updated_at_ms,
            status: status.into(),
            head_seq: 0,
            last_run: None,
            usage: Usage::default(),
        }
    }

    #[test]
    fn formats_utc_times() {
        assert_eq!(format_utc(0), "1970-01-01 00:00");
        assert_eq!(format_utc(951_827_696_000), "2000-02-29 12:34");
        assert_eq!(format_utc(1_767_225_599_000), "2025-12-31 23:59");
    }

    #[test]
    fn table_is_aligned_and_newest_first() {
        let table = render_table(&[
            session("a1", 0, "idle", "first\nline two"),
            session("b22", 86_400_000, "running", ""),
        ]);
        assert_eq!(
            table,
            "ID   UPDATED (UTC)     STATUS   TITLE\n\
             b22  1970-01-02 00:00  running  (untitled)\n\
             a1   1970-01-01 00:00  idle     first line two\n"
        );
    }
}
