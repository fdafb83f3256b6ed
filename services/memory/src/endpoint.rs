//! Checks of configured endpoint URLs, shared by the rerank client ([`crate::rerank`]) and
//! the remote embeddings selection (`lumina-embed`).

/// Why a configured endpoint URL is unusable (never the URL itself: it may hold a key).
#[derive(Debug, thiserror::Error)]
pub enum UrlProblem {
    /// A URL with another scheme than `http`/`https`, or without a host.
    #[error("expected an http or https URL with a host, got scheme `{0}`")]
    Scheme(String),
    /// Not a URL at all.
    #[error("not a URL: {0}")]
    Parse(String),
}

/// An absolute `http`/`https` URL with a host; the reason otherwise.
pub fn check_http_url(url: &str) -> Result<(), UrlProblem> {
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
        Ok(u) => Err(UrlProblem::Scheme(u.scheme().to_string())),
        Err(e) => Err(UrlProblem::Parse(e.to_string())),
    }
}
