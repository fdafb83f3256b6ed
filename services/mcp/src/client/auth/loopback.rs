//! The interactive user agent: a one-shot HTTP listener on `127.0.0.1` is the redirect URI
//! (RFC 8252 §7.3); the authorization URL is logged (and handed to an optional callback)
//! for a person to open — no browser is launched. It waits (5 minutes by default) for the
//! redirect carrying this request's `state`, answers with a small HTML page and stops.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use url::Url;

use super::agent::{Callback, Redirect, UserAgent};
use super::error::AuthError;

const CALLBACK_PATH: &str = "/callback";
/// A browser connection has this long to send its request line and headers.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_CAP: usize = 16 * 1024;

/// Called with the authorization URL when a person must open it.
pub type UrlHook = Arc<dyn Fn(&Url) + Send + Sync>;

pub struct LoopbackAgent {
    label: String,
    timeout: Duration,
    on_url: Option<UrlHook>,
}

impl LoopbackAgent {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

    /// `label` names the server in logs.
    pub fn new(label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            timeout: Self::DEFAULT_TIMEOUT,
            on_url: None,
        }
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Also hands the authorization URL to `hook` (a UI, a test).
    pub fn on_url(mut self, hook: UrlHook) -> Self {
        self.on_url = Some(hook);
        self
    }
}

#[async_trait]
impl UserAgent for LoopbackAgent {
    fn interactive(&self) -> bool {
        true
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn prepare(&self, previous: Option<&Url>) -> Result<Box<dyn Redirect>, AuthError> {
        // Reuse an earlier redirect URI's port, so a dynamic registration still fits.
        let port = previous
            .filter(|u| u.host_str() == Some("127.0.0.1") && u.path() == CALLBACK_PATH)
            .and_then(Url::port)
            .unwrap_or(0);
        let listener = match TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => l,
            Err(_) if port != 0 => TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(bind_err)?,
            Err(e) => return Err(bind_err(e)),
        };
        let port = listener.local_addr().map_err(bind_err)?.port();
        let redirect_uri = Url::parse(&format!("http://127.0.0.1:{port}{CALLBACK_PATH}"))
            .map_err(|e| AuthError::failed(e.to_string()))?;
        Ok(Box::new(LoopbackRedirect {
            listener,
            redirect_uri,
            label: self.label.clone(),
            timeout: self.timeout,
            on_url: self.on_url.clone(),
        }))
    }
}

fn bind_err(e: std::io::Error) -> AuthError {
    AuthError::failed(format!(
        "cannot listen on 127.0.0.1 for the sign-in redirect: {e}"
    ))
}

struct LoopbackRedirect {
    listener: TcpListener,
    redirect_uri: Url,
    label: String,
    timeout: Duration,
    on_url: Option<UrlHook>,
}

#[async_trait]
impl Redirect for LoopbackRedirect {
    fn redirect_uri(&self) -> &Url {
        &self.redirect_uri
    }

    async fn complete(self: Box<Self>, authorization_url: &Url) -> Result<Callback, AuthError> {
        let expected_state = authorization_url
            .query_pairs()
            .find(|(k, _)| k == "state")
            .map(|(_, v)| v.into_owned());
        tracing::warn!(
            server = %self.label, url = %authorization_url,
            "mcp server needs authorization: open the url in a browser to sign in"
        );
        if let Some(hook) = &self.on_url {
            hook(authorization_url);
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let accepted = tokio::time::timeout_at(deadline, self.listener.accept()).await;
            let stream = match accepted {
                Err(_) => {
                    return Err(AuthError::SignInTimedOut {
                        secs: self.timeout.as_secs(),
                    })
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "oauth callback accept failed");
                    continue;
                }
                Ok(Ok((stream, _))) => stream,
            };
            let handled =
                tokio::time::timeout(REQUEST_TIMEOUT, serve(stream, expected_state.as_deref()))
                    .await;
            if let Ok(Some(cb)) = handled {
                return Ok(cb);
            }
        }
    }
}

/// Answers one browser request; `Some` when it was this flow's redirect.
async fn serve(mut stream: TcpStream, expected_state: Option<&str>) -> Option<Callback> {
    let head = read_head(&mut stream).await?;
    let mut parts = head.lines().next()?.split_whitespace();
    let (method, target) = (parts.next()?, parts.next()?);
    let base = Url::parse("http://127.0.0.1/").ok()?;
    let url = base.join(target).ok()?;
    if method != "GET" || url.path() != CALLBACK_PATH {
        respond(&mut stream, "404 Not Found", "Not found", "Nothing here.").await;
        return None;
    }
    let cb = Callback::from_url(&url);
    if cb.state.as_deref() != expected_state || (cb.code.is_none() && cb.error.is_none()) {
        respond(
            &mut stream,
            "400 Bad Request",
            "Not this sign-in",
            "This response does not belong to the sign-in Lumina is waiting for. Start again \
             from the newest link.",
        )
        .await;
        return None;
    }
    match &cb.error {
        None => {
            respond(
                &mut stream,
                "200 OK",
                "Signed in",
                "Lumina received the authorization. You can close this tab.",
            )
            .await
        }
        Some(error) => {
            let code: String = error
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || "_-.".contains(*c))
                .take(64)
                .collect();
            let text =
                format!("The authorization server reported `{code}`. You can close this tab.");
            respond(&mut stream, "200 OK", "Sign-in not completed", &text).await
        }
    }
    Some(cb)
}

async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() + n > REQUEST_CAP {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// A tiny page; `title` and `text` are fixed strings or sanitized (no markup).
async fn respond(stream: &mut TcpStream, status: &str, title: &str, text: &str) {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Lumina — {title}</title>\
         </head><body style=\"font-family:sans-serif;margin:3em\"><h1>{title}</h1><p>{text}</p>\
         </body></html>"
    );
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\
         cache-control: no-store\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(url: &str) -> (u16, String) {
        let resp = reqwest::get(url).await.unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }

    #[tokio::test]
    async fn answers_the_matching_redirect_and_ignores_others() {
        let seen = Arc::new(std::sync::Mutex::new(None));
        let seen2 = seen.clone();
        let agent = LoopbackAgent::new("t")
            .with_timeout(Duration::from_secs(20))
            .on_url(Arc::new(move |u: &Url| {
                *seen2.lock().unwrap() = Some(u.clone())
            }));
        let redirect = agent.prepare(None).await.unwrap();
        let uri = redirect.redirect_uri().clone();
        assert_eq!(uri.host_str(), Some("127.0.0.1"));
        assert_eq!(uri.path(), "/callback");
        let auth_url = Url::parse("https://as.example/authorize?state=S1&client_id=c").unwrap();
        let waiter = tokio::spawn(async move { redirect.complete(&auth_url).await });
        let (status, _) = get(&format!("{uri}/../favicon.ico")).await;
        assert_eq!(status, 404);
        let (status, _) = get(&format!("{uri}?code=x&state=stale")).await;
        assert_eq!(status, 400);
        let (status, page) = get(&format!("{uri}?code=the-code&state=S1")).await;
        assert_eq!(status, 200);
        assert!(page.contains("Signed in"), "{page}");
        let cb = waiter.await.unwrap().unwrap();
        assert_eq!(cb.code.as_deref(), Some("the-code"));
        assert!(seen.lock().unwrap().is_some());
        // The listener is gone once the redirect arrived.
        assert!(reqwest::get(uri.as_str()).await.is_err());
    }

    #[tokio::test]
    async fn gives_up_after_the_timeout_and_reuses_a_port() {
        let agent = LoopbackAgent::new("t").with_timeout(Duration::from_millis(200));
        let first = agent.prepare(None).await.unwrap();
        let uri = first.redirect_uri().clone();
        drop(first);
        let again = agent.prepare(Some(&uri)).await.unwrap();
        assert_eq!(again.redirect_uri(), &uri);
        let auth_url = Url::parse("https://as.example/authorize?state=S").unwrap();
        let err = again.complete(&auth_url).await.unwrap_err();
        assert!(matches!(err, AuthError::SignInTimedOut { .. }), "{err}");
    }
}
