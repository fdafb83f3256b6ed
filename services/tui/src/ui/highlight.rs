//! A small, line-based syntax highlighter for fenced code blocks and diffs: keywords,
//! strings, numbers, comments and type-like names for the languages an agent writes most.
//! Deliberately simple (no grammar, no state across lines): good enough to read code in a
//! transcript without a heavy dependency.

use ratatui::style::Style;
use ratatui::text::Span;

use super::theme;

const RUST: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while",
];
const PYTHON: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "False", "finally", "for", "from", "global", "if", "import", "in", "is",
    "lambda", "None", "nonlocal", "not", "or", "pass", "raise", "return", "True", "try", "while",
    "with", "yield", "self",
];
const JS: &[&str] = &[
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "default",
    "delete",
    "do",
    "else",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "from",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "of",
    "return",
    "static",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "type",
    "typeof",
    "undefined",
    "var",
    "void",
    "while",
    "yield",
];
const GO: &[&str] = &[
    "break",
    "case",
    "chan",
    "const",
    "continue",
    "default",
    "defer",
    "else",
    "fallthrough",
    "false",
    "for",
    "func",
    "go",
    "goto",
    "if",
    "import",
    "interface",
    "map",
    "nil",
    "package",
    "range",
    "return",
    "select",
    "struct",
    "switch",
    "true",
    "type",
    "var",
];
const C_LIKE: &[&str] = &[
    "auto",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "continue",
    "default",
    "delete",
    "do",
    "double",
    "else",
    "enum",
    "extends",
    "false",
    "final",
    "float",
    "for",
    "if",
    "implements",
    "import",
    "int",
    "long",
    "namespace",
    "new",
    "null",
    "nullptr",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "short",
    "static",
    "struct",
    "switch",
    "template",
    "this",
    "throw",
    "true",
    "try",
    "typedef",
    "unsigned",
    "using",
    "var",
    "virtual",
    "void",
    "while",
    "#include",
    "#define",
];
const SHELL: &[&str] = &[
    "case", "do", "done", "elif", "else", "esac", "export", "fi", "for", "function", "if", "in",
    "local", "return", "then", "until", "while", "echo", "cd", "set",
];
const SQL: &[&str] = &[
    "select",
    "from",
    "where",
    "insert",
    "into",
    "values",
    "update",
    "set",
    "delete",
    "create",
    "table",
    "index",
    "drop",
    "alter",
    "join",
    "left",
    "right",
    "inner",
    "on",
    "and",
    "or",
    "not",
    "null",
    "primary",
    "key",
    "references",
    "order",
    "by",
    "group",
    "limit",
    "as",
];
const DATA: &[&str] = &["true", "false", "null"];

/// What a language looks like to this highlighter.
struct Lang {
    keywords: &'static [&'static str],
    /// Line-comment starters.
    comments: &'static [&'static str],
    /// Keywords compare case-insensitively (SQL).
    fold_case: bool,
    /// Capitalized identifiers are types (Rust, Go, Java, TypeScript...).
    types: bool,
}

fn lang(name: &str) -> Lang {
    let name = name.trim().to_ascii_lowercase();
    let (keywords, comments, fold_case, types): (_, &[&str], _, _) = match name.as_str() {
        "rust" | "rs" => (RUST, &["//"], false, true),
        "python" | "py" => (PYTHON, &["#"], false, true),
        "js" | "javascript" | "ts" | "typescript" | "jsx" | "tsx" | "mjs" => {
            (JS, &["//"], false, true)
        }
        "go" | "golang" => (GO, &["//"], false, true),
        "c" | "h" | "cpp" | "c++" | "cc" | "hpp" | "java" | "kotlin" | "kt" | "swift" | "cs"
        | "csharp" => (C_LIKE, &["//"], false, true),
        "sh" | "bash" | "shell" | "zsh" | "console" | "shell-session" => {
            (SHELL, &["#"], false, false)
        }
        "sql" => (SQL, &["--"], true, false),
        "json" | "jsonc" => (DATA, &["//"], false, false),
        "toml" | "yaml" | "yml" | "ini" | "conf" => (DATA, &["#"], false, false),
        _ => (&[][..], &["//", "#"], false, false),
    };
    Lang {
        keywords,
        comments,
        fold_case,
        types,
    }
}

/// True when a fenced block of this language is a diff.
pub fn is_diff_lang(name: &str) -> bool {
    matches!(name.trim(), "diff" | "patch" | "udiff")
}

/// Colours one line of a unified diff.
pub fn diff_line(line: &str) -> Span<'static> {
    let style = if line.starts_with("+++") || line.starts_with("---") {
        theme::bold()
    } else if line.starts_with('+') {
        theme::diff_added()
    } else if line.starts_with('-') {
        theme::diff_removed()
    } else if line.starts_with("@@") {
        theme::diff_hunk()
    } else {
        theme::plain()
    };
    Span::styled(line.to_string(), style)
}

/// Colours one line of code in `language` (a fence's info string; may be empty).
pub fn highlight(language: &str, line: &str) -> Vec<Span<'static>> {
    if is_diff_lang(language) {
        return vec![diff_line(line)];
    }
    let lang = lang(language);
    let mut out: Vec<Span<'static>> = Vec::new();
    let mut plain = String::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let flush = |plain: &mut String, out: &mut Vec<Span<'static>>| {
        if !plain.is_empty() {
            out.push(Span::raw(std::mem::take(plain)));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if lang
            .comments
            .iter()
            .any(|start| starts_with_at(&chars, i, start))
            && (i == 0 || chars[i - 1].is_whitespace() || !lang.comments.contains(&"#"))
        {
            flush(&mut plain, &mut out);
            out.push(Span::styled(
                chars[i..].iter().collect::<String>(),
                theme::comment(),
            ));
            return out;
        }
        if c == '"' || c == '\'' || c == '`' {
            // A lone apostrophe in Rust is a lifetime, not a string.
            let end = string_end(&chars, i);
            if c != '\'' || end < chars.len() || language.is_empty() {
                flush(&mut plain, &mut out);
                let end = end.min(chars.len().saturating_sub(1));
                out.push(Span::styled(
                    chars[i..=end].iter().collect::<String>(),
                    theme::string(),
                ));
                i = end + 1;
                continue;
            }
        }
        if is_word_start(c) {
            let start = i;
            while i < chars.len() && is_word_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let style = word_style(&lang, &word, start > 0 && chars[start - 1] == '#');
            match style {
                Some(style) => {
                    flush(&mut plain, &mut out);
                    out.push(Span::styled(word, style));
                }
                None => plain.push_str(&word),
            }
            continue;
        }
        if c.is_ascii_digit() {
            flush(&mut plain, &mut out);
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_')
            {
                i += 1;
            }
            out.push(Span::styled(
                chars[start..i].iter().collect::<String>(),
                theme::number(),
            ));
            continue;
        }
        plain.push(c);
        i += 1;
    }
    flush(&mut plain, &mut out);
    out
}

fn word_style(lang: &Lang, word: &str, after_hash: bool) -> Option<Style> {
    let is_keyword = if lang.fold_case {
        lang.keywords.iter().any(|k| k.eq_ignore_ascii_case(word))
    } else if after_hash {
        lang.keywords
            .iter()
            .any(|k| k.strip_prefix('#') == Some(word))
    } else {
        lang.keywords.contains(&word)
    };
    if is_keyword {
        Some(theme::keyword())
    } else if lang.types && word.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
        Some(theme::type_name())
    } else {
        None
    }
}

fn is_word_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn starts_with_at(chars: &[char], at: usize, needle: &str) -> bool {
    (at..)
        .zip(needle.chars())
        .all(|(i, n)| chars.get(i) == Some(&n))
}

/// Index of the closing quote of the string opening at `start`, or `chars.len()` when it
/// does not close on this line.
fn string_end(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        if chars[i] == '\\' {
            i += 2;
            continue;
        }
        if chars[i] == quote {
            return i;
        }
        i += 1;
    }
    chars.len()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn styled(spans: &[Span<'_>]) -> Vec<(String, Style)> {
        spans
            .iter()
            .map(|s| (s.content.to_string(), s.style))
            .collect()
    }

    #[test]
    fn rust_keywords_strings_numbers_and_comments() {
        let spans = highlight("rust", r#"let x: Vec<u8> = "a\"b"; // 42"#);
        assert_eq!(
            styled(&spans),
            vec![
                ("let".into(), theme::keyword()),
                (" x: ".into(), theme::plain()),
                ("Vec".into(), theme::type_name()),
                ("<u8> = ".into(), theme::plain()),
                (r#""a\"b""#.into(), theme::string()),
                ("; ".into(), theme::plain()),
                ("// 42".into(), theme::comment()),
            ]
        );
    }

    #[test]
    fn shell_comments_and_sql_case_folding() {
        let spans = highlight("sh", "echo $HOME # where");
        assert_eq!(spans.last().map(|s| s.style), Some(theme::comment()));
        let spans = highlight("sql", "SELECT 1");
        assert_eq!(spans[0].style, theme::keyword());
        assert_eq!(spans[2].style, theme::number());
    }

    #[test]
    fn diff_lines_are_coloured() {
        assert_eq!(highlight("diff", "+added")[0].style, theme::diff_added());
        assert_eq!(diff_line("-gone").style, theme::diff_removed());
        assert_eq!(diff_line("@@ -1 +1 @@").style, theme::diff_hunk());
        assert_eq!(diff_line("+++ b/x").style, theme::bold());
    }
}
