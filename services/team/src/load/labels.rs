//! Labels and URLs of a definition: the checks and why they refuse.

use super::*;

/// A display name, model name or tool pattern: trimmed, non-empty, at most
/// [`MAX_LABEL_CHARS`], without control characters.
pub(crate) fn check_label(value: &str) -> Result<String, LabelProblem> {
    let value = value.trim();
    if value.is_empty() {
        return Err(LabelProblem::Empty);
    }
    if value.chars().count() > MAX_LABEL_CHARS {
        return Err(LabelProblem::TooLong);
    }
    if value.chars().any(char::is_control) {
        return Err(LabelProblem::Control);
    }
    Ok(value.to_string())
}

/// Why a label of a definition is refused (the text).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LabelProblem {
    #[error("is empty")]
    Empty,
    #[error("is longer than {} characters", MAX_LABEL_CHARS)]
    TooLong,
    #[error("contains a control character")]
    Control,
    #[error("{0:?} contains whitespace; expected {1} name")]
    Whitespace(String, &'static str),
    #[error("not a valid tool glob: {0}")]
    ToolGlob(String),
}

pub(super) fn no_whitespace(value: String, what: &'static str) -> Result<String, LabelProblem> {
    if value.chars().any(char::is_whitespace) {
        Err(LabelProblem::Whitespace(value, what))
    } else {
        Ok(value)
    }
}

/// `a2a.url`: an http:// or https:// URL with a host, without whitespace or control
/// characters, at most [`MAX_URL_BYTES`]. Whether it may be called is the settings' word
/// (`a2a_allowed_urls`), checked at dispatch.
pub(super) fn check_url(url: &str) -> Result<(), UrlProblem> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let Some(rest) = rest else {
        return Err(UrlProblem::Scheme(url.to_owned()));
    };
    if url.len() > MAX_URL_BYTES {
        return Err(UrlProblem::TooLong);
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlProblem::Whitespace(url.to_owned()));
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.contains('@') {
        return Err(UrlProblem::Host(url.to_owned()));
    }
    Ok(())
}

/// Why an `a2a.url` is refused (the text).
#[derive(Debug, thiserror::Error)]
pub(super) enum UrlProblem {
    #[error("{0:?} is not an http:// or https:// URL")]
    Scheme(String),
    #[error("is longer than {MAX_URL_BYTES} bytes")]
    TooLong,
    #[error("{0:?} contains whitespace or a control character")]
    Whitespace(String),
    #[error("{0:?} has no host (or carries credentials, which belong in a2a_peers)")]
    Host(String),
}
