//! Markdown rendering: block structure, inline styles, streaming (unclosed) input.

use pretty_assertions::assert_eq;
use ratatui::style::Modifier;

use super::*;

fn texts(lines: &[Line<'_>]) -> Vec<String> {
    lines.iter().map(|l| l.to_string()).collect()
}

#[test]
fn blocks_render_with_their_markers() {
    let md = "# Title\n\nSome *text* here.\nSame paragraph.\n\n- one\n  - nested\n- [x] done\n1. first\n> quoted\n\n---\n```rust\nfn main() {}\n```\n| a | b |\n|---|---|\n| 1 | 2 |";
    assert_eq!(
        texts(&render(md, 40)),
        vec![
            "Title",
            "",
            "Some text here. Same paragraph.",
            "",
            "• one",
            "  ◦ nested",
            "☑ done",
            "1. first",
            "│ quoted",
            "",
            "────────────────────────────────────────",
            "│ fn main() {}",
            "a │ b",
            "─────────",
            "1 │ 2",
        ]
    );
}

#[test]
fn inline_styles() {
    let spans = inline(
        "a **b** _c_ `d` ~~e~~ [f](http://x) snake_case_name",
        Style::default(),
    );
    let got: Vec<(String, Style)> = spans
        .iter()
        .map(|s| (s.content.to_string(), s.style))
        .collect();
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let italic = Style::default().add_modifier(Modifier::ITALIC);
    let strike = Style::default().add_modifier(Modifier::CROSSED_OUT);
    assert_eq!(
        got,
        vec![
            ("a ".into(), Style::default()),
            ("b".into(), bold),
            (" ".into(), Style::default()),
            ("c".into(), italic),
            (" ".into(), Style::default()),
            ("d".into(), theme::inline_code()),
            (" ".into(), Style::default()),
            ("e".into(), strike),
            (" ".into(), Style::default()),
            ("f".into(), Style::default().patch(theme::link())),
            (" (http://x)".into(), theme::dim()),
            (" snake_case_name".into(), Style::default()),
        ]
    );
}

#[test]
fn unclosed_markers_stay_literal() {
    let text: String = inline("2 * 3 and **open", Style::default())
        .iter()
        .map(|s| s.content.to_string())
        .collect();
    assert_eq!(text, "2 * 3 and **open");
}

#[test]
fn an_unclosed_fence_renders_as_code_while_streaming() {
    let lines = render("Here:\n```python\ndef f():\n    return 1", 30);
    assert_eq!(texts(&lines), vec!["Here:", "│ def f():", "│     return 1"]);
    assert_eq!(lines[1].spans[1].style, theme::keyword());
}

#[test]
fn list_continuations_and_wrapping_keep_the_indent() {
    let lines = render("- a long item that wraps\n  and continues", 16);
    assert_eq!(
        texts(&lines),
        vec!["• a long item", "  that wraps", "  and continues"]
    );
}
