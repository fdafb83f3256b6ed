//! One transcript entry → its wrapped lines. Pure functions of the entry and the width, so
//! the transcript can cache the result until the entry changes.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::ui::highlight;
use crate::ui::markdown;
use crate::ui::theme;
use crate::ui::transcript::{EntryKind, Level, ToolEntry, ToolState};
use crate::ui::wrap::{self, sanitize};

/// Lines of a diff shown while a tool call is collapsed.
const COLLAPSED_DIFF_LINES: usize = 16;
/// Lines of output shown while a failed call is collapsed.
const COLLAPSED_ERROR_LINES: usize = 3;
/// Most output lines an expanded tool call shows (the rest stays in the tool's log file).
const EXPANDED_MAX_LINES: usize = 2000;

/// Renders `kind` at `width` cells, ending with one blank separator line.
pub fn render(kind: &EntryKind, width: usize) -> Vec<Line<'static>> {
    let width = width.max(4);
    let mut lines = match kind {
        EntryKind::User { text, skill } => user(text, skill.as_deref(), width),
        EntryKind::Assistant { text, streaming } => assistant(text, *streaming, width),
        EntryKind::Tool(tool) => tool_lines(tool, width),
        EntryKind::Tasks(todos) => tasks(todos, width),
        EntryKind::Notice { level, text } => notice(*level, text, width),
        EntryKind::Dim(text) => vec![Line::from(Span::styled(
            wrap::truncate(&format!("· {}", sanitize(text).replace('\n', " ")), width),
            theme::dim(),
        ))],
    };
    lines.push(Line::default());
    lines
}

fn user(text: &str, skill: Option<&str>, width: usize) -> Vec<Line<'static>> {
    let mut lines = wrap::wrap_text(
        &sanitize(text),
        theme::bold(),
        width,
        &[Span::styled("› ", theme::user_marker())],
        &[Span::raw("  ")],
    );
    if let Some(skill) = skill {
        lines.push(Line::from(Span::styled(
            format!("  ↳ skill {skill}"),
            theme::dim(),
        )));
    }
    lines
}

fn assistant(text: &str, streaming: bool, width: usize) -> Vec<Line<'static>> {
    let mut body = markdown::render(text, width - 2);
    if body.is_empty() {
        body.push(Line::default());
    }
    if streaming {
        if let Some(last) = body.last_mut() {
            last.spans.push(Span::styled("▍", theme::dim()));
        }
    }
    for (i, line) in body.iter_mut().enumerate() {
        let prefix = if i == 0 {
            Span::styled("● ", theme::assistant_marker())
        } else {
            Span::raw("  ")
        };
        line.spans.insert(0, prefix);
    }
    body
}

/// A one-line description of a tool call's arguments: the command, path, pattern or URL.
pub fn tool_summary(tool: &str, arguments: &Value) -> String {
    let field = |name: &str| arguments.get(name).and_then(Value::as_str);
    let text = match tool {
        "shell" => field("command").map(str::to_string),
        "read_file" | "write_file" | "edit_file" | "list_dir" => field("path").map(str::to_string),
        "glob" => field("pattern").map(str::to_string),
        "grep" => field("pattern").map(|p| match field("path") {
            Some(path) => format!("{p} in {path}"),
            None => p.to_string(),
        }),
        "web_fetch" | "browser_open" => field("url").map(str::to_string),
        "browser_click" | "browser_type" | "browser_select" | "browser_extract" => {
            field("selector")
                .map(str::to_string)
                .or_else(|| arguments.get("ref").map(|r| format!("ref {r}")))
        }
        "web_search" | "memory_search" => field("query").map(str::to_string),
        "memory_remember" => field("text").map(str::to_string),
        "agent" => field("prompt").map(str::to_string),
        "todo_write" => arguments
            .get("todos")
            .and_then(Value::as_array)
            .map(|t| format!("{} tasks", t.len())),
        _ => None,
    };
    let text = text.unwrap_or_else(|| match arguments {
        Value::Object(map) if map.is_empty() => String::new(),
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    });
    let first = sanitize(&text)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    if text.lines().nth(1).is_some() {
        format!("{first} …")
    } else {
        first
    }
}

fn state_icon(state: &ToolState) -> Span<'static> {
    match state {
        ToolState::Running => Span::styled("◌ ", theme::warning()),
        ToolState::Succeeded => Span::styled("✓ ", theme::ok()),
        ToolState::Failed => Span::styled("✗ ", theme::error()),
        ToolState::Interrupted(_) => Span::styled("■ ", theme::warning()),
    }
}

fn tool_lines(tool: &ToolEntry, width: usize) -> Vec<Line<'static>> {
    let name_style = if tool.selected {
        theme::tool_name().add_modifier(Modifier::REVERSED)
    } else {
        theme::tool_name()
    };
    let summary = tool_summary(&tool.tool, &tool.arguments);
    let head = vec![
        Span::styled(tool.tool.clone(), name_style),
        Span::raw(" "),
        Span::raw(summary),
    ];
    let mut lines = if tool.expanded {
        wrap::wrap(&head, width, &[state_icon(&tool.state)], &[Span::raw("  ")])
    } else {
        let mut one = wrap::wrap(&head, width, &[state_icon(&tool.state)], &[]);
        one.truncate(1);
        one
    };
    let gutter = || [Span::styled("  ⎿ ", theme::dim())];
    let indent = || [Span::raw("    ")];
    if let Some(permission) = &tool.permission {
        lines.extend(wrap::wrap_text(
            permission,
            theme::dim(),
            width,
            &gutter(),
            &indent(),
        ));
    }
    if let ToolState::Interrupted(reason) = &tool.state {
        lines.extend(wrap::wrap_text(
            &format!("interrupted: {reason}"),
            theme::warning(),
            width,
            &gutter(),
            &indent(),
        ));
    }
    // A saved file's path in full (wrapped, never cut): the screenshot is there.
    if let Some(artifact) = &tool.artifact {
        lines.extend(wrap::wrap(
            &[
                Span::styled(
                    format!("{} saved: ", sanitize(&artifact.kind)),
                    theme::dim(),
                ),
                Span::styled(sanitize(&artifact.path), theme::plain()),
            ],
            width,
            &gutter(),
            &indent(),
        ));
    }
    if tool.expanded {
        lines.extend(expanded_body(tool, width));
    } else if tool.artifact.is_none() || tool.state != ToolState::Succeeded {
        lines.extend(collapsed_body(tool, width));
    }
    lines
}

fn collapsed_body(tool: &ToolEntry, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let output = sanitize(&tool.output);
    if let Some(diff) = tool.diff.as_deref().filter(|d| !d.is_empty()) {
        let diff = sanitize(diff);
        let total = diff.lines().count();
        for line in diff.lines().take(COLLAPSED_DIFF_LINES) {
            lines.push(diff_line(line, width));
        }
        if total > COLLAPSED_DIFF_LINES {
            lines.push(more_line(total - COLLAPSED_DIFF_LINES, "diff lines"));
        }
        return lines;
    }
    match tool.state {
        ToolState::Failed => {
            let total = output.lines().count();
            for (i, line) in output.lines().take(COLLAPSED_ERROR_LINES).enumerate() {
                let prefix = if i == 0 { "  ⎿ " } else { "    " };
                lines.push(Line::from(vec![
                    Span::styled(prefix, theme::dim()),
                    Span::styled(
                        wrap::truncate(line, width.saturating_sub(4)),
                        theme::error(),
                    ),
                ]));
            }
            if total > COLLAPSED_ERROR_LINES {
                lines.push(more_line(total - COLLAPSED_ERROR_LINES, "lines"));
            }
        }
        ToolState::Succeeded => {
            let total = output.lines().count();
            if let Some(first) = output.lines().find(|l| !l.trim().is_empty()) {
                let more = if total > 1 {
                    let more = total - 1;
                    let noun = if more == 1 { "line" } else { "lines" };
                    format!(" (+{more} {noun}, ctrl-o to expand)")
                } else {
                    String::new()
                };
                let room = width.saturating_sub(4 + more.chars().count()).max(8);
                lines.push(Line::from(vec![
                    Span::styled("  ⎿ ", theme::dim()),
                    Span::styled(wrap::truncate(first.trim_end(), room), theme::dim()),
                    Span::styled(more, theme::dim()),
                ]));
            }
        }
        ToolState::Running | ToolState::Interrupted(_) => {}
    }
    lines
}

fn more_line(count: usize, what: &str) -> Line<'static> {
    Line::from(Span::styled(
        format!("    … {count} more {what} (ctrl-o to expand)"),
        theme::dim(),
    ))
}

fn diff_line(line: &str, width: usize) -> Line<'static> {
    let mut span = highlight::diff_line(line);
    span.content = wrap::truncate(&span.content, width.saturating_sub(4)).into();
    Line::from(vec![Span::raw("    "), span])
}

fn expanded_body(tool: &ToolEntry, width: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let indent = [Span::raw("    ")];
    let label = |text: &str| Line::from(Span::styled(format!("  {text}"), theme::dim()));
    lines.push(label("arguments"));
    let arguments = match (
        &tool.tool[..],
        tool.arguments.get("command").and_then(Value::as_str),
    ) {
        ("shell", Some(command)) => format!("$ {command}"),
        _ => serde_json::to_string_pretty(&tool.arguments).unwrap_or_default(),
    };
    for line in sanitize(&arguments).lines() {
        lines.extend(wrap::wrap_text(
            line,
            theme::plain(),
            width,
            &indent,
            &indent,
        ));
    }
    if let Some(diff) = tool.diff.as_deref().filter(|d| !d.is_empty()) {
        lines.push(label("diff"));
        for line in sanitize(diff).lines().take(EXPANDED_MAX_LINES) {
            lines.extend(wrap::wrap(
                &[highlight::diff_line(line)],
                width,
                &indent,
                &indent,
            ));
        }
    }
    if !tool.output.is_empty() {
        let exit = tool
            .exit_code
            .map(|code| format!(" (exit code {code})"))
            .unwrap_or_default();
        lines.push(label(&format!("output{exit}")));
        let style = if tool.state == ToolState::Failed {
            theme::error()
        } else {
            theme::plain()
        };
        let output = sanitize(&tool.output);
        let total = output.lines().count();
        for line in output.lines().take(EXPANDED_MAX_LINES) {
            lines.extend(wrap::wrap_text(line, style, width, &indent, &indent));
        }
        if total > EXPANDED_MAX_LINES {
            lines.push(Line::from(Span::styled(
                format!("    … {} more lines", total - EXPANDED_MAX_LINES),
                theme::dim(),
            )));
        }
    }
    lines
}

fn tasks(todos: &[lumina_client::protocol::TodoItem], width: usize) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(vec![
        Span::styled("≡ ", theme::info()),
        Span::styled("Tasks", theme::bold()),
    ])];
    for todo in todos {
        let (mark, style) = match todo.status.as_str() {
            "completed" => ("☑ ", theme::dim().add_modifier(Modifier::CROSSED_OUT)),
            "in_progress" => ("◐ ", theme::warning().add_modifier(Modifier::BOLD)),
            _ => ("☐ ", theme::plain()),
        };
        lines.extend(wrap::wrap_text(
            &sanitize(&todo.content),
            style,
            width,
            &[
                Span::raw("  "),
                Span::styled(mark, style.remove_modifier(Modifier::CROSSED_OUT)),
            ],
            &[Span::raw("    ")],
        ));
    }
    lines
}

fn notice(level: Level, text: &str, width: usize) -> Vec<Line<'static>> {
    let (icon, style): (&str, Style) = match level {
        Level::Info => ("ℹ ", theme::info()),
        Level::Warning => ("⚠ ", theme::warning()),
        Level::Error => ("✗ ", theme::error()),
    };
    let text_style = if level == Level::Info {
        theme::plain()
    } else {
        style
    };
    wrap::wrap_text(
        &sanitize(text),
        text_style,
        width,
        &[Span::styled(icon, style)],
        &[Span::raw("  ")],
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ui::transcript::ToolArtifact;
    use crate::ui::wrap::str_width;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn a_screenshot_shows_its_whole_path_under_the_tool_line() {
        let path = "/home/ada/.lumina/state/tool-results/0f3c/artifacts/screenshot-toolu_01.png";
        let mut tool = ToolEntry::new("toolu_01", "browser_screenshot", json!({}));
        tool.state = ToolState::Succeeded;
        tool.output = format!("Saved a screenshot (1280×800, 48213 bytes) to {path}");
        tool.artifact = Some(ToolArtifact {
            kind: "screenshot".into(),
            path: path.into(),
        });
        assert_eq!(
            text(&render(&EntryKind::Tool(tool.clone()), 100)),
            vec![
                "✓ browser_screenshot".to_string(),
                format!("  ⎿ screenshot saved: {path}"),
                String::new(),
            ]
        );
        // Narrow: the path wraps, nothing of it is cut.
        let narrow = text(&render(&EntryKind::Tool(tool.clone()), 40));
        assert!(narrow.len() > 3, "{narrow:?}");
        assert!(narrow.iter().all(|l| str_width(l) <= 40), "{narrow:?}");
        assert!(
            narrow.concat().replace(' ', "").contains(path),
            "{narrow:?}"
        );
        // Expanded: the path, then the arguments and the output.
        tool.expanded = true;
        let expanded = text(&render(&EntryKind::Tool(tool), 200));
        assert_eq!(expanded[1], format!("  ⎿ screenshot saved: {path}"));
        assert!(expanded.iter().any(|l| l.contains("Saved a screenshot")));
        // The browser tools' arguments summarize as their URL or target.
        assert_eq!(
            tool_summary("browser_open", &json!({"url": "https://docs.rs"})),
            "https://docs.rs"
        );
        assert_eq!(tool_summary("browser_click", &json!({"ref": 3})), "ref 3");
        assert_eq!(
            tool_summary("browser_type", &json!({"selector": "#name", "text": "Ada"})),
            "#name"
        );
    }

    /// Symbols of ambiguous or emoji width render differently across terminals and break
    /// alignment; everything drawn must be one cell wide.
    #[test]
    fn symbols_are_one_cell_wide() {
        for symbol in [
            "●", "›", "◌", "✓", "✗", "■", "⎿", "≡", "☑", "◐", "☐", "ℹ", "⚠", "▍", "•", "◦", "▪",
            "│", "─", "↓", "↑", "…", "⠋", "·", "↳",
        ] {
            assert_eq!(str_width(symbol), 1, "{symbol}");
        }
    }
}
