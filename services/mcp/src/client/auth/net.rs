//! HTTP for authorization: metadata GETs (a few redirects allowed) and POSTs to the token
//! and registration endpoints (no redirects: a redirect must not carry client credentials
//! elsewhere). Bodies are read up to 1 MiB.

use std::time::Duration;

use reqwest::header::ACCEPT;
use serde_json::Value;
use url::Url;

use super::error::{clip, AuthError};

const BODY_CAP: usize = 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) struct AuthHttp {
    get: reqwest::Client,
    post: reqwest::Client,
}

/// The outcome of a metadata GET.
pub(crate) enum Fetched {
    Json(Value),
    /// Not there (4xx/5xx, not JSON, unreachable): why, for the error message.
    Missing(String),
}

impl AuthHttp {
    pub(crate) fn new() -> Result<Self, AuthError> {
        let build = |redirects: reqwest::redirect::Policy| {
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .timeout(TIMEOUT)
                .redirect(redirects)
                .build()
                .map_err(|e| AuthError::http("cannot build the HTTP client", e))
        };
        Ok(Self {
            get: build(reqwest::redirect::Policy::limited(5))?,
            post: build(reqwest::redirect::Policy::none())?,
        })
    }

    /// GETs a JSON object.
    pub(crate) async fn get_json(&self, url: &Url) -> Fetched {
        let resp = match self
            .get
            .get(url.clone())
            .header(ACCEPT, "application/json")
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => return Fetched::Missing(crate::Error::http(e).to_string()),
        };
        let status = resp.status();
        if !status.is_success() {
            return Fetched::Missing(format!("HTTP {}", status.as_u16()));
        }
        match read_json(resp).await {
            Ok(v @ Value::Object(_)) => Fetched::Json(v),
            Ok(_) => Fetched::Missing("not a JSON object".into()),
            Err(e) => Fetched::Missing(e.to_string()),
        }
    }

    /// A POST without redirects.
    pub(crate) fn post(&self, url: &Url) -> reqwest::RequestBuilder {
        self.post
            .post(url.clone())
            .header(ACCEPT, "application/json")
    }
}

/// Why a response body is not a usable JSON document.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    #[error("the response is larger than 1 MiB")]
    TooLarge,
    /// Reading it failed ([`crate::Error::Http`], without the URL).
    #[error(transparent)]
    Read(crate::Error),
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
}

/// The body as JSON (at most 1 MiB).
pub(crate) async fn read_json(mut resp: reqwest::Response) -> Result<Value, BodyError> {
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                body.extend_from_slice(&chunk);
                if body.len() > BODY_CAP {
                    return Err(BodyError::TooLarge);
                }
            }
            Ok(None) => break,
            Err(e) => return Err(BodyError::Read(crate::Error::http(e))),
        }
    }
    serde_json::from_slice(&body).map_err(BodyError::NotJson)
}

/// `error` and `error_description` of an OAuth error body (RFC 6749 §5.2), clipped.
pub(crate) fn oauth_error(body: &Value) -> Option<String> {
    let error = body.get("error")?.as_str()?;
    Some(
        match body.get("error_description").and_then(Value::as_str) {
            Some(d) => format!("{}: {}", clip(error), clip(d)),
            None => clip(error),
        },
    )
}

/// Whether tokens or credentials may be sent to `url`: HTTPS, or HTTP to a loopback host
/// (OAuth 2.1 §1.5 and the MCP spec's "Communication Security").
pub fn is_secure_endpoint(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_endpoints_are_https_or_loopback_http() {
        for (u, ok) in [
            ("https://auth.example.com/token", true),
            ("http://localhost:3000/token", true),
            ("http://127.0.0.1/token", true),
            ("http://[::1]:9/token", true),
            ("http://auth.example.com/token", false),
            ("http://10.0.0.1/token", false),
            ("ftp://localhost/x", false),
        ] {
            assert_eq!(is_secure_endpoint(&Url::parse(u).unwrap()), ok, "{u}");
        }
    }
}
