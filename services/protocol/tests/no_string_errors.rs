//! Library code returns typed errors (CONTRIBUTING.md, "Typed errors"): no `Result<_, String>`
//! in `services/*/src` and `loadtest/src` outside test code — not as a return type, a field, a static or an
//! alias. Test code is `#[cfg(test)]` items and the files of `#[cfg(test)] mod x;`
//! declarations; integration tests (`services/*/tests/`) are not scanned.
//!
//! The scan works on the source with comments and string literals blanked out, and reads
//! the generic arguments of each `Result<…>` with bracket matching, so `Result<Vec<String>,
//! String>` and signatures spanning lines are found and `Result<String, Error>` is not.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Paths (prefixes relative to the workspace root) not converted yet: other work is under
/// way there. Remove an entry once its code returns typed errors; the goal is an empty list.
const NOT_YET_CONVERTED: &[&str] = &[];

/// Files inside a [`NOT_YET_CONVERTED`] prefix that are converted already and checked.
const CHECKED_ANYWAY: &[&str] = &[];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn excepted(relative: &str) -> bool {
    NOT_YET_CONVERTED.iter().any(|p| relative.starts_with(p)) && !CHECKED_ANYWAY.contains(&relative)
}

#[test]
fn no_result_with_a_string_error_outside_tests() {
    let root = workspace_root();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("services")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    // The load generator is library code too (its scenarios report these errors).
    rust_files(&root.join("loadtest/src"), &mut files);
    files.sort();
    assert!(files.len() > 50, "found only {} source files", files.len());
    let sources: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f, text)
        })
        .collect();
    let test_dirs = test_module_paths(&sources);
    let mut found = Vec::new();
    for (file, text) in &sources {
        let relative = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if excepted(&relative) || is_test_file(file, &test_dirs) {
            continue;
        }
        for line in string_errors(text) {
            found.push(format!("{relative}:{line}"));
        }
    }
    assert!(
        found.is_empty(),
        "`Result<_, String>` outside tests (use the crate's thiserror enum, or add a small \
         one; keep user-visible messages the same):\n  {}",
        found.join("\n  ")
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Files and directories of modules declared `#[cfg(test)] mod name;`: `name.rs` or
/// `name/mod.rs` next to the declaring module, and `name/` with all its submodules.
fn test_module_paths(sources: &[(PathBuf, String)]) -> BTreeSet<PathBuf> {
    let mut paths = BTreeSet::new();
    for (file, text) in sources {
        let stem = file.file_stem().unwrap().to_string_lossy();
        let dir = file.parent().unwrap();
        let children = if matches!(stem.as_ref(), "mod" | "lib" | "main") {
            dir.to_path_buf()
        } else {
            dir.join(stem.as_ref())
        };
        for name in scan(text).test_module_decls {
            paths.insert(children.join(format!("{name}.rs")));
            paths.insert(children.join(&name));
        }
    }
    paths
}

fn is_test_file(file: &Path, test_paths: &BTreeSet<PathBuf>) -> bool {
    test_paths.iter().any(|p| file == p || file.starts_with(p))
}

/// Line numbers (1-based) of each `Result<…>` whose last generic argument is `String`.
fn string_errors(text: &str) -> Vec<usize> {
    let code = scan(text).code;
    let bytes = code.as_bytes();
    let mut lines = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("Result") {
        let start = from + at;
        from = start + "Result".len();
        let before = start.checked_sub(1).map(|i| bytes[i]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        let rest = code[from..].trim_start();
        if !rest.starts_with('<') {
            continue;
        }
        let open = code.len() - rest.len();
        if let Some(args) = generic_args(&code[open + 1..]) {
            let last = args
                .last()
                .map(|a| a.split_whitespace().collect::<String>());
            if args.len() == 2
                && matches!(
                    last.as_deref(),
                    Some("String" | "std::string::String" | "alloc::string::String")
                )
            {
                lines.push(code[..start].matches('\n').count() + 1);
            }
        }
    }
    lines
}

/// The top-level, comma-separated arguments up to the `>` closing the list `text` starts
/// inside; `None` when it never closes.
fn generic_args(text: &str) -> Option<Vec<String>> {
    let mut depth = 0usize;
    let mut args = Vec::new();
    let mut current = String::new();
    let mut previous = ' ';
    for c in text.chars() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' if previous == '-' => {}
            '>' | ')' | ']' if depth > 0 => depth -= 1,
            '>' => {
                // A trailing comma leaves nothing after it.
                if !current.trim().is_empty() {
                    args.push(current.trim().to_string());
                }
                return Some(args);
            }
            ',' if depth == 0 => {
                args.push(current.trim().to_string());
                current.clear();
                previous = c;
                continue;
            }
            ';' | '{' => return None,
            _ => {}
        }
        current.push(c);
        previous = c;
    }
    None
}

struct Scanned {
    /// The source with comments, string and char literals and `#[cfg(test)]` items
    /// replaced by spaces (newlines kept).
    code: String,
    /// Names of `#[cfg(test)] mod name;` declarations.
    test_module_decls: Vec<String>,
}

fn scan(text: &str) -> Scanned {
    let code = blank_comments_and_literals(text);
    let mut out: Vec<char> = code.chars().collect();
    let mut decls = Vec::new();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + marker.len() <= out.len() {
        if out[i..i + marker.len()] != marker[..] {
            i += 1;
            continue;
        }
        let item = i + marker.len();
        let Some(end) = (item..out.len()).find(|&k| out[k] == '{' || out[k] == ';') else {
            break;
        };
        let last = if out[end] == ';' {
            let decl: String = out[item..end].iter().collect();
            let words: Vec<&str> = decl.split_whitespace().collect();
            if let [.., "mod", name] = words.as_slice() {
                decls.push((*name).to_string());
            }
            end
        } else {
            let mut depth = 0usize;
            let mut k = end;
            loop {
                match out.get(k) {
                    Some('{') => depth += 1,
                    Some('}') => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    Some(_) => {}
                    None => break,
                }
                k += 1;
            }
            k.min(out.len() - 1)
        };
        for c in &mut out[i..=last] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = last + 1;
    }
    Scanned {
        code: out.into_iter().collect(),
        test_module_decls: decls,
    }
}

/// Replaces the contents of comments and of string, byte-string, raw-string and char
/// literals by spaces, keeping newlines (and so line numbers).
fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    blank(&mut out, '/');
                    blank(&mut out, '*');
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    blank(&mut out, '*');
                    blank(&mut out, '/');
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if let Some((prefix, hashes)) =
            raw_string_start(&chars[i..]).filter(|_| !ident_before)
        {
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            for _ in 0..prefix {
                blank(&mut out, ' ');
            }
            i += prefix;
            while i < chars.len() && !chars[i..].starts_with(&close) {
                blank(&mut out, chars[i]);
                i += 1;
            }
            for _ in 0..close.len().min(chars.len() - i) {
                blank(&mut out, ' ');
            }
            i += close.len();
        } else if c == '"' || (c == 'b' && next == Some('"') && !ident_before) {
            if c == 'b' {
                blank(&mut out, 'b');
                i += 1;
            }
            blank(&mut out, '"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    blank(&mut out, '\\');
                    i += 1;
                }
                if i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            blank(&mut out, '"');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}'), not a lifetime ('a).
            let len = if next == Some('\\') {
                chars
                    .get(i + 3..)
                    .and_then(|rest| rest.iter().position(|&c| c == '\''))
                    .map(|p| p + 4)
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(3)
            } else {
                None
            };
            match len {
                Some(len) => {
                    for &ch in &chars[i..(i + len).min(chars.len())] {
                        blank(&mut out, ch);
                    }
                    i += len;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `r"`, `r#"`, `br##"`…: the length of the opening and the number of `#`.
fn raw_string_start(chars: &[char]) -> Option<(usize, usize)> {
    let mut i = 0;
    if chars.first() == Some(&'b') {
        i += 1;
    }
    if chars.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
    i += hashes;
    (chars.get(i) == Some(&'"')).then_some((i + 1, hashes))
}

#[test]
fn the_scanner_finds_string_errors_and_skips_tests_comments_and_literals() {
    let source = r##"
fn a() -> Result<u8, String> { todo() }
fn b() -> std::result::Result<Vec<String>, String> { todo() }
fn c() -> Result<
    BTreeMap<String, String>,
    String,
> { todo() }
static D: OnceLock<Result<Install, String>> = OnceLock::new();
fn e(f: impl Fn() -> u8) -> Result<String, Error> { todo() }
fn g() -> Result<String> { todo() }
fn h() -> io::Result<Vec<String>> { todo() }
fn lifetime<'a>(x: &'a str) -> char { '{' }
fn escapes() -> [char; 3] { ['\'', '\u{7B}', '"'] }
// fn commented() -> Result<(), String>
const S: &str = "Result<(), String> {";
const R: &str = r#"Result<(), String> " {"#;
#[cfg(test)]
mod tests {
    fn t() -> Result<(), String> { let _ = "}"; Ok(()) }
}
#[cfg(test)]
mod more_tests;
fn z() -> MyResult<(), String> { todo() }
fn last() -> Result<(), String> { todo() }
"##;
    assert_eq!(string_errors(source), vec![2, 3, 4, 8, 24]);
    assert_eq!(
        scan(source).test_module_decls,
        vec!["more_tests".to_string()]
    );
}
