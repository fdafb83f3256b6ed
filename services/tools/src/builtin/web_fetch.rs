//! `web_fetch{url}`: an HTTP(S) GET of a public page, returned as readable text.
//!
//! SSRF protection ([`super::web_guard`]): the host is resolved here, every address is
//! checked, and the connection is pinned to the vetted addresses (reqwest's `resolve`, with
//! its own DNS disabled) so a DNS answer that changes between the check and the connect
//! cannot redirect the request. Redirects are followed by hand (at most
//! [`FetchLimits::max_redirects`]) and every hop is vetted the same way. No proxy is used:
//! a proxy would resolve the name itself.
//!
//! HTML becomes Markdown ([`super::html_text`]); JSON and other text pass through; binary
//! content is refused. The body is read up to [`FetchLimits::max_body_bytes`] and the whole
//! fetch, redirects included, is bounded by [`FetchLimits::timeout`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE, LOCATION, USER_AGENT};
use reqwest::Url;
use serde::Deserialize;
use serde_json::{json, Value};

use super::args;
use super::html_text::html_to_markdown;
use super::web_guard::{vet, Resolver, SystemResolver};
use crate::{Tool, ToolContext, ToolDescriptor, ToolOutput};

pub(crate) const NAME: &str = "web_fetch";

/// Bounds of one fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// Bytes of body read; the rest is cut off (and the output says so). Default: 2 MiB.
    pub max_body_bytes: usize,
    /// The whole fetch, redirects and body included. Default: 30 s.
    pub timeout: Duration,
    /// Redirects followed before giving up. Default: 5.
    pub max_redirects: usize,
}

impl Default for FetchLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: 2 * 1024 * 1024,
            timeout: Duration::from_secs(30),
            max_redirects: 5,
        }
    }
}

/// Fetches a public URL.
#[derive(Clone)]
pub struct WebFetch {
    resolver: Arc<dyn Resolver>,
    limits: FetchLimits,
    /// The one non-public address a test may connect to (its local server).
    exception: Option<SocketAddr>,
}

impl Default for WebFetch {
    fn default() -> Self {
        Self::new(Arc::new(SystemResolver))
    }
}

impl WebFetch {
    pub fn new(resolver: Arc<dyn Resolver>) -> Self {
        Self {
            resolver,
            limits: FetchLimits::default(),
            exception: None,
        }
    }

    pub fn with_limits(mut self, limits: FetchLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Tests only: lets fetches connect to exactly `addr` (address and port) although it is
    /// not public, so a test can serve pages from 127.0.0.1 behind a stub resolver. Every
    /// other private address stays refused.
    pub fn allow_private_target_for_tests(mut self, addr: SocketAddr) -> Self {
        self.exception = Some(addr);
        self
    }
}

#[derive(Debug, Deserialize)]
struct Args {
    url: String,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "An http:// or https:// URL of a public page."}
        },
        "required": ["url"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for WebFetch {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: NAME.to_string(),
            description: "Fetch a public web page or file over HTTP(S) (GET) and return it as \
                          text: HTML is converted to Markdown, JSON and plain text are returned \
                          as is, binary content is refused. Private, loopback and link-local \
                          addresses are refused, also after redirects."
                .to_string(),
            input_schema: schema(),
            // It reaches the network: `ask` mode asks.
            read_only: false,
            edits_files: false,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let args: Args = match args::parse(NAME, &schema(), args) {
            Ok(a) => a,
            Err(out) => return out,
        };
        let fetch = self.fetch(&args.url, ctx.output_cap_bytes);
        tokio::select! {
            _ = ctx.cancel.cancelled() => ToolOutput::error("interrupted"),
            out = tokio::time::timeout(self.limits.timeout, fetch) => match out {
                Ok(Ok(out)) | Ok(Err(out)) => out,
                Err(_) => ToolOutput::error(format!(
                    "fetching {} timed out after {} s",
                    args.url,
                    self.limits.timeout.as_secs()
                )),
            },
        }
    }

    async fn preview(&self, _ctx: &ToolContext, args: &Value) -> Option<String> {
        args.get("url")
            .and_then(Value::as_str)
            .map(|u| format!("GET {u}"))
    }
}

/// A vetted hop: the host name to pin (none for IP literals) and its addresses.
struct Pinned {
    host: Option<String>,
    addrs: Vec<SocketAddr>,
}

impl WebFetch {
    async fn fetch(&self, input: &str, cap: usize) -> Result<ToolOutput, ToolOutput> {
        let mut url = Url::parse(input.trim())
            .map_err(|e| ToolOutput::error(format!("invalid URL `{input}`: {e}")))?;
        url.set_fragment(None);
        let mut redirects = 0;
        loop {
            let pinned = self.vet(&url).await?;
            let response = send(&url, &pinned).await?;
            let status = response.status();
            if status.is_redirection() {
                if let Some(next) = redirect_target(&url, response.headers())? {
                    if redirects == self.limits.max_redirects {
                        return Err(ToolOutput::error(format!(
                            "too many redirects (more than {}); last: {url} → {next}",
                            self.limits.max_redirects
                        )));
                    }
                    redirects += 1;
                    url = next;
                    continue;
                }
            }
            return self.read(url, redirects, response, cap).await;
        }
    }

    /// Checks the URL and resolves its host; refuses anything that is not public.
    async fn vet(&self, url: &Url) -> Result<Pinned, ToolOutput> {
        let refuse = |why: String| ToolOutput::error(format!("refusing to fetch {url}: {why}"));
        if !matches!(url.scheme(), "http" | "https") {
            return Err(refuse(
                "only http:// and https:// URLs can be fetched".into(),
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse("URLs with credentials are not fetched".into()));
        }
        let vetted = vet(self.resolver.as_ref(), url, self.exception)
            .await
            .map_err(|why| refuse(why.0))?;
        Ok(Pinned {
            host: vetted.host,
            addrs: vetted.addrs,
        })
    }

    async fn read(
        &self,
        url: Url,
        redirects: usize,
        mut response: reqwest::Response,
        cap: usize,
    ) -> Result<ToolOutput, ToolOutput> {
        let status = response.status();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        let declared = classify(&content_type);
        if declared == Kind::Binary {
            return Err(ToolOutput::error(format!(
                "{url} is binary content ({content_type}); web_fetch returns text only"
            )));
        }
        let mut body = Vec::new();
        let mut truncated = false;
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|e| ToolOutput::error(format!("reading {url} failed: {e}")))?;
            let Some(chunk) = chunk else { break };
            let room = self.limits.max_body_bytes - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let kind = if declared == Kind::Unknown {
            sniff(&body)
        } else {
            declared
        };
        let text = String::from_utf8_lossy(&body);
        let rendered = match kind {
            Kind::Binary => {
                return Err(ToolOutput::error(format!(
                    "{url} looks like binary content; web_fetch returns text only"
                )))
            }
            Kind::Html => html_to_markdown(&text, Some(&url)),
            Kind::Text | Kind::Unknown => text.into_owned(),
        };
        let mut content = format!(
            "{url} — HTTP {}{}\n\n",
            status.as_u16(),
            status
                .canonical_reason()
                .map(|r| format!(" {r}"))
                .unwrap_or_default()
        );
        let shown = clip(&rendered, cap);
        content.push_str(shown);
        if shown.len() < rendered.len() {
            content.push_str(&format!(
                "\n\n[content shortened: showing {} of {} bytes]",
                shown.len(),
                rendered.len()
            ));
        }
        if truncated {
            content.push_str(&format!(
                "\n\n[the body was larger than {} bytes; the rest was not read]",
                self.limits.max_body_bytes
            ));
        }
        let metadata = json!({
            "url": url.as_str(),
            "status": status.as_u16(),
            "content_type": content_type,
            "bytes": body.len(),
            "truncated": truncated,
            "redirects": redirects,
        });
        let is_error = status.is_client_error() || status.is_server_error();
        Ok(ToolOutput {
            content,
            is_error,
            metadata,
        })
    }
}

/// Sends one GET pinned to the vetted addresses, without redirects, proxies or DNS.
async fn send(url: &Url, pinned: &Pinned) -> Result<reqwest::Response, ToolOutput> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(NoDns))
        .connect_timeout(Duration::from_secs(10));
    if let Some(host) = &pinned.host {
        builder = builder.resolve_to_addrs(host, &pinned.addrs);
    }
    let client = builder
        .build()
        .map_err(|e| ToolOutput::error(format!("cannot build the HTTP client: {e}")))?;
    client
        .get(url.clone())
        .header(
            USER_AGENT,
            concat!("Lumina/", env!("CARGO_PKG_VERSION"), " (web_fetch)"),
        )
        .header(
            ACCEPT,
            "text/html, text/markdown, text/plain, application/json;q=0.9, */*;q=0.5",
        )
        .send()
        .await
        .map_err(|e| ToolOutput::error(format!("fetching {url} failed: {}", error_chain(&e))))
}

/// The next URL of a redirect, or `None` when the response has no usable `Location`.
fn redirect_target(url: &Url, headers: &HeaderMap) -> Result<Option<Url>, ToolOutput> {
    let Some(location) = headers.get(LOCATION) else {
        return Ok(None);
    };
    let location = location
        .to_str()
        .map_err(|_| ToolOutput::error(format!("{url} redirected to an unreadable location")))?;
    let mut next = url.join(location).map_err(|e| {
        ToolOutput::error(format!(
            "{url} redirected to an invalid URL `{location}`: {e}"
        ))
    })?;
    next.set_fragment(None);
    Ok(Some(next))
}

/// reqwest's errors hide the cause (refused connection, TLS) in their source chain.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

/// Refuses every lookup: pinned hosts never reach it, so anything that does is a bug that
/// must not turn into an unvetted connection.
struct NoDns;

impl reqwest::dns::Resolve for NoDns {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move { Err(format!("unvetted DNS lookup of {host} refused").into()) })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Binary,
    Unknown,
}

fn classify(content_type: &str) -> Kind {
    let textual_app = [
        "json",
        "xml",
        "javascript",
        "ecmascript",
        "yaml",
        "toml",
        "x-sh",
        "x-www-form-urlencoded",
        "markdown",
        "csv",
        "sql",
        "graphql",
    ];
    match content_type {
        "" => Kind::Unknown,
        "text/html" | "application/xhtml+xml" => Kind::Html,
        ct if ct.starts_with("text/") => Kind::Text,
        ct if ct.ends_with("+json") || ct.ends_with("+xml") => Kind::Text,
        ct if ct
            .strip_prefix("application/")
            .is_some_and(|sub| textual_app.contains(&sub)) =>
        {
            Kind::Text
        }
        _ => Kind::Binary,
    }
}

/// A guess for a response without a content type.
fn sniff(body: &[u8]) -> Kind {
    let head = &body[..body.len().min(1024)];
    // An error with a length is a bad byte; without one the sample just ends mid-character.
    let invalid = std::str::from_utf8(head).is_err_and(|e| e.error_len().is_some());
    if head.contains(&0) || invalid {
        return Kind::Binary;
    }
    let start = String::from_utf8_lossy(head)
        .trim_start()
        .to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        Kind::Html
    } else {
        Kind::Text
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a char boundary.
fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn content_types_are_classified() {
        assert_eq!(classify("text/html"), Kind::Html);
        assert_eq!(classify("application/json"), Kind::Text);
        assert_eq!(classify("application/ld+json"), Kind::Text);
        assert_eq!(classify("text/plain"), Kind::Text);
        assert_eq!(classify("image/png"), Kind::Binary);
        assert_eq!(classify("application/octet-stream"), Kind::Binary);
        assert_eq!(classify("application/pdf"), Kind::Binary);
        assert_eq!(classify(""), Kind::Unknown);
        assert_eq!(sniff(b"<!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(sniff(b"plain words"), Kind::Text);
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0"), Kind::Binary);
    }

    #[test]
    fn clip_respects_char_boundaries() {
        assert_eq!(clip("héllo", 2), "h");
        assert_eq!(clip("héllo", 3), "hé");
        assert_eq!(clip("abc", 10), "abc");
    }
}
