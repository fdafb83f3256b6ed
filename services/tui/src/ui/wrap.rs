//! Word wrapping of styled text, measured in terminal cells (`unicode-width`), and the
//! sanitizing of untrusted text before it reaches the terminal.
//!
//! The transcript wraps each entry once per width and caches the result, so this code runs
//! only for entries that are new, changed or scrolled into view.

use std::borrow::Cow;

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Columns a tab expands to.
const TAB: &str = "    ";

/// Cells taken by `c` on the terminal (control characters: none).
pub fn char_width(c: char) -> usize {
    c.width().unwrap_or(0)
}

/// Cells taken by `text`.
pub fn str_width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

/// Makes text from the model, tools or the network safe to print: ANSI escape sequences and
/// control characters are removed (a tool's coloured output must not repaint our screen),
/// tabs become spaces, CR-LF becomes LF. Borrowed when nothing needs to change.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' || c == '\u{1b}')
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            '\t' => out.push_str(TAB),
            '\n' => out.push('\n'),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Skips the rest of an escape sequence whose ESC was just read: CSI (`ESC [ … final`),
/// OSC (`ESC ] … BEL|ST`) or a two-character sequence.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        }
        Some(']') => {
            while let Some(c) = chars.next() {
                if c == '\u{7}' {
                    break;
                }
                if c == '\u{1b}' {
                    chars.next();
                    break;
                }
            }
        }
        _ => {}
    }
}

/// A word (or a run of spaces) split into same-style pieces.
#[derive(Default)]
struct Token {
    pieces: Vec<(Style, String)>,
    width: usize,
    space: bool,
}

impl Token {
    fn push(&mut self, style: Style, c: char) {
        match self.pieces.last_mut() {
            Some((last, text)) if *last == style => text.push(c),
            _ => self.pieces.push((style, c.to_string())),
        }
        self.width += char_width(c);
    }
}

fn tokens(spans: &[Span<'_>]) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::new();
    let mut current = Token::default();
    for span in spans {
        for c in span.content.chars() {
            let c = if c == '\t' { ' ' } else { c };
            if c.is_control() {
                continue;
            }
            let space = c == ' ';
            if space != current.space && !current.pieces.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            current.space = space;
            current.push(span.style, c);
        }
    }
    if !current.pieces.is_empty() {
        out.push(current);
    }
    out
}

/// Builds one visual line, merging adjacent text of the same style into one span.
struct LineBuilder {
    spans: Vec<Span<'static>>,
    width: usize,
    /// Width of the prefix: a line holding only its prefix is "empty".
    prefix_width: usize,
    prefix_spans: usize,
}

impl LineBuilder {
    fn new(prefix: &[Span<'static>]) -> Self {
        let width = prefix.iter().map(|s| str_width(&s.content)).sum();
        Self {
            spans: prefix.to_vec(),
            width,
            prefix_width: width,
            prefix_spans: prefix.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.width == self.prefix_width
    }

    fn push(&mut self, style: Style, text: &str, width: usize) {
        match self.spans.last_mut() {
            Some(last) if last.style == style && self.width > self.prefix_width => {
                last.content.to_mut().push_str(text)
            }
            _ => self.spans.push(Span::styled(text.to_string(), style)),
        }
        self.width += width;
    }

    fn finish(mut self) -> Line<'static> {
        // Trailing spaces would only extend highlighted backgrounds.
        while self.spans.len() > self.prefix_spans {
            let Some(last) = self.spans.last_mut() else {
                break;
            };
            let trimmed = last.content.trim_end_matches(' ').len();
            if trimmed == last.content.len() {
                break;
            }
            if trimmed == 0 {
                self.spans.pop();
            } else {
                last.content.to_mut().truncate(trimmed);
                break;
            }
        }
        Line::from(self.spans)
    }
}

/// Wraps one logical line (`spans`) to `width` cells: greedy word wrap, words longer than a
/// line are broken. `first` prefixes the first visual line, `rest` the following ones (a
/// hanging indent). Always returns at least one line.
pub fn wrap(
    spans: &[Span<'_>],
    width: usize,
    first: &[Span<'static>],
    rest: &[Span<'static>],
) -> Vec<Line<'static>> {
    let width = width.max(1);
    let mut out = Vec::new();
    let mut line = LineBuilder::new(first);
    for token in tokens(spans) {
        if token.space {
            // Spaces at a wrap point are dropped; elsewhere they are kept if they fit.
            if line.is_empty() && !out.is_empty() {
                continue;
            }
            if line.width + token.width > width {
                out.push(std::mem::replace(&mut line, LineBuilder::new(rest)).finish());
                continue;
            }
            for (style, text) in &token.pieces {
                line.push(*style, text, str_width(text));
            }
            continue;
        }
        if line.width + token.width > width && !line.is_empty() {
            out.push(std::mem::replace(&mut line, LineBuilder::new(rest)).finish());
        }
        if line.width + token.width <= width {
            for (style, text) in &token.pieces {
                line.push(*style, text, str_width(text));
            }
            continue;
        }
        // Longer than a whole line: break it wherever the line is full.
        for (style, text) in &token.pieces {
            for c in text.chars() {
                let w = char_width(c);
                if line.width + w > width && !line.is_empty() {
                    out.push(std::mem::replace(&mut line, LineBuilder::new(rest)).finish());
                }
                let mut buf = [0u8; 4];
                line.push(*style, c.encode_utf8(&mut buf), w);
            }
        }
    }
    out.push(line.finish());
    out
}

/// Wraps plain text (which may hold newlines) in one style with the same prefix on every
/// line after the first.
pub fn wrap_text(
    text: &str,
    style: Style,
    width: usize,
    first: &[Span<'static>],
    rest: &[Span<'static>],
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for (i, logical) in text.split('\n').enumerate() {
        let prefix = if i == 0 { first } else { rest };
        out.extend(wrap(&[Span::styled(logical, style)], width, prefix, rest));
    }
    out
}

/// Cuts `text` to at most `width` cells, ending with `…` when something was cut.
pub fn truncate(text: &str, width: usize) -> String {
    if str_width(text) <= width {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = char_width(c);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn wraps_words_with_a_hanging_indent() {
        let lines = wrap(
            &[Span::raw("the quick brown fox jumps over the lazy dog")],
            16,
            &[Span::raw("• ")],
            &[Span::raw("  ")],
        );
        assert_eq!(
            texts(&lines),
            vec![
                "• the quick",
                "  brown fox",
                "  jumps over the",
                "  lazy dog"
            ]
        );
    }

    #[test]
    fn breaks_words_longer_than_the_line_and_keeps_styles() {
        let bold = Style::default().add_modifier(ratatui::style::Modifier::BOLD);
        let lines = wrap(
            &[Span::raw("ab "), Span::styled("cdefghij", bold)],
            4,
            &[],
            &[],
        );
        assert_eq!(texts(&lines), vec!["ab", "cdef", "ghij"]);
        assert_eq!(lines[1].spans[0].style, bold);
    }

    #[test]
    fn measures_wide_characters() {
        let lines = wrap(&[Span::raw("日本語のテキスト")], 6, &[], &[]);
        assert_eq!(texts(&lines), vec!["日本語", "のテキ", "スト"]);
        assert_eq!(truncate("日本語", 5), "日本…");
    }

    #[test]
    fn sanitize_strips_escapes_and_controls() {
        assert_eq!(
            sanitize("\u{1b}[31mred\u{1b}[0m\tx\r\n\u{7}ok"),
            "red    x\nok"
        );
        assert!(matches!(sanitize("plain\ntext"), Cow::Borrowed(_)));
        assert_eq!(sanitize("a\u{1b}]0;title\u{7}b"), "ab");
    }

    #[test]
    fn empty_input_is_one_empty_line() {
        assert_eq!(texts(&wrap(&[], 10, &[], &[])), vec![""]);
        assert_eq!(
            texts(&wrap_text("a\n\nb", Style::default(), 10, &[], &[])),
            vec!["a", "", "b"]
        );
    }
}
