//! `${VAR}` and `${VAR:-default}` expansion of configuration strings.
//!
//! Errors name the variable, never a value: expanded strings may be secrets.

/// Why a string could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("environment variable `{0}` is not set (use ${{{0}:-default}} for a fallback)")]
    Unset(String),
    #[error("unterminated `${{` in a configuration value")]
    Unterminated,
    #[error("`${{{0}}}` is not a valid variable reference")]
    BadName(String),
}

/// Expands every `${NAME}` / `${NAME:-default}` in `input` with `lookup`. A `$` not followed
/// by `{` is kept as is. An empty variable counts as set (like POSIX `:-`, it takes the
/// default only when unset or empty).
pub fn expand_vars(
    input: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find("${") {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 2..];
        let end = after.find('}').ok_or(ExpandError::Unterminated)?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if !is_var_name(name) {
            return Err(ExpandError::BadName(name.to_string()));
        }
        match (lookup(name).filter(|v| !v.is_empty()), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => match lookup(name) {
                // Set but empty and no default: empty is a value.
                Some(_) => {}
                None => return Err(ExpandError::Unset(name.to_string())),
            },
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Looks a variable up in the process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_plain_default_and_literal_dollars() {
        let e = |s: &str| expand_vars(s, &env);
        assert_eq!(e("Bearer ${TOKEN}"), Ok("Bearer s3cret".into()));
        assert_eq!(e("${MISSING:-fallback}/x"), Ok("fallback/x".into()));
        assert_eq!(e("${EMPTY:-d}"), Ok("d".into()));
        assert_eq!(e("${EMPTY}"), Ok(String::new()));
        assert_eq!(e("${TOKEN:-d}"), Ok("s3cret".into()));
        assert_eq!(e("$HOME and $ {x}"), Ok("$HOME and $ {x}".into()));
        assert_eq!(e("${A:-}"), Ok(String::new()));
    }

    #[test]
    fn errors_name_the_variable_only() {
        let err = expand_vars("x ${NOPE} ${TOKEN}", &env);
        assert_eq!(err, Err(ExpandError::Unset("NOPE".into())));
        let msg = err.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("NOPE") && !msg.contains("s3cret"), "{msg}");
        assert_eq!(expand_vars("${TOKEN", &env), Err(ExpandError::Unterminated));
        assert_eq!(
            expand_vars("${1X}", &env),
            Err(ExpandError::BadName("1X".into()))
        );
    }
}
