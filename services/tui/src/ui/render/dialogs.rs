//! Modal dialogs: the permission request (the exact call, its preview and the three
//! answers), the sessions picker and the help screen.

use lumina_client::protocol::methods::TeamInfo;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Padding, Paragraph};
use ratatui::Frame;
use serde_json::Value;

use super::centered;
use super::entries::tool_summary;
use super::status::{format_elapsed, format_tokens};
use crate::ui::app::{App, Overlay, PendingPermission};
use crate::ui::commands::COMMANDS;
use crate::ui::highlight;
use crate::ui::theme;
use crate::ui::wrap::{self, sanitize, truncate};

const CHOICES: [&str; 3] = [
    "Allow once",
    "Allow this exact call for the rest of the session",
    "Deny, and tell the agent why",
];

/// Columns taken by a dialog's borders and padding.
const FRAME_WIDTH: u16 = 4;

fn block(title: &str) -> Block<'static> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme::border())
        .padding(Padding::horizontal(1))
        .title(Span::styled(format!(" {title} "), theme::bold()))
}

/// The lines showing what the call will do: a coloured diff for edits, the command for the
/// shell, the arguments as JSON otherwise.
fn preview_lines(request: &PendingPermission, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let indent = [Span::raw("  ")];
    let preview = request.preview.as_deref().map(sanitize);
    let looks_like_diff = preview
        .as_deref()
        .is_some_and(|p| p.starts_with("---") || p.contains("\n@@") || p.starts_with("@@"));
    match (request.tool.as_str(), preview) {
        ("shell", Some(command)) => {
            for (i, line) in command.lines().enumerate() {
                let prefix = if i == 0 { "$ " } else { "  " };
                lines.extend(wrap::wrap_text(
                    line,
                    theme::bold(),
                    width,
                    &[Span::styled(prefix, theme::dim())],
                    &indent,
                ));
            }
            if let Some(timeout) = request.arguments.get("timeout_ms").and_then(Value::as_u64) {
                lines.push(Line::from(Span::styled(
                    format!("timeout {timeout} ms"),
                    theme::dim(),
                )));
            }
        }
        (_, Some(diff)) if looks_like_diff => {
            for line in diff.lines() {
                lines.extend(wrap::wrap(
                    &[highlight::diff_line(line)],
                    width,
                    &[],
                    &indent,
                ));
            }
        }
        (_, Some(text)) => {
            for line in text.lines() {
                lines.extend(wrap::wrap_text(line, theme::plain(), width, &[], &indent));
            }
        }
        (_, None) => {
            let json = serde_json::to_string_pretty(&request.arguments).unwrap_or_default();
            for line in sanitize(&json).lines() {
                lines.extend(wrap::wrap_text(line, theme::plain(), width, &[], &indent));
            }
        }
    }
    lines
}

/// The permission dialog for the first pending request, docked at the bottom of `area`
/// (the transcript stays visible above it).
pub fn permission(app: &mut App, area: Rect, frame: &mut Frame) {
    let Some(request) = app.permissions.first().cloned() else {
        return;
    };
    let width = area.width;
    let inner_width = usize::from(width.saturating_sub(FRAME_WIDTH));
    let preview = preview_lines(&request, inner_width);
    // Fixed rows: borders 2, heading 1, blank 1, rule 1, choices 3, hint 1.
    let fixed = 9u16;
    let max_height = area.height;
    let preview_rows = u16::try_from(preview.len())
        .unwrap_or(u16::MAX)
        .min(max_height.saturating_sub(fixed))
        .max(1);
    let height = (preview_rows + fixed).min(max_height);
    let rect = Rect::new(area.x, area.bottom() - height, width, height);

    let max_scroll = preview.len().saturating_sub(usize::from(preview_rows));
    let scroll = usize::from(app.permission_ui.scroll).min(max_scroll);
    app.permission_ui.scroll = u16::try_from(scroll).unwrap_or(0);

    let queue = if app.permissions.len() > 1 {
        format!("  (1 of {})", app.permissions.len())
    } else {
        String::new()
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(request.tool.clone(), theme::tool_name()),
        Span::raw(" "),
        Span::raw(truncate(
            &tool_summary(&request.tool, &request.arguments),
            inner_width.saturating_sub(request.tool.len() + queue.len() + 1),
        )),
        Span::styled(queue, theme::dim()),
    ])];
    lines.push(Line::default());
    lines.extend(
        preview
            .into_iter()
            .skip(scroll)
            .take(usize::from(preview_rows)),
    );
    let more = if max_scroll > 0 {
        format!(
            " lines {}-{} of {} · PgUp/PgDn ",
            scroll + 1,
            (scroll + usize::from(preview_rows)).min(max_scroll + usize::from(preview_rows)),
            max_scroll + usize::from(preview_rows)
        )
    } else {
        String::new()
    };
    let rule = format!("{more:─^inner_width$}");
    lines.push(Line::from(Span::styled(rule, theme::border())));
    match &app.permission_ui.reason {
        Some(reason) => {
            lines.push(Line::from(Span::styled(
                "Deny — why? (the agent reads this)",
                theme::bold(),
            )));
            lines.push(Line::from(vec![
                Span::styled("› ", theme::user_marker()),
                Span::raw(reason.clone()),
                Span::styled("▍", theme::dim()),
            ]));
            lines.push(Line::default());
            lines.push(Line::from(Span::styled(
                "Enter deny · Esc back",
                theme::dim(),
            )));
        }
        None => {
            for (i, choice) in CHOICES.iter().enumerate() {
                let selected = i == app.permission_ui.selected;
                let (marker, style) = if selected {
                    ("› ", theme::selected())
                } else {
                    ("  ", theme::plain())
                };
                lines.push(Line::from(vec![
                    Span::styled(marker, theme::user_marker()),
                    Span::styled(format!("{}. {choice}", i + 1), style),
                ]));
            }
            lines.push(Line::from(Span::styled(
                "↑↓ select · Enter confirm · 1/2/3 · Esc deny",
                theme::dim(),
            )));
        }
    }
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).block(block("Permission needed")),
        rect,
    );
}

pub fn overlay(app: &App, overlay: &Overlay, area: Rect, frame: &mut Frame) {
    match overlay {
        Overlay::Help { scroll } => help(*scroll, area, frame),
        Overlay::Sessions { items, selected } => {
            sessions(app, items.as_deref(), *selected, area, frame)
        }
        Overlay::Teams { items, selected } => teams(items.as_deref(), *selected, area, frame),
    }
}

/// Width of the key column of the help screen.
const KEY_COLUMN: usize = 26;

fn help_lines(width: usize) -> Vec<Line<'static>> {
    let key = |k: &str, what: &str| -> Vec<Line<'static>> {
        let rest = [Span::raw(" ".repeat(KEY_COLUMN + 1))];
        let text = [Span::raw(what.to_string())];
        if wrap::str_width(k) > KEY_COLUMN - 2 {
            // A long key gets a line of its own; the text goes underneath.
            let mut lines = vec![Line::from(Span::styled(format!("  {k}"), theme::bold()))];
            lines.extend(wrap::wrap(&text, width, &rest, &rest));
            lines
        } else {
            let first = [Span::styled(format!("  {k:<24} "), theme::bold())];
            wrap::wrap(&text, width, &first, &rest)
        }
    };
    let mut lines = vec![Line::from(Span::styled("Keys", theme::heading()))];
    for (k, what) in [
        ("Enter", "send the prompt"),
        ("Shift/Alt+Enter, Ctrl-J", "new line (or \\ then Enter)"),
        (
            "Up / Down",
            "move between lines; history at the first/last line",
        ),
        ("Esc", "interrupt the running turn"),
        ("Ctrl-C twice", "quit (once: clear the input)"),
        ("PgUp / PgDn", "scroll the conversation"),
        ("Shift+Up / Shift+Down", "scroll by three lines"),
        (
            "Ctrl-Home / Ctrl-End",
            "top of the conversation / follow new output",
        ),
        ("Alt+Up / Alt+Down", "select a tool call"),
        (
            "Ctrl-O",
            "expand or collapse the selected (or last) tool call",
        ),
        ("Tab", "complete a /command or @file"),
        (
            "Ctrl-R",
            "retry a delegation waiting for its unreachable A2A agent; reconnect after a lost connection",
        ),
        ("Ctrl-L", "repaint the screen"),
    ] {
        lines.extend(key(k, what));
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled("Commands", theme::heading())));
    for spec in COMMANDS {
        let help = if spec.args.is_empty() {
            spec.help.to_string()
        } else {
            format!("{} — {}", spec.args, spec.help)
        };
        lines.extend(key(&format!("/{}", spec.name), &help));
    }
    lines.extend(key("/NAME ARGS", "run the skill NAME"));
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        "  @path mentions a project file. Esc closes this help.",
        theme::dim(),
    )));
    lines
}

fn help(scroll: u16, area: Rect, frame: &mut Frame) {
    let width = area.width.saturating_sub(4).min(100);
    let lines = help_lines(usize::from(width.saturating_sub(FRAME_WIDTH)));
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let rect = centered(area, width, height);
    let max_scroll = lines
        .len()
        .saturating_sub(usize::from(rect.height.saturating_sub(2)));
    let scroll = u16::try_from(usize::from(scroll).min(max_scroll)).unwrap_or(0);
    let title = if max_scroll > 0 {
        "Help · ↑↓ PgUp PgDn scroll · Esc close"
    } else {
        "Help · Esc close"
    };
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines)
            .block(block(title))
            .scroll((scroll, 0)),
        rect,
    );
}

fn ago(now_ms: i64, then_ms: i64) -> String {
    if now_ms <= 0 || then_ms <= 0 {
        return String::new();
    }
    format!("{} ago", format_elapsed(now_ms - then_ms))
}

fn sessions(
    app: &App,
    items: Option<&[lumina_client::protocol::methods::SessionInfo]>,
    selected: usize,
    area: Rect,
    frame: &mut Frame,
) {
    let width = area.width.saturating_sub(4).min(120);
    let inner = usize::from(width.saturating_sub(FRAME_WIDTH));
    let mut lines: Vec<Line<'static>> = Vec::new();
    let rows = usize::from(area.height.saturating_sub(5)).max(1);
    match items {
        None => lines.push(Line::from(Span::styled("loading…", theme::dim()))),
        Some([]) => lines.push(Line::from(Span::styled("no sessions yet", theme::dim()))),
        Some(items) => {
            let offset = selected.saturating_sub(rows.saturating_sub(1));
            for (i, session) in items.iter().enumerate().skip(offset).take(rows) {
                let current = app.session.as_ref().is_some_and(|s| s.id == session.id);
                let style: Style = if i == selected {
                    theme::selected()
                } else {
                    theme::plain()
                };
                let id: String = session.id.chars().take(8).collect();
                let meta = format!(
                    "{} {id}  {:>12}  {:<8} {:>7} tok  ",
                    if current { "●" } else { " " },
                    ago(app.now_ms, session.updated_at_ms),
                    session.status,
                    format_tokens(session.usage.input_tokens + session.usage.output_tokens),
                );
                let title = if session.title.is_empty() {
                    "(untitled)".to_string()
                } else {
                    sanitize(&session.title).replace('\n', " ")
                };
                let room = inner.saturating_sub(wrap::str_width(&meta));
                lines.push(Line::from(vec![
                    Span::styled(meta, style.patch(theme::dim())),
                    Span::styled(truncate(&title, room), style),
                ]));
            }
        }
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        "↑↓ select · Enter resume · Esc close",
        theme::dim(),
    )));
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let rect = centered(area, width, height);
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(block("Sessions")), rect);
}

/// The team picker: name, display name and where the team is defined; a broken team says why.
fn teams(items: Option<&[TeamInfo]>, selected: usize, area: Rect, frame: &mut Frame) {
    let width = area.width.saturating_sub(4).min(100);
    let inner = usize::from(width.saturating_sub(FRAME_WIDTH));
    let mut lines: Vec<Line<'static>> = Vec::new();
    let rows = usize::from(area.height.saturating_sub(5)).max(1);
    match items {
        None => lines.push(Line::from(Span::styled("loading…", theme::dim()))),
        Some([]) => lines.push(Line::from(Span::styled(
            "no teams (/NewTeam NAME creates one)",
            theme::dim(),
        ))),
        Some(items) => {
            let offset = selected.saturating_sub(rows.saturating_sub(1));
            for (i, team) in items.iter().enumerate().skip(offset).take(rows) {
                let style: Style = if i == selected {
                    theme::selected()
                } else {
                    theme::plain()
                };
                let name = format!("{:<22} ", sanitize(&team.name));
                let about = match &team.error {
                    Some(error) => format!("broken: {}", sanitize(error).replace('\n', " ")),
                    None => format!(
                        "{} ({})",
                        sanitize(&team.display_name).replace('\n', " "),
                        team.source
                    ),
                };
                let room = inner.saturating_sub(wrap::str_width(&name));
                let about_style = if team.error.is_some() {
                    style.patch(theme::error())
                } else {
                    style.patch(theme::dim())
                };
                lines.push(Line::from(vec![
                    Span::styled(name, style),
                    Span::styled(truncate(&about, room), about_style),
                ]));
            }
        }
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        "↑↓ select · Enter work as this team · Esc close",
        theme::dim(),
    )));
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let rect = centered(area, width, height);
    frame.render_widget(Clear, rect);
    frame.render_widget(Paragraph::new(lines).block(block("Agent teams")), rect);
}
