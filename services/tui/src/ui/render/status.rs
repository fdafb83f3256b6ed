//! The one-line parts of the screen: the reconnect banner, the activity line (spinner,
//! running tool, elapsed time; a delegation waiting for its A2A agent, with Ctrl-R) and the status line (project, model, connection, context
//! use, tokens).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::ui::app::{App, ConnState};
use crate::ui::delegates::ParkedDelegation;
use crate::ui::theme;
use crate::ui::wrap::{str_width, truncate};

const SPINNER: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/// Milliseconds per spinner frame.
const SPINNER_MS: i64 = 100;

/// `12345` → `12.3k`.
pub fn format_tokens(tokens: u64) -> String {
    match tokens {
        0..=999 => tokens.to_string(),
        1_000..=999_999 => format!("{:.1}k", tokens as f64 / 1_000.0),
        _ => format!("{:.1}M", tokens as f64 / 1_000_000.0),
    }
}

/// `65_000` ms → `1m 05s`.
pub fn format_elapsed(ms: i64) -> String {
    let secs = ms.max(0) / 1000;
    if secs < 60 {
        format!("{secs}s")
    } else if secs < 3600 {
        format!("{}m {:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h {:02}m", secs / 3600, (secs % 3600) / 60)
    }
}

fn fill(buf: &mut Buffer, area: Rect, style: Style) {
    buf.set_style(area, style);
}

/// The connection banner (only drawn while not connected).
pub fn banner(app: &App, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let (text, style) = match &app.conn {
        ConnState::Connected => return,
        ConnState::Reconnecting {
            reason,
            attempt,
            remaining_secs,
        } => {
            let attempt = if *attempt == 0 {
                String::from("reconnecting…")
            } else {
                format!("reconnecting (attempt {attempt}, {remaining_secs}s left)")
            };
            (
                format!(" ⚠ {attempt} — connection lost: {reason} "),
                theme::banner_warning(),
            )
        }
        ConnState::Disconnected { reason } => (
            format!(" ✗ disconnected: {reason} — Ctrl-R reconnects · Ctrl-C twice quits "),
            theme::banner_error(),
        ),
    };
    fill(buf, area, style);
    buf.set_stringn(
        area.x,
        area.y,
        truncate(&text, usize::from(area.width)),
        usize::from(area.width),
        style,
    );
}

/// The line above the input while a turn runs.
pub fn activity(app: &App, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let frame =
        usize::try_from((app.now_ms / SPINNER_MS).rem_euclid(SPINNER.len() as i64)).unwrap_or(0);
    let spinner = SPINNER[frame];
    if app.permissions.is_empty() {
        if let Some(call) = app.parked.calls().first() {
            return parked(app, call, spinner, area, buf);
        }
    }
    let (what, since) = if !app.permissions.is_empty() {
        ("waiting for your approval".to_string(), None)
    } else if let Some(tool) = app.running_tools.last() {
        (
            format!("{} {}", tool.tool, tool.summary),
            Some(tool.started_ms),
        )
    } else if app.submitting.is_some() && app.run.is_none() {
        ("sending…".to_string(), None)
    } else {
        let what = if app.thinking { "thinking" } else { "working" };
        (what.to_string(), app.run.as_ref().map(|r| r.started_ms))
    };
    let elapsed = since
        .map(|since| format!(" ({})", format_elapsed(app.now_ms - since)))
        .unwrap_or_default();
    let tail = format!("{elapsed} · esc to interrupt");
    let room = usize::from(area.width).saturating_sub(str_width(&tail) + 3);
    let line = Line::from(vec![
        Span::styled(format!("{spinner} "), theme::info()),
        Span::styled(truncate(&what, room), theme::plain()),
        Span::styled(tail, theme::dim()),
    ]);
    buf.set_line(area.x, area.y, &line, area.width);
}

/// The activity line while a delegation waits for its unreachable A2A agent: who, why, and
/// that Ctrl-R retries (or that a retry is on its way).
fn parked(app: &App, call: &ParkedDelegation, spinner: &str, area: Rect, buf: &mut Buffer) {
    let others = app.parked.calls().len() - 1;
    let more = if others > 0 {
        format!(" (+{others} more)")
    } else {
        String::new()
    };
    let (marker, what, tail) = if call.retrying {
        (
            format!("{spinner} "),
            format!("retrying the A2A agent `{}`{more}…", call.agent),
            " · esc to interrupt".to_string(),
        )
    } else {
        let reason = call
            .detail
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("unreachable");
        (
            "‖ ".to_string(),
            format!(
                "waiting for the A2A agent `{}`{more} — {reason}",
                call.agent
            ),
            " · ctrl-r retry · esc to interrupt".to_string(),
        )
    };
    let room = usize::from(area.width).saturating_sub(str_width(&tail) + str_width(&marker));
    let line = Line::from(vec![
        Span::styled(marker, theme::warning()),
        Span::styled(truncate(&what, room), theme::plain()),
        Span::styled(tail, theme::dim()),
    ]);
    buf.set_line(area.x, area.y, &line, area.width);
}

/// The bottom line.
pub fn status_line(app: &App, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let width = usize::from(area.width);
    let (conn_text, conn_style) = match &app.conn {
        ConnState::Connected => ("● connected", theme::ok()),
        ConnState::Reconnecting { .. } => ("◌ reconnecting", theme::warning()),
        ConnState::Disconnected { .. } => ("✗ disconnected", theme::error()),
    };
    let mut right = vec![Span::styled(conn_text, conn_style)];
    if let Some((used, max)) = app.context {
        if let Some(percent) = used.saturating_mul(100).checked_div(max) {
            let style = match percent {
                0..=59 => theme::dim(),
                60..=79 => theme::warning(),
                _ => theme::error(),
            };
            right.push(Span::styled(" · ", theme::dim()));
            right.push(Span::styled(format!("ctx {percent}%"), style));
        }
    }
    right.push(Span::styled(
        format!(" · {} tokens ", format_tokens(app.tokens)),
        theme::dim(),
    ));
    let right_width: usize = right.iter().map(|s| str_width(&s.content)).sum();

    let left_text = if app.quit_armed_at.is_some() {
        vec![Span::styled(
            " press Ctrl-C again to quit",
            theme::warning(),
        )]
    } else {
        let mut parts = vec![app.options.project.clone()];
        parts.push(app.model.clone().unwrap_or_else(|| "model not set".into()));
        if let Some(mode) = app.effective_permission_mode() {
            parts.push(mode);
        }
        if let Some(session) = &app.session {
            parts.push(session.id.chars().take(8).collect());
        }
        let text = format!(" {}", parts.join(" · "));
        vec![Span::styled(
            truncate(&text, width.saturating_sub(right_width + 1)),
            theme::dim(),
        )]
    };
    buf.set_line(area.x, area.y, &Line::from(left_text), area.width);
    if right_width < width {
        let x = area.x + u16::try_from(width - right_width).unwrap_or(0);
        buf.set_line(
            x,
            area.y,
            &Line::from(right),
            u16::try_from(right_width).unwrap_or(0),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_tokens_and_durations() {
        assert_eq!(format_tokens(999), "999");
        assert_eq!(format_tokens(12_345), "12.3k");
        assert_eq!(format_tokens(2_500_000), "2.5M");
        assert_eq!(format_elapsed(3_400), "3s");
        assert_eq!(format_elapsed(65_000), "1m 05s");
        assert_eq!(format_elapsed(3_720_000), "1h 02m");
        assert_eq!(format_elapsed(-5), "0s");
    }
}
