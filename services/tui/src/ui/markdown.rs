//! Markdown → wrapped, styled lines for the transcript: ATX headings, bullet, ordered and
//! task lists (nested by indentation), block quotes, rules, tables (kept as text), fenced
//! code blocks with [`highlight`](super::highlight), and inline emphasis, strong, strike,
//! `code` and links.
//!
//! Hand-written rather than a CommonMark parser: model output uses a small, regular subset,
//! and partial text (mid-stream, an unclosed fence) must render sensibly on every delta.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::highlight;
use super::theme;
use super::wrap::{self, str_width};

/// Renders `text` to lines at most `width` cells wide.
pub fn render(text: &str, width: usize) -> Vec<Line<'static>> {
    let text = wrap::sanitize(text);
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut paragraph: Vec<&str> = Vec::new();
    let mut fence: Option<(String, String)> = None; // (marker, language)
    let mut last_blank = true;

    let flush = |paragraph: &mut Vec<&str>, out: &mut Vec<Line<'static>>| {
        if !paragraph.is_empty() {
            let joined = paragraph.join(" ");
            out.extend(wrap::wrap(
                &inline(&joined, theme::plain()),
                width,
                &[],
                &[],
            ));
            paragraph.clear();
        }
    };

    for raw in text.split('\n') {
        let trimmed = raw.trim_start();
        if let Some((marker, language)) = &fence {
            if trimmed.starts_with(marker.as_str()) && trimmed.trim_end() == marker.as_str() {
                fence = None;
                continue;
            }
            out.extend(code_line(language, raw, width));
            continue;
        }
        if let Some(marker) = fence_marker(trimmed) {
            flush(&mut paragraph, &mut out);
            let language = trimmed[marker.len()..].trim().to_string();
            fence = Some((marker, language));
            last_blank = false;
            continue;
        }
        if trimmed.is_empty() {
            flush(&mut paragraph, &mut out);
            if !last_blank {
                out.push(Line::default());
            }
            last_blank = true;
            continue;
        }
        last_blank = false;
        if let Some((level, title)) = heading(trimmed) {
            flush(&mut paragraph, &mut out);
            let mut style = theme::heading();
            if level == 1 {
                style = style.add_modifier(Modifier::UNDERLINED);
            } else if level >= 3 {
                style = theme::bold();
            }
            out.extend(wrap::wrap(&inline(title, style), width, &[], &[]));
        } else if is_rule(trimmed) {
            flush(&mut paragraph, &mut out);
            out.push(Line::from(Span::styled(
                "─".repeat(width.min(60)),
                theme::dim(),
            )));
        } else if let Some(item) = list_item(raw) {
            flush(&mut paragraph, &mut out);
            out.extend(render_item(&item, width));
        } else if let Some(quoted) = trimmed.strip_prefix('>') {
            flush(&mut paragraph, &mut out);
            let bar = [Span::styled("│ ", theme::dim())];
            let style = Style::default().add_modifier(Modifier::ITALIC);
            out.extend(wrap::wrap(
                &inline(quoted.trim_start(), style),
                width,
                &bar,
                &bar,
            ));
        } else if trimmed.starts_with('|') {
            flush(&mut paragraph, &mut out);
            out.extend(table_row(trimmed, width));
        } else if !paragraph.is_empty() || !continues_item(raw, &out) {
            paragraph.push(trimmed);
        } else {
            // An indented line right after a list item continues that item.
            let indent = [Span::raw(" ".repeat(item_indent(&out)))];
            out.extend(wrap::wrap(
                &inline(trimmed, theme::plain()),
                width,
                &indent,
                &indent,
            ));
        }
    }
    flush(&mut paragraph, &mut out);
    while out.last().is_some_and(|l| l.width() == 0) {
        out.pop();
    }
    out
}

fn fence_marker(trimmed: &str) -> Option<String> {
    for marker in ["```", "~~~"] {
        if trimmed.starts_with(marker) {
            let ch = marker.chars().next().unwrap_or('`');
            let len = trimmed.chars().take_while(|c| *c == ch).count();
            return Some(ch.to_string().repeat(len));
        }
    }
    None
}

fn code_line(language: &str, raw: &str, width: usize) -> Vec<Line<'static>> {
    let gutter = [Span::styled("│ ", theme::code_gutter())];
    wrap::wrap(
        &highlight::highlight(language, raw),
        width,
        &gutter,
        &gutter,
    )
}

fn heading(trimmed: &str) -> Option<(usize, &str)> {
    let level = trimmed.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&level) {
        let rest = &trimmed[level..];
        if rest.is_empty() || rest.starts_with(' ') {
            return Some((level, rest.trim().trim_end_matches('#').trim_end()));
        }
    }
    None
}

fn is_rule(trimmed: &str) -> bool {
    let t: String = trimmed.chars().filter(|c| !c.is_whitespace()).collect();
    t.len() >= 3
        && (t.chars().all(|c| c == '-')
            || t.chars().all(|c| c == '*')
            || t.chars().all(|c| c == '_'))
}

struct Item<'a> {
    depth: usize,
    marker: String,
    text: &'a str,
}

fn list_item(raw: &str) -> Option<Item<'_>> {
    let spaces = raw.len() - raw.trim_start_matches(' ').len();
    let rest = &raw[spaces..];
    let depth = spaces / 2;
    let bullet = ["• ", "◦ ", "▪ "][depth % 3];
    for m in ["- ", "* ", "+ "] {
        if let Some(text) = rest.strip_prefix(m) {
            let (marker, text) = if let Some(t) = text.strip_prefix("[ ] ") {
                ("☐ ".to_string(), t)
            } else if let Some(t) = text
                .strip_prefix("[x] ")
                .or_else(|| text.strip_prefix("[X] "))
            {
                ("☑ ".to_string(), t)
            } else {
                (bullet.to_string(), text)
            };
            return Some(Item {
                depth,
                marker,
                text,
            });
        }
    }
    let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
    if (1..=3).contains(&digits) {
        let after = &rest[digits..];
        if let Some(text) = after
            .strip_prefix(". ")
            .or_else(|| after.strip_prefix(") "))
        {
            return Some(Item {
                depth,
                marker: format!("{}. ", &rest[..digits]),
                text,
            });
        }
    }
    None
}

fn render_item(item: &Item<'_>, width: usize) -> Vec<Line<'static>> {
    let indent = "  ".repeat(item.depth);
    let first = [
        Span::raw(indent.clone()),
        Span::styled(item.marker.clone(), theme::dim()),
    ];
    let rest = [Span::raw(format!(
        "{indent}{}",
        " ".repeat(str_width(&item.marker))
    ))];
    wrap::wrap(&inline(item.text, theme::plain()), width, &first, &rest)
}

/// True when `raw` is indented and the previous output line belongs to a list item.
fn continues_item(raw: &str, out: &[Line<'static>]) -> bool {
    raw.starts_with("  ") && item_indent(out) > 0
}

/// The text column of the list item the last output line belongs to (0: not an item).
fn item_indent(out: &[Line<'static>]) -> usize {
    let Some(last) = out.last() else { return 0 };
    let mut column = 0;
    for span in &last.spans {
        let text = span.content.as_ref();
        if text.trim().is_empty() {
            column += str_width(text);
            continue;
        }
        if ["• ", "◦ ", "▪ ", "☐ ", "☑ "].contains(&text)
            || (text.ends_with(". ")
                && text
                    .trim_end_matches(". ")
                    .chars()
                    .all(|c| c.is_ascii_digit()))
        {
            return column + str_width(text);
        }
        return if column > 0 { column } else { 0 };
    }
    0
}

fn table_row(trimmed: &str, width: usize) -> Vec<Line<'static>> {
    let is_separator = trimmed.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '));
    if is_separator {
        return vec![Line::from(Span::styled(
            wrap::truncate(&"─".repeat(str_width(trimmed)), width),
            theme::dim(),
        ))];
    }
    let mut spans = Vec::new();
    for (i, cell) in trimmed.trim_matches('|').split('|').enumerate() {
        if i > 0 {
            spans.push(Span::styled(" │ ", theme::dim()));
        }
        spans.extend(inline(cell.trim(), theme::plain()));
    }
    wrap::wrap(&spans, width, &[], &[])
}

/// Inline markup → spans on top of `base`.
pub fn inline(text: &str, base: Style) -> Vec<Span<'static>> {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<Span<'static>> = Vec::new();
    let mut buf = String::new();
    let mut active = Modifier::empty();
    let mut style = base;
    let mut i = 0;
    let push = |buf: &mut String, out: &mut Vec<Span<'static>>, style: Style| {
        if !buf.is_empty() {
            out.push(Span::styled(std::mem::take(buf), style));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() && chars[i + 1].is_ascii_punctuation() {
            buf.push(chars[i + 1]);
            i += 2;
            continue;
        }
        if c == '`' {
            let ticks = run_len(&chars, i, '`');
            if let Some(end) = find_run(&chars, i + ticks, '`', ticks) {
                push(&mut buf, &mut out, style);
                let code: String = chars[i + ticks..end].iter().collect();
                out.push(Span::styled(code.trim().to_string(), theme::inline_code()));
                i = end + ticks;
                continue;
            }
        }
        if c == '[' {
            if let Some((label_end, url_end)) = link_at(&chars, i) {
                push(&mut buf, &mut out, style);
                let label: String = chars[i + 1..label_end].iter().collect();
                let url: String = chars[label_end + 2..url_end].iter().collect();
                out.extend(
                    inline(&label, style)
                        .into_iter()
                        .map(|s| s.patch_style(theme::link())),
                );
                if url != label {
                    out.push(Span::styled(format!(" ({url})"), theme::dim()));
                }
                i = url_end + 1;
                continue;
            }
        }
        if let Some((len, modifier)) = emphasis_at(&chars, i) {
            let opening = !active.contains(modifier);
            let word_inside = |j: usize| chars.get(j).is_some_and(|c| c.is_alphanumeric());
            // `_` only emphasizes at word boundaries (snake_case stays plain).
            let boundary_ok = c != '_'
                || if opening {
                    i == 0 || !word_inside(i - 1)
                } else {
                    !word_inside(i + len)
                };
            let closes_later =
                !opening || find_run(&chars, i + len, c, len).is_some_and(|end| end > i + len);
            let hugs_text = if opening {
                chars.get(i + len).is_some_and(|c| !c.is_whitespace())
            } else {
                i > 0 && !chars[i - 1].is_whitespace()
            };
            if boundary_ok && closes_later && hugs_text {
                push(&mut buf, &mut out, style);
                active.toggle(modifier);
                style = base.add_modifier(active);
                i += len;
                continue;
            }
        }
        buf.push(c);
        i += 1;
    }
    push(&mut buf, &mut out, style);
    out
}

fn emphasis_at(chars: &[char], i: usize) -> Option<(usize, Modifier)> {
    let c = chars[i];
    match c {
        '*' | '_' => {
            if run_len(chars, i, c) >= 2 {
                Some((2, Modifier::BOLD))
            } else {
                Some((1, Modifier::ITALIC))
            }
        }
        '~' if run_len(chars, i, '~') >= 2 => Some((2, Modifier::CROSSED_OUT)),
        _ => None,
    }
}

fn run_len(chars: &[char], at: usize, c: char) -> usize {
    chars[at..].iter().take_while(|x| **x == c).count()
}

/// Start of the next run of exactly... at least `len` copies of `c` at or after `from`.
fn find_run(chars: &[char], from: usize, c: char, len: usize) -> Option<usize> {
    let mut j = from;
    while j + len <= chars.len() {
        if chars[j..j + len].iter().all(|x| *x == c) {
            return Some(j);
        }
        j += 1;
    }
    None
}

/// `[label](url)` starting at `i`: the indexes of `]` and `)`.
fn link_at(chars: &[char], i: usize) -> Option<(usize, usize)> {
    let label_end = (i + 1..chars.len()).find(|&j| chars[j] == ']')?;
    if chars.get(label_end + 1) != Some(&'(') {
        return None;
    }
    let url_end = (label_end + 2..chars.len()).find(|&j| chars[j] == ')')?;
    if chars[label_end + 2..url_end]
        .iter()
        .any(|c| c.is_whitespace())
    {
        return None;
    }
    Some((label_end, url_end))
}

#[cfg(test)]
#[path = "markdown_tests.rs"]
mod tests;
