//! HTML → readable Markdown for `web_fetch`: a small, forgiving converter (no DOM, no
//! dependencies). Scripts, styles and other non-content elements are dropped; headings,
//! paragraphs, lists, links (`[text](absolute-url)`), block quotes, preformatted blocks,
//! inline code and table rows are kept. Malformed markup degrades to plain text.

use reqwest::Url;

/// Elements whose content is never text for a reader.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "iframe", "object", "canvas", "title", "head",
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

/// Converts an HTML document to Markdown. `base` resolves relative links.
pub fn html_to_markdown(html: &str, base: Option<&Url>) -> String {
    let mut w = Writer {
        out: String::new(),
        pending_space: false,
        pre: 0,
        lists: Vec::new(),
        links: Vec::new(),
        quotes: Vec::new(),
        row_cells: 0,
        base: base.cloned(),
    };
    let mut rest = html;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            w.text(rest);
            break;
        };
        w.text(&rest[..lt]);
        rest = &rest[lt..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let Some(tag) = parse_tag(rest) else {
            // A lone `<` is text.
            w.text("<");
            rest = &rest[1..];
            continue;
        };
        rest = &rest[tag.len..];
        if !tag.closing && SKIPPED.contains(&tag.name.as_str()) && !tag.self_closing {
            rest = skip_element(rest, &tag.name);
            continue;
        }
        if tag.closing {
            w.close(&tag.name);
        } else {
            w.open(&tag);
        }
    }
    w.finish()
}

struct Tag {
    name: String,
    closing: bool,
    self_closing: bool,
    attrs: Vec<(String, String)>,
    /// Bytes of input the tag took, `<` to `>`.
    len: usize,
}

impl Tag {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses `<name attr="v">`, `</name>` or `<!doctype …>` at the start of `s`.
fn parse_tag(s: &str) -> Option<Tag> {
    let bytes = s.as_bytes();
    let mut i = 1;
    let closing = bytes.get(i) == Some(&b'/');
    if closing {
        i += 1;
    }
    if matches!(bytes.get(i), Some(b'!') | Some(b'?')) {
        let end = s.find('>')?;
        return Some(Tag {
            name: String::new(),
            closing: true,
            self_closing: false,
            attrs: Vec::new(),
            len: end + 1,
        });
    }
    let start = i;
    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'-') {
        i += 1;
    }
    if i == start {
        return None;
    }
    let name = s[start..i].to_ascii_lowercase();
    let mut attrs = Vec::new();
    let mut self_closing = false;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        match bytes.get(i) {
            None => return None,
            Some(b'>') => break,
            Some(b'/') => {
                self_closing = true;
                i += 1;
                continue;
            }
            _ => {}
        }
        let name_start = i;
        while i < bytes.len()
            && !matches!(bytes[i], b'=' | b'>' | b'/')
            && !bytes[i].is_ascii_whitespace()
        {
            i += 1;
        }
        let attr = s[name_start..i].to_ascii_lowercase();
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if bytes.get(i) == Some(&b'=') {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            match bytes.get(i) {
                Some(&q) if q == b'"' || q == b'\'' => {
                    let close = s[i + 1..].find(q as char)? + i + 1;
                    value = decode_entities(&s[i + 1..close]);
                    i = close + 1;
                }
                _ => {
                    let v_start = i;
                    while i < bytes.len() && bytes[i] != b'>' && !bytes[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    value = decode_entities(&s[v_start..i]);
                }
            }
        }
        if !attr.is_empty() {
            attrs.push((attr, value));
        }
    }
    Some(Tag {
        name,
        closing,
        self_closing,
        attrs,
        len: i + 1,
    })
}

/// Skips past `</name>` (case-insensitive); the rest of the input when it never closes.
fn skip_element<'a>(s: &'a str, name: &str) -> &'a str {
    let needle = format!("</{name}");
    let lower = s.to_ascii_lowercase();
    match lower.find(&needle) {
        Some(at) => {
            let after = &s[at..];
            after.find('>').map_or("", |end| &after[end + 1..])
        }
        None => "",
    }
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
    /// Output positions where open block quotes start.
    quotes: Vec<usize>,
    row_cells: usize,
    base: Option<Url>,
}

impl Writer {
    fn text(&mut self, raw: &str) {
        if raw.is_empty() {
            return;
        }
        let text = decode_entities(raw);
        if self.pre > 0 {
            self.out.push_str(&text);
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

    fn open(&mut self, tag: &Tag) {
        let name = tag.name.as_str();
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
                let depth = self.lists.len().max(1) - 1;
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
                let target = tag.attr("href").and_then(|h| self.resolve(h));
                self.links.push((self.out.len(), target));
            }
            "img" => {
                if let Some(alt) = tag.attr("alt").filter(|a| !a.trim().is_empty()) {
                    self.text(&format!(" [image: {}] ", alt.trim()));
                }
            }
            "blockquote" => {
                self.brk(true);
                self.quotes.push(self.out.len());
            }
            "tr" => {
                self.brk(false);
                self.row_cells = 0;
            }
            "td" | "th" => {
                if self.row_cells > 0 {
                    self.pending_space = false;
                    self.out.push_str(" | ");
                }
                self.row_cells += 1;
            }
            "base" => {
                if let Some(href) = tag.attr("href").and_then(|h| self.resolve(h)) {
                    self.base = Url::parse(&href).ok();
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
            "blockquote" => {
                if let Some(start) = self.quotes.pop() {
                    let body = self.out.split_off(start.min(self.out.len()));
                    for line in body.trim_end().lines() {
                        self.out.push_str("> ");
                        self.out.push_str(line);
                        self.out.push('\n');
                    }
                    self.brk(true);
                }
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
        let start = start.min(self.out.len());
        let text = self.out[start..].trim();
        let Some(target) = target else { return };
        if text.is_empty() {
            return;
        }
        let text = text.replace(['[', ']'], "");
        self.out.truncate(start);
        self.out.push_str(&format!("[{text}]({target})"));
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

/// Decodes the common named entities and all numeric ones; unknown entities stay as written.
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
            .filter(|&end| end <= 10)
            .and_then(|end| entity(&rest[1..1 + end]).map(|c| (c, end + 2)));
        match decoded {
            Some((c, len)) => {
                out.push(c);
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

fn entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code).filter(|c| *c != '\0');
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "middot" => '·',
        "bull" => '•',
        "times" => '×',
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
