//! HTML → readable Markdown for `web_fetch`. Fetched pages are hostile input, so they are
//! parsed by html5ever, the WHATWG HTML5 tokenizer and tree builder ([`dom`]): every named
//! character reference, raw-text `<script>`/`<style>`, comments, CDATA, implied end tags and
//! misnested markup behave as in a browser. The tree is then written out: scripts, styles
//! and other non-content elements are dropped; headings, paragraphs, lists, links
//! (`[text](absolute-url)`), block quotes, preformatted blocks, inline code and table rows
//! are kept; whitespace is collapsed outside `<pre>`.

use reqwest::Url;

mod dom;

use dom::{Data, Id, Tree};

/// Elements whose content is never text for a reader. A hidden `<textarea>` is skipped too
/// (pages keep markup templates in them).
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "iframe", "object", "canvas", "title",
    "head", "noembed", "noframes",
];

/// Elements that start and end a paragraph-like block.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "header",
    "footer",
    "main",
    "nav",
    "aside",
    "table",
    "form",
    "figure",
    "figcaption",
    "dl",
    "dt",
    "dd",
    "address",
    "details",
    "summary",
    "ul",
    "ol",
];

/// Nesting shown in the output: list indentation, `> ` prefixes and links inside links stop
/// growing past this many levels (deeper ones read as the level above), so a page of nested
/// quotes or lists cannot blow up into far more output than input.
const MAX_SHOWN_NESTING: usize = 8;

/// Converts an HTML document to Markdown. `base` (the page's URL) resolves relative links,
/// after the document's own `<base href>`.
pub fn html_to_markdown(html: &str, base: Option<&Url>) -> String {
    let tree = dom::parse(html);
    let mut w = Writer {
        out: String::new(),
        pending_space: false,
        pre: 0,
        lists: Vec::new(),
        links: Vec::new(),
        quotes: Vec::new(),
        tables: Vec::new(),
        base: base.cloned(),
    };
    w.base = document_base(&tree, &w);
    enum Step {
        Enter(Id),
        Leave(Id),
    }
    // Depth-first without recursion (the tree may be deep).
    let mut steps = vec![Step::Enter(tree.root())];
    while let Some(step) = steps.pop() {
        match step {
            Step::Enter(id) => {
                match &tree.node(id).data {
                    Data::Text(text) => {
                        w.text(text);
                        continue;
                    }
                    Data::Element(e) => {
                        if SKIPPED.contains(&&*e.name.local)
                            || (e.hidden && e.html_name() == Some("textarea"))
                        {
                            continue;
                        }
                        if let Some(name) = e.html_name() {
                            w.open(name, e.href.as_deref(), e.alt.as_deref());
                            steps.push(Step::Leave(id));
                        }
                    }
                    Data::Document => {}
                    Data::Other => continue,
                }
                steps.extend(tree.children_rev(id).map(Step::Enter));
            }
            Step::Leave(id) => {
                if let Data::Element(e) = &tree.node(id).data {
                    if let Some(name) = e.html_name() {
                        w.close(name);
                    }
                }
            }
        }
    }
    w.finish()
}

/// The first `<base href>` in the document, resolved against the page's URL (HTML's
/// document base URL); else the page's URL.
fn document_base(tree: &Tree, w: &Writer) -> Option<Url> {
    tree.elements()
        .filter(|(_, e)| e.html_name() == Some("base") && e.href.is_some())
        .find(|&(id, _)| tree.in_document(id))
        .and_then(|(_, e)| e.href.as_deref())
        .and_then(|href| w.resolve(href))
        .and_then(|url| Url::parse(&url).ok())
        .or_else(|| w.base.clone())
}

struct Writer {
    out: String,
    pending_space: bool,
    /// Depth of open `<pre>` elements: whitespace is kept inside.
    pre: usize,
    /// Open lists: ordered?, next number.
    lists: Vec<(bool, u32)>,
    /// Open links: output position of the link text, resolved target.
    links: Vec<(usize, Option<String>)>,
    /// Output positions where open block quotes start (`None` past [`MAX_SHOWN_NESTING`]).
    quotes: Vec<Option<usize>>,
    /// Open tables: cells written in the current row.
    tables: Vec<usize>,
    base: Option<Url>,
}

impl Writer {
    /// Writes text (character references already decoded by the parser).
    fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.pre > 0 {
            // No-break spaces are plain ones here too.
            self.out.push_str(&text.replace('\u{a0}', " "));
            return;
        }
        for c in text.chars() {
            if c.is_whitespace() {
                self.pending_space = true;
                continue;
            }
            if self.pending_space && !self.out.is_empty() && !self.out.ends_with([' ', '\n']) {
                self.out.push(' ');
            }
            self.pending_space = false;
            self.out.push(c);
        }
    }

    /// Ends the current line (and leaves a blank line when `blank`).
    fn brk(&mut self, blank: bool) {
        self.pending_space = false;
        if self.out.is_empty() {
            return;
        }
        while self.out.ends_with(' ') {
            self.out.pop();
        }
        let want = if blank { "\n\n" } else { "\n" };
        while !self.out.ends_with(want) {
            self.out.push('\n');
        }
    }

    /// An HTML element starts (`href` and `alt` are its attributes of those names).
    fn open(&mut self, name: &str, href: Option<&str>, alt: Option<&str>) {
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.brk(true);
                let level = usize::from(name.as_bytes()[1] - b'0');
                self.out.push_str(&"#".repeat(level));
                self.out.push(' ');
            }
            "br" => {
                self.out.push('\n');
                self.pending_space = false;
            }
            "hr" => {
                self.brk(true);
                self.out.push_str("---");
                self.brk(true);
            }
            "li" => {
                self.brk(false);
                let depth = (self.lists.len().max(1) - 1).min(MAX_SHOWN_NESTING);
                self.out.push_str(&"  ".repeat(depth));
                match self.lists.last_mut() {
                    Some((true, n)) => {
                        self.out.push_str(&format!("{n}. "));
                        *n += 1;
                    }
                    _ => self.out.push_str("- "),
                }
            }
            "ul" | "ol" => {
                if self.lists.is_empty() {
                    self.brk(true);
                }
                self.lists.push((name == "ol", 1));
            }
            "pre" => {
                self.brk(true);
                self.out.push_str("```\n");
                self.pre += 1;
            }
            "code" if self.pre == 0 => self.inline("`"),
            "a" => {
                self.flush_space();
                let target = href.and_then(|h| self.resolve(h));
                let target = target.filter(|_| self.links.len() < MAX_SHOWN_NESTING);
                self.links.push((self.out.len(), target));
            }
            "img" => {
                if let Some(alt) = alt.filter(|a| !a.trim().is_empty()) {
                    self.text(&format!(" [image: {}] ", alt.trim()));
                }
            }
            "blockquote" => {
                self.brk(true);
                let shown = self.quotes.iter().flatten().count() < MAX_SHOWN_NESTING;
                self.quotes.push(shown.then_some(self.out.len()));
            }
            "table" => {
                self.brk(true);
                self.tables.push(0);
            }
            "tr" => {
                self.brk(false);
                if let Some(cells) = self.tables.last_mut() {
                    *cells = 0;
                }
            }
            "td" | "th" => {
                let cells = self.tables.last().copied().unwrap_or(0);
                if cells > 0 {
                    self.pending_space = false;
                    // After a table nested in the previous cell the row goes on on a new line.
                    self.out.push_str(if self.out.ends_with('\n') {
                        "| "
                    } else {
                        " | "
                    });
                }
                if let Some(cells) = self.tables.last_mut() {
                    *cells += 1;
                }
            }
            _ if BLOCKS.contains(&name) => self.brk(true),
            _ => {}
        }
    }

    fn close(&mut self, name: &str) {
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => self.brk(true),
            "li" | "tr" => self.brk(false),
            "ul" | "ol" => {
                self.lists.pop();
                if self.lists.is_empty() {
                    self.brk(true);
                } else {
                    self.brk(false);
                }
            }
            "pre" => {
                self.pre = self.pre.saturating_sub(1);
                if !self.out.ends_with('\n') {
                    self.out.push('\n');
                }
                self.out.push_str("```");
                self.brk(true);
            }
            "code" if self.pre == 0 => self.inline("`"),
            "a" => self.close_link(),
            "table" => {
                self.tables.pop();
                self.brk(true);
            }
            "blockquote" => {
                if let Some(Some(start)) = self.quotes.pop() {
                    let body = self.out.split_off(self.boundary(start));
                    for line in body.trim_end().lines() {
                        self.out.push_str("> ");
                        self.out.push_str(line);
                        self.out.push('\n');
                    }
                }
                self.brk(true);
            }
            _ if BLOCKS.contains(&name) => self.brk(true),
            _ => {}
        }
    }

    fn inline(&mut self, marker: &str) {
        self.flush_space();
        self.out.push_str(marker);
    }

    fn flush_space(&mut self) {
        if self.pending_space && !self.out.is_empty() && !self.out.ends_with([' ', '\n']) {
            self.out.push(' ');
        }
        self.pending_space = false;
    }

    fn close_link(&mut self) {
        let Some((start, target)) = self.links.pop() else {
            return;
        };
        let start = self.boundary(start);
        let Some(target) = target else { return };
        let text = self.out[start..]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace(['[', ']'], "");
        if text.is_empty() {
            return;
        }
        self.out.truncate(start);
        self.out.push_str(&format!("[{text}]({target})"));
    }

    /// `at` (a position noted earlier) as a char boundary of the output as it is now.
    fn boundary(&self, at: usize) -> usize {
        let mut at = at.min(self.out.len());
        while !self.out.is_char_boundary(at) {
            at -= 1;
        }
        at
    }

    /// An absolute http(s) URL for `href`; `None` for fragments, `javascript:` and the like.
    fn resolve(&self, href: &str) -> Option<String> {
        let href = href.trim();
        if href.is_empty() || href.starts_with('#') {
            return None;
        }
        let url = match &self.base {
            Some(base) => base.join(href).ok()?,
            None => Url::parse(href).ok()?,
        };
        matches!(url.scheme(), "http" | "https" | "mailto").then(|| url.to_string())
    }

    fn finish(mut self) -> String {
        let mut lines: Vec<&str> = Vec::new();
        let mut blank = 0;
        for line in self.out.lines().map(str::trim_end) {
            if line.trim().is_empty() {
                blank += 1;
                if blank > 1 || lines.is_empty() {
                    continue;
                }
            } else {
                blank = 0;
            }
            lines.push(line);
        }
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        self.out = lines.join("\n");
        self.out
    }
}

/// Decodes the character references of `s` written out in full (`&name;` with any of HTML's
/// 2,231 names, `&#65;`, `&#x42;`); others stay as written. A no-break space becomes a plain
/// one. The converter gets its text decoded by the parser; this serves the little it keeps
/// as raw text (a tag cut off at the end of the input).
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded = rest[1..]
            .find(';')
            .filter(|&end| end <= LONGEST_REFERENCE)
            .and_then(|end| reference(&rest[1..end + 2]).map(|c| (c, end + 2)));
        match decoded {
            Some(((first, second), len)) => {
                out.push(if first == '\u{a0}' { ' ' } else { first });
                out.extend(second);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Characters between `&` and `;` in the longest reference (`&CounterClockwiseContourIntegral;`).
const LONGEST_REFERENCE: usize = 31;

/// The character(s) of `name;` (`#…;` numeric, as HTML maps them: NUL, surrogates and
/// values past Unicode become U+FFFD, the C1 range the Windows-1252 characters).
fn reference(name: &str) -> Option<(char, Option<char>)> {
    if let Some(num) = name.strip_prefix('#') {
        let digits = num.strip_suffix(';')?;
        let (digits, radix) = match digits.strip_prefix(['x', 'X']) {
            Some(hex) => (hex, 16),
            None => (digits, 10),
        };
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        let code = u32::from_str_radix(digits, radix).unwrap_or(u32::MAX);
        let c = match code {
            0x80..=0x9f => html5ever::data::C1_REPLACEMENTS[(code - 0x80) as usize]
                .or_else(|| char::from_u32(code)),
            0 => None,
            _ => char::from_u32(code),
        };
        return Some((c.unwrap_or('\u{fffd}'), None));
    }
    match html5ever::data::NAMED_ENTITIES.get(name) {
        Some(&(first, second)) if first != 0 => Some((
            char::from_u32(first)?,
            char::from_u32(second).filter(|&c| c != '\0'),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
