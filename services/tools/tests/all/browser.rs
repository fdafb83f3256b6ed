//! The browser tools against headless Chromium and two local HTTP servers: the site (the one
//! address the test exception allows) and a "private" server on another loopback port that
//! the guard must keep the browser from reaching — by the `Fetch` check of requests and by
//! the proxy every connection goes through (WebSockets, preconnects, a rebinding name).
//! Needs Chromium (`scripts/setup`, or `LUMINA_BROWSER_EXECUTABLE`); the quick loop skips
//! this module (`browser::`).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lumina_tools::builtin::{BrowserTools, Resolver, StaticResolver};
use lumina_tools::{Tool, ToolContext, ToolOutput};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

use crate::{error_text, ok_text, project};

type Route = fn(&str, u16) -> (&'static str, String, String);

/// A local HTTP/1.1 server answering with `route`; counts the connections it accepts and
/// records every request target.
struct Server {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Server {
    async fn start(route: Route, other: u16) -> Server {
        Self::start_at("127.0.0.1:0", route, other).await
    }

    async fn start_at(addr: &str, route: Route, other: u16) -> Server {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (count, log) = (accepted.clone(), seen.clone());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                // Counted before anything is read or answered: a browser that saw this
                // server's answer (or its closing) was counted first.
                count.fetch_add(1, Ordering::SeqCst);
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
                    let target = head
                        .lines()
                        .next()
                        .and_then(|l| l.split(' ').nth(1))
                        .unwrap_or("/")
                        .to_string();
                    log.lock().unwrap().push(target.clone());
                    let (status, headers, body) = route(&target, other);
                    let out = format!(
                        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(out.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        Server {
            addr,
            accepted,
            seen,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

const HTML: &str = "Content-Type: text/html; charset=utf-8\r\n";

/// The site: a sign-up form whose page also loads an image from the private server, the
/// form's result page, and a redirect to the private server.
fn site(target: &str, private_port: u16) -> (&'static str, String, String) {
    let path = target.split('?').next().unwrap_or("");
    match path {
        "/" => (
            "200 OK",
            HTML.into(),
            format!(
                r#"<!doctype html><html><head><title>Sign up</title></head><body>
<h1>Join the club</h1>
<img src="http://127.0.0.1:{private_port}/tracker.png" alt="">
<form action="/submit" method="get">
  <label>Name <input id="name" name="name" placeholder="Your name"></label>
  <select id="color" name="color"><option value="r">Red</option><option value="g">Green</option></select>
  <button id="go" type="submit">Send</button>
</form></body></html>"#
            ),
        ),
        "/submit" => {
            let query = target.split('?').nth(1).unwrap_or("");
            let field = |k: &str| {
                query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                    .unwrap_or("")
                    .to_string()
            };
            (
                "200 OK",
                HTML.into(),
                format!(
                    r#"<!doctype html><html><head><title>Thanks</title></head><body>
<p id="result">Hello {}, you chose {}</p></body></html>"#,
                    field("name"),
                    field("color")
                ),
            )
        }
        "/redirect" => (
            "302 Found",
            format!("Location: http://127.0.0.1:{private_port}/secret\r\n"),
            String::new(),
        ),
        // Connections `Fetch` never sees: a preconnect, a WebSocket and a WebTransport
        // session to the private server; the page says how each ended.
        "/sockets" => (
            "200 OK",
            HTML.into(),
            format!(
                r#"<!doctype html><html><head><title>Sockets</title>
<link rel="preconnect" href="http://127.0.0.1:{private_port}">
</head><body>
<p id="ws">pending</p><p id="wt">pending</p>
<script>
const say = (id, what) => {{ document.getElementById(id).textContent = what; }};
const ws = new WebSocket("ws://127.0.0.1:{private_port}/socket");
ws.onopen = () => say("ws", "open");
ws.onerror = () => say("ws", "failed");
if (typeof WebTransport === "undefined") {{
  say("wt", "unsupported");
}} else {{
  try {{
    new WebTransport("https://127.0.0.1:{private_port}/").ready.then(
      () => say("wt", "open"), () => say("wt", "failed"));
  }} catch (e) {{ say("wt", "failed"); }}
}}
</script></body></html>"#
            ),
        ),
        _ => ("404 Not Found", HTML.into(), "no such page".into()),
    }
}

fn private(_target: &str, _other: u16) -> (&'static str, String, String) {
    ("200 OK", HTML.into(), "secret".into())
}

struct Fixture {
    site: Server,
    private: Server,
    kit: BrowserTools,
    tools: HashMap<String, Arc<dyn Tool>>,
    ctx: ToolContext,
    _project: crate::Project,
}

impl Fixture {
    async fn new() -> Fixture {
        let private = Server::start(private, 0).await;
        let site = Server::start(site, private.addr.port()).await;
        Self::with(site, private, Arc::new(StaticResolver::new()))
    }

    /// The tools for `site` (the test exception) and `private`, with `resolver` answering
    /// the guard's lookups (the proxy's too: Chromium resolves no name itself).
    fn with(site: Server, private: Server, resolver: Arc<dyn Resolver>) -> Fixture {
        let kit = BrowserTools::new(resolver).allow_private_target_for_tests(site.addr);
        let tools = kit
            .tools()
            .into_iter()
            .map(|t| (t.descriptor().name, t))
            .collect();
        let project = project();
        let mut ctx = project.ctx.clone();
        ctx.browser_executable = std::env::var_os("LUMINA_BROWSER_EXECUTABLE").map(PathBuf::from);
        Fixture {
            site,
            private,
            kit,
            tools,
            ctx,
            _project: project,
        }
    }

    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        let out = self.tools[tool].call(&self.ctx, args).await;
        if out.is_error && out.content.contains("no Chromium found") {
            panic!(
                "the browser tests need Chromium: run scripts/setup (apt-get install -y chromium) or \
                 set LUMINA_BROWSER_EXECUTABLE; skip them with `--skip browser::`"
            );
        }
        out
    }

    /// Ends the run the way the runtime does and waits until the profile is gone; the
    /// browser's proxy (stopped before the profile is deleted) no longer listens.
    async fn end_run(&self) -> PathBuf {
        let profile = self.kit.profile_dir(&self.ctx.session_id).await.unwrap();
        assert!(
            profile.is_dir(),
            "{profile:?} should exist while the browser runs"
        );
        let proxy = self.kit.proxy_addr(&self.ctx.session_id).await.unwrap();
        assert!(
            TcpStream::connect(proxy).await.is_ok(),
            "the proxy {proxy} should listen"
        );
        self.tools["browser_open"].run_ended(&self.ctx.session_id);
        for _ in 0..100 {
            if !profile.exists() {
                assert!(
                    TcpStream::connect(proxy).await.is_err(),
                    "the proxy {proxy} still listens after the run ended"
                );
                return profile;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the profile {profile:?} is still there 10 s after the run ended");
    }

    /// The text of `selector` in the active tab once it is no longer `pending` (the page's
    /// scripts report there), waiting up to 20 s.
    async fn reported(&self, selector: &str) -> String {
        for _ in 0..200 {
            let out = self
                .call("browser_extract", json!({"selector": selector}))
                .await;
            let text = ok_text(&out);
            if !text.contains("pending") {
                return text.to_string();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{selector} still says pending after 20 s");
    }
}

/// The `[n]` ref of the element line containing `needle` in an extract.
fn ref_of(extract: &str, needle: &str) -> u64 {
    let line = extract
        .lines()
        .find(|l| l.starts_with('[') && l.contains(needle))
        .unwrap_or_else(|| panic!("no element line with {needle} in:\n{extract}"));
    line[1..line.find(']').unwrap()].parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_filled_and_submitted_the_private_image_is_blocked_and_the_profile_removed() {
    let fx = Fixture::new().await;

    let opened = fx
        .call("browser_open", json!({"url": fx.site.url("/")}))
        .await;
    let text = ok_text(&opened);
    assert!(text.contains("\"Sign up\""), "{text}");
    // The page's refusals (Chromium's own start-up connections, refused by the proxy
    // because the test's resolver knows no name, may be listed too).
    let blocked: Vec<(String, String)> = blocked_of(&opened)
        .into_iter()
        .filter(|(url, _)| url.contains("127.0.0.1"))
        .collect();
    assert_eq!(
        blocked,
        vec![(
            format!("http://127.0.0.1:{}/tracker.png", fx.private.addr.port()),
            "127.0.0.1 is a loopback address".to_string()
        )],
        "{text}"
    );

    let page = fx.call("browser_extract", json!({})).await;
    let page = ok_text(&page);
    assert!(page.contains("Join the club"), "{page}");
    let send = ref_of(page, "\"Send\"");
    assert!(page.contains("name=name"), "{page}");

    let typed = fx
        .call("browser_type", json!({"selector": "#name", "text": "Ada"}))
        .await;
    assert!(ok_text(&typed).contains("Typed 3 characters"), "{typed:?}");
    let selected = fx
        .call(
            "browser_select",
            json!({"selector": "#color", "option": "Green"}),
        )
        .await;
    assert!(
        ok_text(&selected).contains(r#"Selected "Green" (value "g")"#),
        "{selected:?}"
    );
    let clicked = fx.call("browser_click", json!({"ref": send})).await;
    let clicked_text = ok_text(&clicked);
    assert_eq!(clicked.metadata["title"], "Thanks", "{clicked_text}");
    assert!(
        clicked.metadata["url"]
            .as_str()
            .unwrap()
            .ends_with("/submit?name=Ada&color=g"),
        "{clicked_text}"
    );

    let result = fx
        .call("browser_extract", json!({"selector": "#result"}))
        .await;
    assert!(
        ok_text(&result).contains("Hello Ada, you chose g"),
        "{result:?}"
    );

    let shot = fx.call("browser_screenshot", json!({})).await;
    ok_text(&shot);
    let path = PathBuf::from(shot.metadata["artifact"]["path"].as_str().unwrap());
    assert!(
        path.starts_with(fx.ctx.results_dir.join("artifacts")),
        "{path:?}"
    );
    assert_eq!(shot.metadata["artifact"]["title"], "Thanks");
    assert!(shot.metadata["artifact"]["url"]
        .as_str()
        .unwrap()
        .starts_with(&fx.site.url("/submit")));
    let png = std::fs::read(&path).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(png.len() > 1000, "a {}-byte PNG is too small", png.len());

    let tabs = fx.call("browser_tabs", json!({})).await;
    assert!(ok_text(&tabs).contains("(active)"), "{tabs:?}");

    let profile = fx.end_run().await;
    assert!(!profile.exists());
    // Nothing reached the private server; the site saw the page and the submission.
    assert_eq!(fx.private.seen(), Vec::<String>::new());
    let seen = fx.site.seen();
    assert!(seen.contains(&"/".to_string()), "{seen:?}");
    assert!(
        seen.contains(&"/submit?name=Ada&color=g".to_string()),
        "{seen:?}"
    );
    // After the run a reading tool finds no page.
    let after = fx.call("browser_extract", json!({})).await;
    assert!(error_text(&after).contains("browser_open"), "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_pages_redirects_to_them_and_other_schemes_are_refused() {
    let fx = Fixture::new().await;

    let direct = fx
        .call("browser_open", json!({"url": fx.private.url("/secret")}))
        .await;
    assert!(
        error_text(&direct).contains("127.0.0.1 is a loopback address"),
        "{direct:?}"
    );
    let file = fx
        .call("browser_open", json!({"url": "file:///etc/passwd"}))
        .await;
    assert!(
        error_text(&file).contains("only http:// and https://"),
        "{file:?}"
    );
    let metadata = fx
        .call(
            "browser_open",
            json!({"url": "http://169.254.169.254/latest/meta-data/"}),
        )
        .await;
    assert!(
        error_text(&metadata).contains("cloud metadata"),
        "{metadata:?}"
    );

    let redirected = fx
        .call("browser_open", json!({"url": fx.site.url("/redirect")}))
        .await;
    let message = error_text(&redirected);
    assert!(message.contains("blocked"), "{message}");
    assert!(message.contains("loopback"), "{message}");

    let bad = fx.call("browser_click", json!({"selector": "#nope"})).await;
    assert!(
        error_text(&bad).contains("no element matches #nope"),
        "{bad:?}"
    );

    fx.end_run().await;
    assert_eq!(fx.private.seen(), Vec::<String>::new());
    assert_eq!(fx.site.seen(), vec!["/redirect".to_string()]);
}

/// The `blocked` entries of a page tool's result.
fn blocked_of(out: &ToolOutput) -> Vec<(String, String)> {
    out.metadata["blocked"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|b| {
                    (
                        b["url"].as_str().unwrap_or_default().to_string(),
                        b["reason"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_preconnects_and_webtransport_to_a_private_server_are_refused_by_the_proxy() {
    let fx = Fixture::new().await;
    let private_port = fx.private.addr.port();
    // WebTransport would be QUIC: a datagram to the private port would land here.
    let udp = UdpSocket::bind(("127.0.0.1", private_port)).await.unwrap();

    let opened = fx
        .call("browser_open", json!({"url": fx.site.url("/sockets")}))
        .await;
    assert_eq!(opened.metadata["title"], "Sockets", "{opened:?}");
    assert!(
        fx.reported("#ws").await.contains("failed"),
        "the WebSocket should fail"
    );
    let wt = fx.reported("#wt").await;
    assert!(
        wt.contains("failed") || wt.contains("unsupported"),
        "WebTransport: {wt}"
    );
    // An action's result lists what was refused meanwhile (or the open's did).
    let clicked = fx.call("browser_click", json!({"selector": "#ws"})).await;
    ok_text(&clicked);
    let mut blocked = blocked_of(&opened);
    blocked.extend(blocked_of(&clicked));
    let private = format!("127.0.0.1:{private_port}");
    assert!(
        blocked
            .iter()
            .any(|(url, reason)| *url == private && reason == "127.0.0.1 is a loopback address"),
        "{blocked:?}"
    );

    fx.end_run().await;
    assert_eq!(
        fx.private.accepted(),
        0,
        "the private server accepted a connection"
    );
    assert_eq!(fx.private.seen(), Vec::<String>::new());
    let mut datagram = [0u8; 2048];
    match udp.try_recv(&mut datagram) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        other => panic!("the private UDP port got {other:?}"),
    }
    let seen = fx.site.seen();
    assert_eq!(
        seen.first().map(String::as_str),
        Some("/sockets"),
        "{seen:?}"
    );
}

/// Answers `rebind.test` with 127.0.0.1 to the first `allowed` lookups and 127.0.0.2
/// afterwards: a name server that rebinds once the name has been checked. Other names
/// (Chromium's own start-up connections) do not resolve and do not count.
struct Rebinding {
    allowed: usize,
    lookups: AtomicUsize,
}

#[async_trait]
impl Resolver for Rebinding {
    async fn resolve(&self, host: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        if host != "rebind.test" {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no such host"));
        }
        let n = self.lookups.fetch_add(1, Ordering::SeqCst);
        let ip = if n < self.allowed {
            "127.0.0.1"
        } else {
            "127.0.0.2"
        };
        Ok(vec![ip.parse().unwrap()])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_rebinds_to_a_private_address_after_the_check_is_refused_by_the_proxy() {
    let site = Server::start(site, 0).await;
    // The private server: the same port as the site, on another loopback address.
    let private = Server::start_at(&format!("127.0.0.2:{}", site.addr.port()), private, 0).await;
    // `browser_open`'s check and the paused request's check see the site's address; the
    // proxy's lookup, made to connect, gets the private one.
    let resolver = Arc::new(Rebinding {
        allowed: 2,
        lookups: AtomicUsize::new(0),
    });
    let fx = Fixture::with(site, private, resolver.clone());

    let url = format!("http://rebind.test:{}/", fx.site.addr.port());
    let opened = fx.call("browser_open", json!({"url": url})).await;
    let message = error_text(&opened);
    // Refused by the proxy (`host:port`), not by a URL check (which would name the URL).
    assert!(
        message.contains(&format!(
            "rebind.test:{} (rebind.test resolves to 127.0.0.2, a loopback address)",
            fx.site.addr.port()
        )),
        "{message}"
    );
    assert!(resolver.lookups.load(Ordering::SeqCst) >= 3);

    fx.end_run().await;
    assert_eq!(
        fx.private.accepted(),
        0,
        "the private server accepted a connection"
    );
    assert_eq!(fx.site.seen(), Vec::<String>::new());
}
