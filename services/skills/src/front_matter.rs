//! A small front-matter reader for `SKILL.md`: a leading `---` fenced block of
//! `key: value` lines, then the Markdown body.
//!
//! This is deliberately not YAML. Supported: plain values (a ` #` starts a comment;
//! indented continuation lines are folded with spaces), `"double"` (with `\"`, `\\`,
//! `\n`, `\t` escapes) and `'single'` (with `''`) quoted values, `|` literal and `>`
//! folded block values (trailing newlines are dropped), and a key with an empty value
//! followed by an indented block (a YAML list or map), kept as dedented raw text so
//! other tools' keys (e.g. `allowed-tools`) survive. Blank lines and `#` comment lines
//! are skipped. Anything else is an error naming the line.

use std::collections::BTreeMap;

/// A parsed document.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FrontMatter {
    /// The `key: value` pairs, or `None` when the document has no front matter.
    pub fields: Option<BTreeMap<String, String>>,
    /// Everything after the closing fence (or the whole document), trimmed.
    pub body: String,
}

/// Why a front-matter block could not be read. Lines are 1-based, counted in the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontMatterError {
    #[error("front matter opened with `---` on line 1 is never closed with `---`")]
    Unterminated,
    #[error("front matter line {line}: {reason}")]
    Line { line: usize, reason: &'static str },
    #[error("front matter line {line}: duplicate key `{key}`")]
    DuplicateKey { line: usize, key: String },
}

/// Splits `text` into front matter and body. A UTF-8 BOM and CRLF line ends are accepted.
pub fn parse(text: &str) -> Result<FrontMatter, FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Ok(FrontMatter {
            fields: None,
            body: text.trim().to_string(),
        });
    }

    let mut offset = first.len();
    let mut header: Vec<&str> = Vec::new();
    let mut closed = false;
    for line in lines {
        offset += line.len();
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            closed = true;
            break;
        }
        header.push(trimmed);
    }
    if !closed {
        return Err(FrontMatterError::Unterminated);
    }

    Ok(FrontMatter {
        fields: Some(parse_fields(&header)?),
        body: text.get(offset..).unwrap_or_default().trim().to_string(),
    })
}

/// `header[i]` is file line `i + 2` (line 1 is the opening fence).
fn parse_fields(header: &[&str]) -> Result<BTreeMap<String, String>, FrontMatterError> {
    let mut fields = BTreeMap::new();
    let mut i = 0;
    while i < header.len() {
        let line = header[i];
        let line_no = i + 2;
        i += 1;
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if trimmed.len() != line.len() {
            return Err(FrontMatterError::Line {
                line: line_no,
                reason: "unexpected indentation (continuation of nothing)",
            });
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(FrontMatterError::Line {
                line: line_no,
                reason: "expected `key: value`",
            });
        };
        let key = key.trim_end();
        let valid_key = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid_key {
            return Err(FrontMatterError::Line {
                line: line_no,
                reason: "expected `key: value` with a key of letters, digits, `_`, `-` or `.`",
            });
        }

        // Indented (or blank) lines that follow belong to this key.
        let start = i;
        while i < header.len()
            && (header[i].trim().is_empty() || header[i].starts_with([' ', '\t']))
        {
            i += 1;
        }
        let mut end = i;
        while end > start && header[end - 1].trim().is_empty() {
            end -= 1;
        }
        i = end;
        let continuation = &header[start..end];

        let value =
            parse_value(value.trim(), continuation).map_err(|reason| FrontMatterError::Line {
                line: line_no,
                reason,
            })?;
        if fields.insert(key.to_string(), value).is_some() {
            return Err(FrontMatterError::DuplicateKey {
                line: line_no,
                key: key.to_string(),
            });
        }
    }
    Ok(fields)
}

fn parse_value(value: &str, continuation: &[&str]) -> Result<String, &'static str> {
    let block = value.strip_prefix('|').map(|rest| (rest, false));
    let block = block.or_else(|| value.strip_prefix('>').map(|rest| (rest, true)));
    if let Some((indicators, folded)) = block {
        if !indicators
            .chars()
            .all(|c| matches!(c, '-' | '+') || c.is_ascii_digit())
        {
            return Err("unexpected text after a `|` or `>` block indicator");
        }
        let lines = dedent(continuation);
        return Ok(if folded {
            fold(&lines)
        } else {
            lines.join("\n")
        });
    }
    if value.starts_with('"') || value.starts_with('\'') {
        let mut joined = value.to_string();
        for line in continuation {
            joined.push(' ');
            joined.push_str(line.trim());
        }
        return unquote(&joined);
    }
    if value.is_empty() {
        // A nested YAML list or map: keep it as raw text for whoever knows its shape.
        return Ok(dedent(continuation).join("\n"));
    }
    let mut parts = vec![strip_comment(value)];
    parts.extend(continuation.iter().map(|l| strip_comment(l.trim())));
    Ok(parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" "))
}

fn strip_comment(plain: &str) -> &str {
    match plain.find(" #") {
        Some(at) => plain[..at].trim_end(),
        None => plain,
    }
}

/// Removes the smallest indentation shared by the non-blank lines.
fn dedent(lines: &[&str]) -> Vec<String> {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or_default().to_string())
        .collect()
}

/// YAML folding: lines join with a space, a blank line becomes a newline.
fn fold(lines: &[String]) -> String {
    let mut out = String::new();
    let mut pending_space = false;
    for line in lines {
        if line.trim().is_empty() {
            out.push('\n');
            pending_space = false;
        } else {
            if pending_space {
                out.push(' ');
            }
            out.push_str(line.trim_end());
            pending_space = true;
        }
    }
    out
}

fn unquote(value: &str) -> Result<String, &'static str> {
    let mut chars = value.chars();
    let quote = chars.next().ok_or("empty quoted value")?;
    let mut out = String::new();
    loop {
        let Some(c) = chars.next() else {
            return Err("quoted value is never closed");
        };
        match (quote, c) {
            ('"', '\\') => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(c @ ('"' | '\\' | '/')) => out.push(c),
                _ => return Err("unsupported escape in a double-quoted value"),
            },
            ('\'', '\'') if chars.clone().next() == Some('\'') => {
                chars.next();
                out.push('\'');
            }
            (q, c) if c == q => break,
            (_, c) => out.push(c),
        }
    }
    let rest = chars.as_str().trim();
    if rest.is_empty() || rest.starts_with('#') {
        Ok(out)
    } else {
        Err("unexpected text after a quoted value")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn fields(text: &str) -> BTreeMap<String, String> {
        parse(text).unwrap().fields.unwrap()
    }

    #[test]
    fn plain_quoted_and_block_values() {
        let text = "\u{feff}---\r\nname: review  # the slash command\r\n\
            description: \"Checks \\\"auth\\\" flows\"\r\nsingle: 'it''s'\r\n\
            folded: >\n  one\n  two\n\n  three\nliteral: |-\n  a\n    b\nallowed-tools:\n  - Bash\n  - Read\n\
            plain: first\n  second\n---\n\n# Body\ntext\n";
        let doc = parse(text).unwrap();
        let want: BTreeMap<String, String> = [
            ("name", "review"),
            ("description", "Checks \"auth\" flows"),
            ("single", "it's"),
            ("folded", "one two\nthree"),
            ("literal", "a\n  b"),
            ("allowed-tools", "- Bash\n- Read"),
            ("plain", "first second"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(doc.fields, Some(want));
        assert_eq!(doc.body, "# Body\ntext");
    }

    #[test]
    fn no_front_matter_is_all_body() {
        assert_eq!(
            parse("# Title\n---\nx").unwrap(),
            FrontMatter {
                fields: None,
                body: "# Title\n---\nx".into()
            }
        );
        assert_eq!(fields("---\n---\nbody"), BTreeMap::new());
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(parse("---\nname: x\n"), Err(FrontMatterError::Unterminated));
        assert_eq!(
            parse("---\nname: x\njust words\n---\n"),
            Err(FrontMatterError::Line {
                line: 3,
                reason: "expected `key: value`"
            })
        );
        assert_eq!(
            parse("---\nname: a\nname: b\n---\n"),
            Err(FrontMatterError::DuplicateKey {
                line: 3,
                key: "name".into()
            })
        );
        assert!(matches!(
            parse("---\n\ndescription: \"open\n---\n"),
            Err(FrontMatterError::Line { line: 3, .. })
        ));
        assert!(matches!(
            parse("---\n  indented: x\n---\n"),
            Err(FrontMatterError::Line { line: 2, .. })
        ));
        assert!(matches!(
            parse("---\nmy key: x\n---\n"),
            Err(FrontMatterError::Line { line: 2, .. })
        ));
    }
}
