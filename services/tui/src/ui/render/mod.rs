//! Drawing the app into a ratatui frame: the layout (banner, transcript, activity line,
//! input, status line), the completion popup and the modal dialogs. Rendering only reads
//! the state, except for the transcript's line cache and scroll clamping.

pub mod dialogs;
pub mod entries;
pub mod status;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::app::{App, ConnState, PopupKind};
use super::theme;
use super::wrap;

/// Rows the input box may grow to.
const INPUT_MAX_ROWS: u16 = 10;

/// Draws the whole screen.
pub fn draw(app: &mut App, frame: &mut Frame) {
    let area = frame.area();
    if area.width < 20 || area.height < 6 {
        frame.render_widget(Paragraph::new("terminal too small"), area);
        return;
    }
    let visual = app.editor.visual(usize::from(area.width.saturating_sub(2)));
    let max_rows = (area.height / 3).clamp(1, INPUT_MAX_ROWS);
    let input_rows = u16::try_from(visual.rows.len())
        .unwrap_or(u16::MAX)
        .clamp(1, max_rows);
    let banner = u16::from(app.conn != ConnState::Connected);
    let activity =
        u16::from(app.animating() || !app.permissions.is_empty() || !app.parked.is_empty());
    let [banner_area, transcript_area, activity_area, input_area, status_area] =
        Layout::vertical([
            Constraint::Length(banner),
            Constraint::Min(1),
            Constraint::Length(activity),
            Constraint::Length(input_rows + 1),
            Constraint::Length(1),
        ])
        .areas(area);

    status::banner(app, banner_area, frame.buffer_mut());
    draw_transcript(app, transcript_area, frame);
    status::activity(app, activity_area, frame.buffer_mut());
    let cursor = draw_input(app, &visual, input_area, frame);
    status::status_line(app, status_area, frame.buffer_mut());

    let modal = !app.permissions.is_empty() || app.overlay.is_some();
    if !modal {
        draw_popup(app, transcript_area, frame);
        if let Some(cursor) = cursor {
            frame.set_cursor_position(cursor);
        }
    }
    if let Some(overlay) = app.overlay.clone() {
        dialogs::overlay(app, &overlay, transcript_area, frame);
    }
    if !app.permissions.is_empty() {
        dialogs::permission(app, transcript_area, frame);
    }
}

fn draw_transcript(app: &mut App, area: Rect, frame: &mut Frame) {
    if app.transcript.is_empty() {
        frame.render_widget(
            Paragraph::new(welcome(app)).wrap(Wrap { trim: false }),
            area,
        );
        return;
    }
    let (_, more_below) = app.transcript.render(area, frame.buffer_mut());
    if more_below {
        let tag = " ↓ more below · Ctrl-End follows ";
        let width = u16::try_from(wrap::str_width(tag))
            .unwrap_or(0)
            .min(area.width);
        let x = area.x + area.width - width;
        let y = area.y + area.height - 1;
        frame
            .buffer_mut()
            .set_stringn(x, y, tag, usize::from(width), theme::selected());
    }
}

fn welcome(app: &App) -> Vec<Line<'static>> {
    vec![
        Line::from(vec![
            Span::styled("lumina", theme::heading()),
            Span::styled(format!("  ·  {}", app.options.project), theme::dim()),
        ]),
        Line::default(),
        Line::from(Span::styled(
            "Type a prompt and press Enter.  / commands · @ files · Esc interrupts · Ctrl-C twice quits",
            theme::dim(),
        )),
    ]
}

/// Draws the input box; returns where the cursor goes.
fn draw_input(
    app: &App,
    visual: &super::editor::Visual,
    area: Rect,
    frame: &mut Frame,
) -> Option<ratatui::layout::Position> {
    if area.height < 2 {
        return None;
    }
    let buf = frame.buffer_mut();
    let rule = "─".repeat(usize::from(area.width));
    buf.set_string(area.x, area.y, &rule, theme::border());
    let hint = if app.editor.is_empty() {
        " Enter send · Shift+Enter newline · / commands · @ files "
    } else {
        " Enter send · Shift+Enter or Ctrl-J newline "
    };
    let hint_width = u16::try_from(wrap::str_width(hint)).unwrap_or(0);
    if hint_width + 4 < area.width {
        buf.set_string(
            area.x + area.width - hint_width - 2,
            area.y,
            hint,
            theme::dim(),
        );
    }
    let rows = usize::from(area.height - 1);
    let (cursor_col, cursor_row) = visual.cursor;
    let top = cursor_row.saturating_sub(rows - 1);
    for (i, row) in visual.rows.iter().skip(top).take(rows).enumerate() {
        let y = area.y + 1 + u16::try_from(i).unwrap_or(0);
        let prefix = if i + top == 0 { "› " } else { "  " };
        buf.set_string(area.x, y, prefix, theme::user_marker());
        buf.set_stringn(
            area.x + 2,
            y,
            row,
            usize::from(area.width.saturating_sub(2)),
            theme::plain(),
        );
    }
    let x = area.x + 2 + u16::try_from(cursor_col).unwrap_or(0);
    let y = area.y + 1 + u16::try_from(cursor_row - top).unwrap_or(0);
    Some(ratatui::layout::Position::new(
        x.min(area.right().saturating_sub(1)),
        y,
    ))
}

/// The completion popup, drawn over the bottom of the transcript.
fn draw_popup(app: &App, above: Rect, frame: &mut Frame) {
    let Some(popup) = &app.popup else { return };
    let rows = u16::try_from(popup.items.len()).unwrap_or(0);
    let height = (rows + 2).min(above.height);
    if height < 3 {
        return;
    }
    let width = above.width.min(80);
    let area = Rect::new(above.x, above.bottom() - height, width, height);
    let title = match popup.kind {
        PopupKind::Command => " commands · Tab complete · Enter run ",
        PopupKind::File => " files · Tab/Enter insert ",
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme::border())
        .title(Span::styled(title, theme::dim()));
    let inner_width = usize::from(width.saturating_sub(2));
    let column = popup
        .items
        .iter()
        .map(|(text, _)| wrap::str_width(text))
        .max()
        .unwrap_or(0)
        .min(inner_width / 2);
    let lines: Vec<Line<'static>> = popup
        .items
        .iter()
        .enumerate()
        .map(|(i, (text, help))| {
            let style = if i == popup.selected {
                theme::selected()
            } else {
                theme::plain()
            };
            let mut text = wrap::truncate(text, inner_width);
            if !help.is_empty() {
                let pad = column.saturating_sub(wrap::str_width(&text));
                text.push_str(&" ".repeat(pad));
            }
            let room = inner_width.saturating_sub(wrap::str_width(&text) + 2);
            let mut spans = vec![Span::styled(text, style)];
            if !help.is_empty() && room > 4 {
                spans.push(Span::raw("  "));
                spans.push(Span::styled(wrap::truncate(help, room), theme::dim()));
            }
            Line::from(spans)
        })
        .collect();
    frame.render_widget(Clear, area);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

/// A rectangle of at most `width`×`height` centred in `area`.
pub fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect::new(
        area.x + (area.width - width) / 2,
        area.y + (area.height - height) / 2,
        width,
        height,
    )
}
