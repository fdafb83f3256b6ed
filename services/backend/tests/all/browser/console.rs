//! The console end to end: one-time sign-in, sessions, a streamed Markdown answer, the
//! approval dialog (surviving a reload), the diff and the file on disk; refused credentials
//! and tickets; the security headers. Screenshots of each page go to `docs/console/`.

use lumina_protocol::methods::Empty;
use lumina_testkit::Turn;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::cdp::Browser;
use super::shots;
use crate::support::Harness;

fn http_base(harness: &Harness) -> String {
    harness
        .url
        .replace("ws://", "http://")
        .trim_end_matches("/v1/ws")
        .to_string()
}

/// A raw HTTP/1.1 GET against the backend: (status line, headers lowercased, body).
async fn http_get(harness: &Harness, path: &str, extra: &str) -> (String, Vec<(String, String)>) {
    let host = http_base(harness).replace("http://", "");
    let mut stream = tokio::net::TcpStream::connect(&host).await.unwrap();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let head = response.split("\r\n\r\n").next().unwrap_or_default();
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

async fn ticket(harness: &Harness) -> String {
    let (client, _notes) = harness.client().await;
    let ticket = client.calls().console_ticket(&Empty {}).await.unwrap();
    assert!(ticket.login_path.starts_with("/console/login?ticket="));
    assert!(
        !ticket.login_path.contains(&harness.token),
        "the bearer token must not be in the link"
    );
    format!("{}{}", http_base(harness), ticket.login_path)
}

#[tokio::test(flavor = "multi_thread")]
async fn sign_in_chat_approve_a_write_and_see_the_diff() {
    let harness = Harness::start(
        "anthropic",
        vec![
            // Slow chunks, so the answer is seen streaming before it is complete.
            Turn {
                chunk_delay_ms: 40,
                ..Turn::text("# Greeting\nHello **world** from `lumina`:\n\n- one\n- two\n\n<img src=x onerror=alert(1)>")
            },
            Turn::tool_call(
                "write_file",
                json!({"path": "hello.txt", "content": "hi from the console\n"}),
            ),
            Turn::text("Wrote `hello.txt`."),
        ],
    )
    .await;
    let browser = Browser::launch().await;
    let page = browser.page().await;
    page.goto(&ticket(&harness).await).await;
    page.wait_for("document.querySelector('#new-session')")
        .await;
    assert_eq!(
        page.eval("location.search + location.hash").await,
        json!(""),
        "the ticket leaves the address bar"
    );
    assert_eq!(
        page.eval("document.cookie").await,
        json!(""),
        "the session cookie is HttpOnly"
    );

    // A new session.
    page.type_into("#new-title", "console e2e").await;
    page.click("#create").await;
    page.wait_for("document.querySelector('#timeline') && document.querySelector('#session-title').textContent === 'console e2e'")
        .await;

    // A prompt and its streamed Markdown answer (rendered as elements, the HTML as text).
    page.type_into("#prompt", "say hello").await;
    page.click("#send").await;
    page.wait_for("document.querySelector('.item.assistant.streaming')")
        .await;
    // The durable message replaces the streamed preview.
    page.wait_for("!document.querySelector('.item.assistant.streaming') && document.querySelector('.item.assistant')")
        .await;
    page.wait_for("[...document.querySelectorAll('.item.assistant strong')].some(e => e.textContent === 'world')")
        .await;
    assert_eq!(
        page.eval("document.querySelectorAll('.item.assistant li').length")
            .await,
        json!(2)
    );
    assert_eq!(
        page.eval("document.querySelectorAll('img').length").await,
        json!(0)
    );
    assert!(page
        .text(".item.assistant")
        .await
        .contains("<img src=x onerror=alert(1)>"));
    page.wait_for("document.querySelector('#session-status').textContent === 'idle'")
        .await;
    page.screenshot(&shots().join("session.png")).await;

    // A write asks; the dialog shows the exact arguments and the diff preview.
    page.type_into("#prompt", "write the file").await;
    page.click("#send").await;
    page.wait_for("document.querySelector('dialog#permission[open]')")
        .await;
    assert!(page.text("#permission-args").await.contains("hello.txt"));
    assert!(page
        .text("dialog#permission pre.diff")
        .await
        .contains("+hi from the console"));
    page.screenshot(&shots().join("approval.png")).await;

    // A reload brings the dialog back (pending requests are in the journal).
    page.reload().await;
    page.wait_for("document.querySelector('dialog#permission[open]') && document.querySelector('#permission-args').textContent.includes('hello.txt')")
        .await;
    assert!(
        !harness.path("hello.txt").exists(),
        "nothing is written before the answer"
    );

    page.click("#allow-once").await;
    page.wait_for("!document.querySelector('#changes').hidden && document.querySelector('#changes pre.diff').textContent.includes('+hi from the console')")
        .await;
    page.wait_for("[...document.querySelectorAll('.item.assistant code')].some(e => e.textContent === 'hello.txt')")
        .await;
    page.wait_for("document.querySelector('#session-status').textContent === 'idle'")
        .await;
    assert_eq!(
        crate::support::read(&harness.path("hello.txt")),
        "hi from the console\n"
    );
    assert_eq!(
        page.eval("document.querySelectorAll('dialog[open]').length")
            .await,
        json!(0)
    );
    page.screenshot(&shots().join("diff.png")).await;

    // Phone width: the panels go under the conversation.
    page.viewport(390, 844, true).await;
    page.screenshot(&shots().join("session-phone.png")).await;

    browser.close().await;
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_or_wrong_credentials_and_reused_tickets_get_the_sign_in_page() {
    let harness = Harness::start("anthropic", vec![]).await;
    let browser = Browser::launch().await;

    // No credential: the sign-in page and nothing else.
    let page = browser.page().await;
    page.goto(&format!("{}/", http_base(&harness))).await;
    page.wait_for("document.querySelector('#signin')").await;
    assert_eq!(
        page.eval("document.querySelectorAll('#sessions, #timeline').length")
            .await,
        json!(0)
    );
    page.screenshot(&shots().join("signin.png")).await;

    // A wrong JWT pasted: refused, still the sign-in page.
    page.type_into("#jwt", "not-a-token").await;
    page.click("#signin-form button").await;
    page.wait_for("document.querySelector('#signin-error').textContent.includes('refused')")
        .await;
    assert_eq!(
        page.eval("document.querySelectorAll('#sessions').length")
            .await,
        json!(0)
    );

    // The right bearer token pasted signs in over the `bearer.<token>` subprotocol (the
    // cluster console's path; the local token is a bearer token too), held in memory only.
    let pasted = browser.page().await;
    pasted.goto(&format!("{}/", http_base(&harness))).await;
    pasted.wait_for("document.querySelector('#signin')").await;
    pasted.type_into("#jwt", &harness.token).await;
    pasted.click("#signin-form button").await;
    pasted
        .wait_for("document.querySelector('#new-session')")
        .await;
    assert_eq!(
        pasted
            .eval("document.cookie + localStorage.length + sessionStorage.length")
            .await,
        json!("00")
    );
    assert!(!pasted
        .eval("document.documentElement.outerHTML")
        .await
        .as_str()
        .unwrap()
        .contains(&harness.token));

    // A ticket works once.
    let link = ticket(&harness).await;
    let first = browser.page().await;
    first.goto(&link).await;
    first
        .wait_for("document.querySelector('#new-session')")
        .await;
    let second = browser.page().await;
    second.goto(&link).await;
    second.wait_for("document.querySelector('#signin-error') && document.querySelector('#signin-error').textContent.includes('already used')")
        .await;
    assert_eq!(
        second
            .eval("document.querySelectorAll('#sessions').length")
            .await,
        json!(0)
    );
    let path = link.trim_start_matches(&http_base(&harness));
    let (status, headers) = http_get(&harness, path, "").await;
    assert!(status.contains("303"), "{status}");
    assert_eq!(header(&headers, "location"), Some("/?signin=refused"));
    assert_eq!(header(&headers, "set-cookie"), None);

    // A bogus cookie, and a good cookie from another origin, cannot open the WebSocket.
    let fresh = ticket(&harness).await;
    let fresh_path = fresh.trim_start_matches(&http_base(&harness)).to_string();
    let (_, headers) = http_get(&harness, &fresh_path, "").await;
    let cookie = header(&headers, "set-cookie").unwrap().to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let cookie = cookie.split(';').next().unwrap().to_string();
    let host = http_base(&harness).replace("http://", "");
    for (cookie, origin, ok) in [
        (cookie.as_str(), format!("http://{host}"), true),
        (cookie.as_str(), "http://evil.example".to_string(), false),
        ("lumina_console=0000", format!("http://{host}"), false),
    ] {
        let mut request =
            tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
                harness.url.as_str(),
            )
            .unwrap();
        request
            .headers_mut()
            .insert("cookie", cookie.parse().unwrap());
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
        let result = tokio_tungstenite::connect_async(request).await;
        assert_eq!(result.is_ok(), ok, "cookie {cookie} origin {origin}");
    }
    browser.close().await;
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_and_its_files_carry_a_strict_csp_and_security_headers() {
    let harness = Harness::start("anthropic", vec![]).await;
    for path in [
        "/",
        "/console/app.js",
        "/console/style.css",
        "/console/login?ticket=nope",
    ] {
        let (status, headers) = http_get(&harness, path, "").await;
        let csp =
            header(&headers, "content-security-policy").unwrap_or_else(|| panic!("{path}: no CSP"));
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(
            header(&headers, "x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(
            header(&headers, "referrer-policy"),
            Some("no-referrer"),
            "{path}"
        );
        assert!(header(&headers, "cache-control").is_some(), "{path}");
        assert!(
            status.contains("200") || status.contains("303"),
            "{path}: {status}"
        );
    }
    let (_, headers) = http_get(&harness, "/console/app.js", "").await;
    assert_eq!(
        header(&headers, "content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let (status, _) = http_get(&harness, "/console/nope.js", "").await;
    assert!(status.contains("404"), "{status}");

    // The browser really enforces it: an injected inline script does not run.
    let browser = Browser::launch().await;
    let page = browser.page().await;
    page.goto(&format!("{}/", http_base(&harness))).await;
    page.wait_for("document.querySelector('#signin')").await;
    let ran = page
        .eval("(() => { const s = document.createElement('script'); s.textContent = 'window.__inline = 1'; document.body.append(s); return window.__inline === 1; })()")
        .await;
    assert_eq!(ran, json!(false), "CSP must block inline script");
    browser.close().await;
    harness.stop().await;
}
