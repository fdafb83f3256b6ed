//! Just enough shell syntax for permission rules: whitespace normalization, detection of
//! compound commands, and splitting a command into the pieces a deny rule must see.
//!
//! This is deliberately not a shell parser. Allow rules fail closed (anything that could run
//! a second command never matches them); deny rules are a best-effort guardrail (they look
//! at every segment, unquoted variants and common wrappers), not a sandbox.

/// Substrings that let one command line run more than one command, or redirect output.
const COMPOUND_MARKERS: [&str; 9] = [";", "&", "|", "`", "$(", ">", "<", "\n", "\r"];

/// Characters that separate the commands of a compound line (and open subshells).
fn is_separator(c: char) -> bool {
    matches!(
        c,
        ';' | '&' | '|' | '\n' | '\r' | '`' | '(' | ')' | '{' | '}'
    )
}

/// Words that run the rest of their arguments as a command.
const WRAPPERS: [&str; 17] = [
    "sudo", "doas", "env", "command", "builtin", "exec", "nohup", "time", "nice", "xargs", "eval",
    "then", "do", "else", "if", "while", "until",
];

/// Shells whose `-c` argument is itself a command line.
const SHELLS: [&str; 5] = ["sh", "bash", "zsh", "dash", "ksh"];

/// Whether `command` could run more than one command or redirect I/O. Quoting is ignored on
/// purpose (`git commit -m 'a; b'` counts as compound): a false positive only means the user
/// is asked.
pub(crate) fn is_compound(command: &str) -> bool {
    COMPOUND_MARKERS.iter().any(|m| command.contains(m))
}

/// Trims and collapses runs of whitespace outside quotes to one space, so `git  status`
/// and `git status` match the same rule while `echo "a  b"` keeps its quoted spaces.
pub(crate) fn normalize(command: &str) -> String {
    let mut out = String::with_capacity(command.len());
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut pending_space = false;
    for c in command.trim().chars() {
        if quote.is_none() && !escaped && c.is_whitespace() {
            pending_space = true;
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        out.push(c);
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (None, '\\') | (Some('"'), '\\') => escaped = true,
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
    }
    out
}

/// `command` (normalized) is exactly `prefix` or `prefix` followed by arguments: the prefix
/// ends on a word boundary, so `git status:*` does not match `git statusx`.
pub(crate) fn has_prefix(command: &str, prefix: &str) -> bool {
    command == prefix
        || command
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with(' '))
}

/// Every normalized piece of `command` a deny rule is checked against: each segment between
/// separators, as written and with quotes and backslashes removed (`bash -c "rm -rf /"`,
/// `r\m`), and each with leading assignments, wrappers (`sudo`, `xargs`, `sh -c`) and the
/// directory of the program (`/bin/rm`) stripped.
pub(crate) fn deny_candidates(command: &str) -> Vec<String> {
    let unquoted: String = command
        .chars()
        .filter(|c| !matches!(c, '\'' | '"' | '\\'))
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut add = |candidate: String| {
        if !candidate.is_empty() && !out.contains(&candidate) {
            out.push(candidate);
        }
    };
    for variant in [command, unquoted.as_str()] {
        for segment in variant.split(is_separator) {
            let normalized = normalize(segment);
            let stripped = strip_wrappers(&normalized);
            add(normalized);
            add(stripped);
        }
    }
    out
}

fn strip_wrappers(segment: &str) -> String {
    let words: Vec<&str> = segment.split(' ').collect();
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        if is_assignment(word) || WRAPPERS.contains(&word) || word == "!" {
            i += 1;
        } else if SHELLS.contains(&program_name(word)) && words.get(i + 1) == Some(&"-c") {
            i += 2;
        } else {
            break;
        }
    }
    let Some((program, args)) = words[i.min(words.len())..].split_first() else {
        return String::new();
    };
    let mut out = program_name(program).to_string();
    for arg in args {
        out.push(' ');
        out.push_str(arg);
    }
    out
}

/// `/usr/bin/rm` → `rm`.
fn program_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `NAME=value`, which the shell treats as an environment assignment before the program.
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn normalize_collapses_unquoted_whitespace_only() {
        assert_eq!(normalize("  git   status\t-s  "), "git status -s");
        assert_eq!(normalize("echo \"a  b\"   'c  d'"), "echo \"a  b\" 'c  d'");
        assert_eq!(normalize("echo a\\  b"), "echo a\\  b");
    }

    #[test]
    fn prefix_ends_on_a_word_boundary() {
        assert!(has_prefix("git status", "git status"));
        assert!(has_prefix("git status -s", "git status"));
        assert!(!has_prefix("git statusx", "git status"));
        assert!(!has_prefix("git", "git status"));
    }

    #[test]
    fn compound_markers() {
        for cmd in [
            "a; b", "a && b", "a || b", "a | b", "a & b", "a `b`", "a $(b)", "a > f", "a < f",
            "a\nb", "a\rb",
        ] {
            assert!(is_compound(cmd), "{cmd:?}");
        }
        assert!(!is_compound("git status --short -- src/"));
    }

    #[test]
    fn deny_candidates_cover_segments_and_wrappers() {
        assert_eq!(
            deny_candidates("FOO=1 sudo /bin/rm -rf x && echo 'done'"),
            vec![
                "FOO=1 sudo /bin/rm -rf x",
                "rm -rf x",
                "echo 'done'",
                "echo done"
            ]
        );
        assert_eq!(
            deny_candidates("bash -c \"rm -rf /\""),
            vec![
                "bash -c \"rm -rf /\"",
                "\"rm -rf /\"",
                "bash -c rm -rf /",
                "rm -rf /"
            ]
        );
        assert_eq!(
            deny_candidates("find . | xargs rm"),
            vec!["find .", "xargs rm", "rm"]
        );
    }
}
