//! Why authorization did not produce a usable token. Messages name URLs, scopes and OAuth
//! error codes, never tokens, codes, verifiers or client secrets.

/// An authorization failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The server needs a sign-in that cannot happen here (no user agent, no registration
    /// option, ...). The text says what to do.
    #[error("needs authorization: {0}")]
    Needed(String),
    /// A person must open `url` in a browser; the client waits for the redirect in the
    /// background and connects once it arrives.
    #[error(
        "needs authorization: open this URL in a browser to sign in (waiting {minutes} min): {url}"
    )]
    Pending { url: String, minutes: u64 },
    /// Nobody completed the sign-in within the user agent's time limit.
    #[error(
        "needs authorization: nobody completed the sign-in within {secs} s; the next use of the \
         server starts a new one"
    )]
    SignInTimedOut { secs: u64 },
    /// Discovery, registration, the authorization response or a token request failed.
    #[error("authorization failed: {0}")]
    Failed(String),
    /// The server wants scopes that re-authorizing did not (or cannot) provide.
    #[error("the server requires scope `{required}` and re-authorizing did not help")]
    InsufficientScope { required: String },
}

impl AuthError {
    pub(crate) fn failed(msg: impl Into<String>) -> Self {
        AuthError::Failed(msg.into())
    }

    /// An HTTP error of an authorization request, without the URL (it may carry a query).
    pub(crate) fn http(what: &str, e: reqwest::Error) -> Self {
        AuthError::Failed(format!("{what}: {}", crate::Error::http(e)))
    }
}

/// Server-provided text in a message: one line, at most 200 characters.
pub(crate) fn clip(s: &str) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    one_line.trim().to_string()
}
