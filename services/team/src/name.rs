//! Team and member names. Both become folder names (`.Lumina/TEAM/<team>/`,
//! `agents/<member>/`), so they are held to the rules of a safe, portable folder name:
//! 1 to [`MAX_NAME_LEN`] characters of lowercase ASCII letters, digits, `-` and `_`,
//! starting with a letter or digit. That rules out `.`, `..`, separators, absolute paths,
//! drive letters, control characters and names that differ only in case (which collide on
//! case-insensitive file systems). Names are checked as given, never normalized: a name that
//! is not already valid is refused with the reason.

use std::fmt;

/// Longest team or member name.
pub const MAX_NAME_LEN: usize = 64;

/// Why a name is not a safe folder name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameProblem {
    Empty,
    TooLong,
    /// `.` or `..`.
    DotPath,
    /// `/` or `\` (this covers absolute paths).
    PathSeparator,
    ControlCharacter,
    /// The first character is not a lowercase letter or digit.
    BadStart(char),
    /// A character other than lowercase letters, digits, `-` and `_`.
    BadCharacter(char),
}

impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameProblem::Empty => f.write_str("the name is empty"),
            NameProblem::TooLong => write!(f, "longer than {MAX_NAME_LEN} characters"),
            NameProblem::DotPath => f.write_str("`.` and `..` are not names"),
            NameProblem::PathSeparator => {
                f.write_str("contains a path separator (names are single folder names)")
            }
            NameProblem::ControlCharacter => f.write_str("contains a control character"),
            NameProblem::BadStart(c) => write!(
                f,
                "starts with {c:?}; start with a lowercase letter or a digit"
            ),
            NameProblem::BadCharacter(c) => write!(
                f,
                "contains {c:?}; use lowercase letters, digits, `-` and `_`"
            ),
        }
    }
}

/// Checks that `name` is a safe folder name (see the module docs).
pub fn check_name(name: &str) -> Result<(), NameProblem> {
    if name.is_empty() {
        return Err(NameProblem::Empty);
    }
    if name.chars().any(char::is_control) {
        return Err(NameProblem::ControlCharacter);
    }
    if name == "." || name == ".." {
        return Err(NameProblem::DotPath);
    }
    if name.contains(['/', '\\']) {
        return Err(NameProblem::PathSeparator);
    }
    if name.chars().count() > MAX_NAME_LEN {
        return Err(NameProblem::TooLong);
    }
    let mut chars = name.chars();
    if let Some(first) = chars.next() {
        if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
            return Err(NameProblem::BadStart(first));
        }
    }
    match chars.find(|&c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')) {
        Some(c) => Err(NameProblem::BadCharacter(c)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn accepts_plain_names_and_names_the_problem_otherwise() {
        for ok in [
            "a",
            "deep-research",
            "qa_2",
            "0x",
            &"a".repeat(MAX_NAME_LEN),
        ] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        let cases = [
            ("", NameProblem::Empty),
            ("..", NameProblem::DotPath),
            (".", NameProblem::DotPath),
            ("../x", NameProblem::PathSeparator),
            ("/etc", NameProblem::PathSeparator),
            ("a\\b", NameProblem::PathSeparator),
            ("a\nb", NameProblem::ControlCharacter),
            ("a\0", NameProblem::ControlCharacter),
            (".hidden", NameProblem::BadStart('.')),
            ("-x", NameProblem::BadStart('-')),
            ("Team", NameProblem::BadStart('T')),
            ("c:x", NameProblem::BadCharacter(':')),
            ("a b", NameProblem::BadCharacter(' ')),
            ("é", NameProblem::BadStart('é')),
        ];
        for (name, want) in cases {
            assert_eq!(check_name(name), Err(want), "{name:?}");
        }
        assert_eq!(
            check_name(&"a".repeat(MAX_NAME_LEN + 1)),
            Err(NameProblem::TooLong)
        );
    }
}
