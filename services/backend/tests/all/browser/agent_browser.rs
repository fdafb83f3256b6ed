//! The browser tools end to end through the backend (docs/browser.md): the scripted model
//! opens a loopback test page (the one address the tools' test exception allows, handed to
//! the backend with `local::build_with_tools` — no setting reaches it), types a name and
//! clicks submit (both approved over the protocol; extracting and the screenshot ask
//! nobody), extracts the result and takes a screenshot. The journal holds every result, the
//! PNG is under the session's artifacts, the browser's profile is gone once the run ended.
//! Then the artifact route (who may read what) and the console, which shows the screenshot
//! in the tool-call view, signed in with the cookie and with a pasted token.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lumina_protocol::methods::{Empty, SessionCreateParams};
use lumina_protocol::{Decision, Event, EventFrame};
use lumina_testkit::Turn;
use lumina_tools::builtin::{BrowserTools, WebFetch};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::a11y::assert_accessible;
use super::cdp::{browser_executable, Browser};
use crate::support::{next_event, submit, until_run_end, Harness};

/// The test site: a form (`/`) and its result page (`/submit?name=…`). Records request
/// targets.
struct Site {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Site {
    async fn start() -> Site {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
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
                    let (status, body) = page(&target);
                    let out = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(out.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        Site { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

fn page(target: &str) -> (&'static str, String) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/" => (
            "200 OK",
            r#"<!doctype html><html><head><title>Guest book</title></head>
<body style="font: 20px sans-serif; background: #fffbe6">
<h1>Sign the guest book</h1>
<form action="/submit" method="get">
  <label>Name <input id="name" name="name"></label>
  <button id="go" type="submit">Sign</button>
</form></body></html>"#
                .into(),
        ),
        "/submit" => {
            let name = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("name="))
                .unwrap_or("");
            (
                "200 OK",
                format!(
                    r#"<!doctype html><html><head><title>Signed</title></head>
<body style="font: 20px sans-serif; background: #e6f4ff">
<p id="result">Thank you, {name}: you are guest 42.</p></body></html>"#
                ),
            )
        }
        _ => ("404 Not Found", "no such page".into()),
    }
}

fn http_base(harness: &Harness) -> String {
    harness
        .url
        .replace("ws://", "http://")
        .trim_end_matches("/v1/ws")
        .to_string()
}

/// Every `tool.completed` of the journal by tool: (is_error, output, metadata).
fn results(frames: &[EventFrame]) -> Vec<(String, bool, String, Value)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::ToolCompleted {
                tool,
                is_error,
                output,
                metadata,
                ..
            } => Some((tool.clone(), *is_error, output.clone(), metadata.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_fills_a_form_and_the_console_shows_its_screenshot() {
    let site = Site::start().await;
    // The browser tools, and `web_fetch`, may reach exactly the test site; the test keeps
    // a handle on the browsers to see the profile directory.
    let browsers = BrowserTools::default().allow_private_target_for_tests(site.addr);
    let tools = lumina_tools::builtin_registry_with(
        WebFetch::default().allow_private_target_for_tests(site.addr),
        &browsers,
    );
    let chromium = browser_executable().display().to_string();
    let harness = Harness::start_with_tools(
        "anthropic",
        vec![
            Turn::tool_call("browser_open", json!({"url": site.url("/")})),
            Turn::tool_call("browser_type", json!({"selector": "#name", "text": "Ada"})),
            Turn::tool_call("browser_click", json!({"selector": "#go"})),
            Turn::tool_call("browser_extract", json!({"selector": "#result"})),
            Turn::tool_call("browser_screenshot", json!({})),
            Turn::text("Signed the guest book as Ada."),
        ],
        &[("LUMINA_BROWSER_EXECUTABLE", chromium.as_str())],
        tools,
    )
    .await;
    let (client, mut notes) = harness.client().await;
    let session = harness.session(&client).await;
    let run = client
        .session_submit(&submit(
            &session.id,
            "sign the guest book",
            json!({"permission_mode": "ask"}),
        ))
        .await
        .unwrap();

    // Opening a page asks (like web_fetch), typing and clicking ask (like writes); each is
    // approved once over the protocol. Extracting and the screenshot ask nobody.
    let mut asked = Vec::new();
    let mut profile: Option<PathBuf> = None;
    for _ in 0..3 {
        let frame = next_event(&mut notes, "permission.requested").await;
        let Event::PermissionRequested {
            request_id, tool, ..
        } = &frame.event
        else {
            unreachable!()
        };
        if tool == "browser_type" {
            // The page is open: the run's browser runs, with its own profile.
            let dir = browsers
                .profile_dir(&session.id)
                .await
                .expect("a browser runs");
            assert!(dir.is_dir(), "{dir:?}");
            profile = Some(dir);
        }
        asked.push(tool.clone());
        client
            .permission_respond(&session.id, request_id, Decision::AllowOnce, None)
            .await
            .unwrap();
    }
    assert_eq!(asked, ["browser_open", "browser_type", "browser_click"]);
    until_run_end(&mut notes, &run.run_id).await;

    // The journal: every call succeeded, with what it did.
    let frames = client
        .session_events(&session.id, 0, None)
        .await
        .unwrap()
        .events;
    assert_eq!(
        frames.last().map(|f| f.event.kind()),
        Some("run.completed"),
        "{frames:#?}"
    );
    let asked_in_journal: Vec<_> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::PermissionRequested { tool, .. } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        asked_in_journal,
        ["browser_open", "browser_type", "browser_click"],
        "extract and screenshot ask nobody"
    );
    let results = results(&frames);
    let tools: Vec<_> = results
        .iter()
        .map(|(t, e, _, _)| (t.as_str(), *e))
        .collect();
    assert_eq!(
        tools,
        [
            ("browser_open", false),
            ("browser_type", false),
            ("browser_click", false),
            ("browser_extract", false),
            ("browser_screenshot", false),
        ],
        "{results:#?}"
    );
    assert!(results[0].2.contains("Guest book"), "{}", results[0].2);
    assert!(results[2].2.contains("Signed"), "{}", results[2].2);
    assert!(
        results[3].2.contains("Thank you, Ada: you are guest 42."),
        "{}",
        results[3].2
    );
    let artifact = &results[4].3["artifact"];
    assert_eq!(artifact["kind"], "screenshot");
    assert_eq!(artifact["media_type"], "image/png");
    assert_eq!(artifact["title"], "Signed");
    let png_path = PathBuf::from(artifact["path"].as_str().unwrap());
    let artifacts = harness
        .tmp
        .path()
        .join("app/state/tool-results")
        .join(&session.id)
        .join("artifacts");
    assert_eq!(png_path.parent(), Some(artifacts.as_path()));
    let png = std::fs::read(&png_path).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(artifact["bytes"], json!(png.len()));
    assert!(results[4].2.contains(&png_path.display().to_string()));
    assert!(site
        .seen
        .lock()
        .unwrap()
        .iter()
        .any(|t| t == "/submit?name=Ada"));

    // The run ended: its browser was closed and its profile deleted.
    let profile = profile.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while profile.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the profile {profile:?} outlived the run"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(browsers.profile_dir(&session.id).await, None);

    // The artifact route: the bearer token (or the console cookie) reads the session's
    // PNGs, nothing else.
    let name = png_path.file_name().unwrap().to_str().unwrap().to_string();
    let base = http_base(&harness);
    let http = reqwest::Client::new();
    let get = |path: String, token: Option<&str>| {
        let mut request = http.get(format!("{base}{path}"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move { request.send().await.unwrap() }
    };
    let route =
        |session: &str, file: &str| format!("/console/api/sessions/{session}/artifacts/{file}");
    let ok = get(route(&session.id, &name), Some(&harness.token)).await;
    assert_eq!(ok.status(), 200);
    let headers = ok.headers().clone();
    assert_eq!(headers["content-type"], "image/png");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert!(headers.contains_key("content-security-policy"));
    assert_eq!(ok.bytes().await.unwrap().as_ref(), png.as_slice());
    assert_eq!(get(route(&session.id, &name), None).await.status(), 401);
    assert_eq!(
        get(route(&session.id, &name), Some("wrong-token"))
            .await
            .status(),
        401
    );
    // Another session (of the same user) does not have this file; unknown sessions and
    // names are not found; nothing leads out of the artifacts directory.
    let other = client
        .session_create(&SessionCreateParams {
            project_root: Some(harness.project.display().to_string()),
            title: None,
        })
        .await
        .unwrap();
    std::fs::write(artifacts.join("notes.txt"), "not an image").unwrap();
    std::fs::write(artifacts.join("fake.png"), "<svg onload=alert(1)>").unwrap();
    std::os::unix::fs::symlink(
        harness.tmp.path().join("app/state/run/backend.json"),
        artifacts.join("token.png"),
    )
    .unwrap();
    for path in [
        route(&other.id, &name),
        route(&uuid::Uuid::new_v4().to_string(), &name),
        route("not-a-session", &name),
        route(&session.id, "missing.png"),
        route(&session.id, "notes.txt"),
        route(&session.id, "fake.png"),
        route(&session.id, "token.png"),
        route(&session.id, "..%2F..%2Frun%2Fbackend.json"),
        route(&session.id, "%2E%2E"),
        format!(
            "/console/api/sessions/{}/artifacts/../../run/backend.json",
            session.id
        ),
        format!(
            "/console/api/sessions/..%2F{}%2Fartifacts/{name}",
            session.id
        ),
    ] {
        let response = get(path.clone(), Some(&harness.token)).await;
        assert_eq!(response.status(), 404, "{path}");
        let body = response.text().await.unwrap();
        assert!(!body.contains(&harness.token), "{path}: {body}");
    }

    // The console: the tool-call view shows the screenshot, with its alt text, as a button
    // that shows it at full size; the page stays accessible.
    let browser = Browser::launch().await;
    let page = browser.page().await;
    let ticket = client.calls().console_ticket(&Empty {}).await.unwrap();
    page.goto(&format!("{base}{}", ticket.login_path)).await;
    page.wait_for("document.querySelector('#new-session')")
        .await;
    page.eval(&format!("location.hash = '#/session/{}'", session.id))
        .await;
    let shown = "(() => { const i = document.querySelector('figure.artifact img'); \
                 return i && i.complete && i.naturalWidth > 0; })()";
    page.wait_for(shown).await;
    assert_eq!(
        page.eval("document.querySelectorAll('figure.artifact img').length")
            .await,
        json!(1)
    );
    assert_eq!(
        page.eval("document.querySelector('figure.artifact img').naturalWidth")
            .await,
        json!(1280),
        "the picture is the browser's window width"
    );
    assert_eq!(
        page.eval("new URL(document.querySelector('figure.artifact img').src).pathname")
            .await,
        json!(route(&session.id, &name))
    );
    let alt = page
        .eval("document.querySelector('figure.artifact img').alt")
        .await;
    assert!(
        alt.as_str()
            .unwrap()
            .contains("Screenshot of the page “Signed”"),
        "{alt}"
    );
    assert!(page
        .text("figure.artifact figcaption")
        .await
        .contains(&png_path.display().to_string()));
    page.eval("document.querySelector('figure.artifact').scrollIntoView({ block: 'center' })")
        .await;
    page.screenshot(&super::shots().join("screenshot.png"))
        .await;
    // The image is a native button: focusable, and Enter toggles full size.
    page.eval("document.querySelector('button.artifact-toggle').focus()")
        .await;
    assert_eq!(
        page.eval("document.activeElement.className").await,
        json!("artifact-toggle")
    );
    page.send("Page.bringToFront", json!({})).await;
    for (kind, text) in [("keyDown", "\r"), ("keyUp", "")] {
        page.send(
            "Input.dispatchKeyEvent",
            json!({"type": kind, "key": "Enter", "code": "Enter", "text": text,
                   "unmodifiedText": text, "windowsVirtualKeyCode": 13}),
        )
        .await;
    }
    page.wait_for("document.activeElement.getAttribute('aria-expanded') === 'true'")
        .await;
    assert_accessible(&page, "session with a screenshot").await;
    page.click("button.artifact-toggle").await;
    page.wait_for(
        "document.querySelector('button.artifact-toggle').getAttribute('aria-expanded') === 'false'",
    )
    .await;

    // A page of another local server (another port: the same site, so the SameSite cookie
    // goes along) cannot embed the picture: its request says `Sec-Fetch-Site: same-site`.
    let image_url = json!(format!("{base}{}", route(&session.id, &name)));
    let load = format!(
        "new Promise(r => {{ const i = new Image(); i.onload = () => r('loaded'); \
         i.onerror = () => r('refused'); i.src = {image_url}; }})"
    );
    assert_eq!(page.eval(&load).await, json!("loaded"), "from the console");
    page.goto(&site.url("/")).await;
    page.wait_for("document.title === 'Guest book'").await;
    assert_eq!(
        page.eval(&load).await,
        json!("refused"),
        "from another port"
    );

    // Signed in with a pasted token instead (the cluster's way; held by the page only):
    // the page fetches the image with it and shows it as a data: URL.
    let pasted = browser.page().await;
    pasted.goto(&format!("{base}/")).await;
    pasted.wait_for("document.querySelector('#signin')").await;
    pasted.type_into("#jwt", &harness.token).await;
    pasted.click("#signin-form button").await;
    pasted
        .wait_for("document.querySelector('#new-session')")
        .await;
    pasted
        .eval(&format!("location.hash = '#/session/{}'", session.id))
        .await;
    pasted.wait_for(shown).await;
    assert_eq!(
        pasted
            .eval("document.querySelector('figure.artifact img').src.startsWith('data:image/png;base64,')")
            .await,
        json!(true)
    );

    browser.close().await;
    harness.stop().await;
}
