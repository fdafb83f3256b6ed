//! `web_fetch` and `web_search` against a local HTTP server. No test sends traffic off the
//! machine: names resolve through a `StaticResolver`, and the only address a fetch may
//! reach is the local server, through the explicit test exception.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lumina_tools::builtin::{FetchLimits, StaticResolver, WebFetch, WebSearch};
use lumina_tools::{Tool, ToolContext, ToolOutput};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::{error_text, ok_text, project};

struct Reply {
    status: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    delay: Duration,
}

impl Reply {
    fn new(status: &'static str, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: vec![("Content-Type", content_type.to_string())],
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    fn redirect(location: &str) -> Self {
        Self {
            status: "302 Found",
            headers: vec![("Location", location.to_string())],
            body: Vec::new(),
            delay: Duration::ZERO,
        }
    }
}

const PAGE: &str = r#"<html><head><title>x</title><script>alert("no")</script></head>
<body><h1>Docs</h1><p>Read <a href="/other">the other page</a>.</p>
<ul><li>alpha</li><li>beta</li></ul></body></html>"#;

/// A local HTTP/1.1 server with fixed routes; records every request line it receives.
struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Server {
    async fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).to_string();
                    let line = head.lines().next().unwrap_or("").to_string();
                    let target = line.split(' ').nth(1).unwrap_or("/").to_string();
                    log.lock().unwrap().push(target.clone());
                    let reply = route(&target);
                    tokio::time::sleep(reply.delay).await;
                    let mut out = format!(
                        "HTTP/1.1 {}\r\nContent-Length: {}\r\nConnection: close\r\n",
                        reply.status,
                        reply.body.len()
                    );
                    for (name, value) in &reply.headers {
                        out.push_str(&format!("{name}: {value}\r\n"));
                    }
                    out.push_str("\r\n");
                    let _ = conn.write_all(out.as_bytes()).await;
                    let _ = conn.write_all(&reply.body).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        Server { addr, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// `http://public.example:PORT{path}`.
    fn url(&self, path: &str) -> String {
        format!("http://public.example:{}{path}", self.addr.port())
    }
}

fn route(target: &str) -> Reply {
    let path = target.split('?').next().unwrap_or("");
    if let Some(n) = path.strip_prefix("/loop/") {
        let n: u32 = n.parse().unwrap_or(0);
        return Reply::redirect(&format!("/loop/{}", n + 1));
    }
    match path {
        "/page" => Reply::new("200 OK", "text/html; charset=utf-8", PAGE),
        "/data.json" => Reply::new("200 OK", "application/json", r#"{"a": [1, 2]}"#),
        "/notes" => Reply::new("200 OK", "", "plain notes without a content type"),
        "/image.png" => Reply::new("200 OK", "image/png", b"\x89PNG\r\n\x1a\n\0\0\0".to_vec()),
        "/big" => Reply::new("200 OK", "text/plain", vec![b'x'; 3 * 1024 * 1024]),
        "/missing" => Reply::new("404 Not Found", "text/plain", "no such page"),
        "/redirect-ok" => Reply::redirect("/page"),
        "/redirect-private" => Reply::redirect("http://internal.example/secret"),
        "/redirect-metadata" => Reply::redirect("http://169.254.169.254/latest/meta-data/"),
        "/stall" => Reply {
            delay: Duration::from_secs(10),
            ..Reply::new("200 OK", "text/plain", "late")
        },
        "/search" if target.contains("format=json") && target.contains("q=rust+async") => {
            Reply::new(
                "200 OK",
                "application/json",
                json!({"results": [
                    {"title": "Async Rust", "url": "https://rust-lang.github.io/async-book/", "content": "The async   book.\n"},
                    {"title": "Tokio", "url": "https://tokio.rs/", "content": ""},
                ]})
                .to_string(),
            )
        }
        "/search" => Reply::new("200 OK", "text/html", "<html>not json</html>"),
        _ => Reply::new("404 Not Found", "text/plain", "unknown route"),
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// `web_fetch` whose resolver maps `public.example` to the local server and
/// `internal.example` to a private address, allowed to reach exactly `server`.
fn fetcher(server: &Server) -> WebFetch {
    WebFetch::new(Arc::new(resolver())).allow_private_target_for_tests(server.addr)
}

fn resolver() -> StaticResolver {
    StaticResolver::new()
        .with("public.example", &[ip("127.0.0.1")])
        .with("internal.example", &[ip("10.0.0.5")])
        .with("mixed.example", &[ip("93.184.215.14"), ip("10.0.0.5")])
}

async fn fetch(tool: &WebFetch, url: &str) -> ToolOutput {
    tool.call(&project().ctx, json!({ "url": url })).await
}

#[tokio::test]
async fn private_loopback_and_metadata_targets_are_refused() {
    let server = Server::start().await;
    let tool = fetcher(&server);
    let port = server.addr.port();
    for (url, why) in [
        (
            "http://127.0.0.1/".to_string(),
            "127.0.0.1 is a loopback address",
        ),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "169.254.169.254 is a cloud metadata address",
        ),
        (
            format!("http://[::1]:{port}/page"),
            "::1 is a loopback address",
        ),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/page"),
            "::ffff:127.0.0.1 is a loopback address",
        ),
        (
            "http://internal.example/".to_string(),
            "internal.example resolves to 10.0.0.5, a private address",
        ),
        (
            "https://mixed.example/".to_string(),
            "mixed.example resolves to 10.0.0.5, a private address",
        ),
        (
            "http://[fd00:ec2::254]/".to_string(),
            "fd00:ec2::254 is a cloud metadata address",
        ),
        (
            "ftp://public.example/x".to_string(),
            "only http:// and https://",
        ),
        (
            format!("http://user:pw@public.example:{port}/page"),
            "URLs with credentials are not fetched",
        ),
        (
            "http://nowhere.example/".to_string(),
            "cannot resolve nowhere.example",
        ),
    ] {
        let out = fetch(&tool, &url).await;
        let text = error_text(&out);
        assert!(text.starts_with("refusing to fetch "), "{url}: {text}");
        assert!(text.contains(why), "{url}: {text}");
    }
    // None of them reached the local server.
    assert_eq!(server.seen(), Vec::<String>::new());

    // Without the test exception the local server itself is refused.
    let strict = WebFetch::new(Arc::new(resolver()));
    let out = fetch(&strict, &server.url("/page")).await;
    assert!(
        error_text(&out).contains("public.example resolves to 127.0.0.1, a loopback address"),
        "{out:?}"
    );
    assert_eq!(server.seen(), Vec::<String>::new());
}

#[tokio::test]
async fn redirects_to_private_addresses_are_refused_at_every_hop() {
    let server = Server::start().await;
    let tool = fetcher(&server);
    let out = fetch(&tool, &server.url("/redirect-private")).await;
    assert_eq!(
        error_text(&out),
        "refusing to fetch http://internal.example/secret: internal.example resolves to 10.0.0.5, a private address"
    );
    let out = fetch(&tool, &server.url("/redirect-metadata")).await;
    assert!(
        error_text(&out).contains("169.254.169.254 is a cloud metadata address"),
        "{out:?}"
    );
    assert_eq!(
        server.seen(),
        vec!["/redirect-private", "/redirect-metadata"]
    );

    // A redirect to a public place is followed.
    let out = fetch(&tool, &server.url("/redirect-ok")).await;
    assert!(ok_text(&out).contains("# Docs"), "{out:?}");
    assert_eq!(out.metadata["redirects"], json!(1));
}

#[tokio::test]
async fn redirects_stop_after_five() {
    let server = Server::start().await;
    let out = fetch(&fetcher(&server), &server.url("/loop/0")).await;
    let text = error_text(&out);
    assert!(
        text.starts_with("too many redirects (more than 5)"),
        "{text}"
    );
    assert_eq!(
        server.seen(),
        (0..=5).map(|n| format!("/loop/{n}")).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn html_becomes_markdown_and_text_passes_through() {
    let server = Server::start().await;
    let tool = fetcher(&server);
    let port = server.addr.port();
    let out = fetch(&tool, &server.url("/page#section")).await;
    assert_eq!(
        ok_text(&out),
        format!(
            "http://public.example:{port}/page — HTTP 200 OK\n\n# Docs\n\n\
             Read [the other page](http://public.example:{port}/other).\n\n- alpha\n- beta"
        )
    );
    assert_eq!(out.metadata["content_type"], json!("text/html"));

    let out = fetch(&tool, &server.url("/data.json")).await;
    assert!(ok_text(&out).ends_with("\n\n{\"a\": [1, 2]}"), "{out:?}");
    let out = fetch(&tool, &server.url("/notes")).await;
    assert!(ok_text(&out).ends_with("plain notes without a content type"));

    let out = fetch(&tool, &server.url("/image.png")).await;
    assert!(
        error_text(&out).contains("binary content (image/png)"),
        "{out:?}"
    );
    let out = fetch(&tool, &server.url("/missing")).await;
    assert!(error_text(&out).contains("HTTP 404 Not Found\n\nno such page"));
}

#[tokio::test]
async fn bodies_are_cut_at_the_size_limit() {
    let server = Server::start().await;
    let out = fetch(&fetcher(&server), &server.url("/big")).await;
    let text = ok_text(&out);
    assert_eq!(out.metadata["bytes"], json!(2 * 1024 * 1024));
    assert_eq!(out.metadata["truncated"], json!(true));
    assert!(text.contains("[the body was larger than 2097152 bytes; the rest was not read]"));
    // What the model sees is capped at the output cap.
    assert!(
        text.len() < ToolContext::DEFAULT_OUTPUT_CAP_BYTES + 500,
        "{}",
        text.len()
    );
    assert!(text.contains("[content shortened: showing "));
}

#[tokio::test]
async fn a_stalled_server_times_out() {
    let server = Server::start().await;
    let tool = fetcher(&server).with_limits(FetchLimits {
        timeout: Duration::from_millis(300),
        ..FetchLimits::default()
    });
    let out = fetch(&tool, &server.url("/stall")).await;
    assert!(error_text(&out).contains("timed out"), "{out:?}");
}

#[tokio::test]
async fn web_search_lists_results_from_the_configured_endpoint() {
    let server = Server::start().await;
    let mut ctx = project().ctx;
    ctx.web_search_url = Some(format!("http://127.0.0.1:{}/", server.addr.port()));
    let out = WebSearch.call(&ctx, json!({"query": "rust async"})).await;
    assert_eq!(
        ok_text(&out),
        "Results for \"rust async\":\n\
         \n1. Async Rust\n   https://rust-lang.github.io/async-book/\n   The async book.\n\
         \n2. Tokio\n   https://tokio.rs/\n"
    );
    assert_eq!(out.metadata["results"], json!(2));

    let out = WebSearch.call(&ctx, json!({"query": "other"})).await;
    assert!(
        error_text(&out).contains("did not answer with SearxNG JSON"),
        "{out:?}"
    );
}

#[tokio::test]
async fn web_search_without_an_endpoint_names_the_setting() {
    let out = WebSearch
        .call(&project().ctx, json!({"query": "anything"}))
        .await;
    assert!(error_text(&out).contains("`web_search_url`"), "{out:?}");
}
