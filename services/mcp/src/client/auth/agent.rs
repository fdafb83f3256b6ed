//! The user-agent part of the authorization code flow, pluggable: where the authorization
//! server sends the browser back (the redirect URI) and how the authorization URL gets
//! visited. [`HeadlessAgent`] visits it itself (conformance runs and tests, where the
//! server approves at once); [`super::LoopbackAgent`] asks a person.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::LOCATION;
use url::Url;

use super::error::{clip, AuthError};

/// The authorization response delivered to the redirect URI. `Debug` hides the code.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Callback {
    pub code: Option<String>,
    pub state: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

impl Callback {
    /// The parameters of a redirect URI's query.
    pub fn from_url(url: &Url) -> Self {
        let mut cb = Callback::default();
        for (k, v) in url.query_pairs() {
            let slot = match k.as_ref() {
                "code" => &mut cb.code,
                "state" => &mut cb.state,
                "error" => &mut cb.error,
                "error_description" => &mut cb.error_description,
                _ => continue,
            };
            *slot = Some(v.into_owned());
        }
        cb
    }
}

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callback")
            .field("code", &self.code.as_ref().map(|_| "[redacted]"))
            .field("state", &self.state)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

/// Gets a person (or a stand-in) through the authorization endpoint.
#[async_trait]
pub trait UserAgent: Send + Sync + 'static {
    /// Whether a person completes the authorization. The flow then continues in the
    /// background and requests fail with `needs authorization: open <url>` until it is done.
    fn interactive(&self) -> bool;

    /// How long [`Redirect::complete`] waits at most (for messages).
    fn timeout(&self) -> Duration;

    /// Gets ready to receive the redirect. `previous`: the redirect URI of an earlier
    /// registration, to reuse (its port) when possible.
    async fn prepare(&self, previous: Option<&Url>) -> Result<Box<dyn Redirect>, AuthError>;
}

/// One prepared redirect.
#[async_trait]
pub trait Redirect: Send {
    fn redirect_uri(&self) -> &Url;

    /// Visits `authorization_url` and returns what arrived at the redirect URI.
    async fn complete(self: Box<Self>, authorization_url: &Url) -> Result<Callback, AuthError>;
}

/// Visits the authorization URL without a person: a GET that does not follow the
/// redirect to the redirect URI but reads `code` and `state` from its `Location`. Works
/// with authorization servers that approve without a login page (test servers).
pub struct HeadlessAgent {
    client: reqwest::Client,
    redirect_uri: Url,
}

/// At most this many redirects before the one to the redirect URI.
const MAX_HOPS: usize = 5;

impl HeadlessAgent {
    /// An agent with the redirect URI `http://localhost/callback` (never listened on).
    pub fn new() -> Result<Self, AuthError> {
        let uri = Url::parse("http://localhost/callback")
            .map_err(|e| AuthError::failed(e.to_string()))?;
        Self::with_redirect_uri(uri)
    }

    pub fn with_redirect_uri(redirect_uri: Url) -> Result<Self, AuthError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| AuthError::http("cannot build the HTTP client", e))?;
        Ok(Self {
            client,
            redirect_uri,
        })
    }
}

#[async_trait]
impl UserAgent for HeadlessAgent {
    fn interactive(&self) -> bool {
        false
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(30)
    }

    async fn prepare(&self, _previous: Option<&Url>) -> Result<Box<dyn Redirect>, AuthError> {
        Ok(Box::new(HeadlessRedirect {
            client: self.client.clone(),
            redirect_uri: self.redirect_uri.clone(),
        }))
    }
}

struct HeadlessRedirect {
    client: reqwest::Client,
    redirect_uri: Url,
}

#[async_trait]
impl Redirect for HeadlessRedirect {
    fn redirect_uri(&self) -> &Url {
        &self.redirect_uri
    }

    async fn complete(self: Box<Self>, authorization_url: &Url) -> Result<Callback, AuthError> {
        let mut url = authorization_url.clone();
        for _ in 0..=MAX_HOPS {
            let resp = self
                .client
                .get(url.clone())
                .send()
                .await
                .map_err(|e| AuthError::http("the authorization request failed", e))?;
            let status = resp.status();
            if !status.is_redirection() {
                return Err(AuthError::Needed(format!(
                    "the authorization server answered HTTP {} instead of redirecting back; \
                     it needs a person to sign in, which this non-interactive client cannot do",
                    status.as_u16()
                )));
            }
            let location = resp
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| AuthError::failed("a redirect without a Location header"))?;
            let next = url
                .join(location)
                .map_err(|e| AuthError::failed(format!("invalid redirect Location: {e}")))?;
            if same_endpoint(&next, &self.redirect_uri) {
                return Ok(Callback::from_url(&next));
            }
            url = next;
        }
        Err(AuthError::failed(format!(
            "the authorization server redirected more than {MAX_HOPS} times without coming back \
             to {}",
            clip(self.redirect_uri.as_str())
        )))
    }
}

/// Same scheme, host, port and path (the query carries the response).
pub(crate) fn same_endpoint(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
        && a.path() == b.path()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_parse_and_hide_the_code() {
        let u = Url::parse("http://localhost/callback?code=c%2B1&state=s&x=y").unwrap();
        let cb = Callback::from_url(&u);
        assert_eq!(cb.code.as_deref(), Some("c+1"));
        assert_eq!(cb.state.as_deref(), Some("s"));
        assert!(!format!("{cb:?}").contains("c+1"));
        let e = Callback::from_url(&Url::parse("http://h/cb?error=access_denied").unwrap());
        assert_eq!((e.code, e.error.as_deref()), (None, Some("access_denied")));
    }

    #[test]
    fn redirect_uri_matching_ignores_the_query_only() {
        let base = Url::parse("http://localhost/callback").unwrap();
        let ok = Url::parse("http://localhost:80/callback?code=1").unwrap();
        let other = Url::parse("http://localhost:81/callback?code=1").unwrap();
        assert!(same_endpoint(&ok, &base));
        assert!(!same_endpoint(&other, &base));
    }
}
