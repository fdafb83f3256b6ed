//! The web console against the cluster profile, in a real headless Chromium: two instances
//! behind no proxy, a pasted JWT on each, one session seen from both, a tenant that does not
//! see it; and a third instance configured with `jwt_proxy_header`, where a page load
//! carrying the header (as an authenticating proxy would add it) signs in without a paste —
//! while the same header is ignored by the instances not configured for it. Also the
//! artifact route's tenant check.

use lumina_testkit::Turn;
use serde_json::{json, Value};

use super::support::Cluster;
use crate::browser::cdp::{Browser, Page};

const PROXY_HEADER: &str = "X-Forwarded-Access-Token";

fn page_url(cluster: &Cluster, i: usize) -> String {
    format!("http://127.0.0.1:{}/", cluster.instances[i].port)
}

/// Signs in on the sign-in page with a pasted JWT.
async fn paste_jwt(page: &Page<'_>, token: &str) {
    page.wait_for("document.querySelector('#signin')").await;
    page.type_into("#jwt", token).await;
    page.click("#signin-form button").await;
}

/// Every timeline entry as `class: text`, in order.
async fn timeline(page: &Page<'_>) -> Value {
    page.eval("[...document.querySelectorAll('#timeline .item')].map(e => e.className + ': ' + e.textContent)")
        .await
}

/// The page's markup and script-visible state, for checking a token is nowhere in them.
async fn page_state(page: &Page<'_>) -> String {
    page.eval(
        "document.documentElement.outerHTML + document.cookie + JSON.stringify(localStorage) \
         + JSON.stringify(sessionStorage)",
    )
    .await
    .as_str()
    .unwrap_or_default()
    .to_string()
}

/// Sets a header on every request of the page (documents and WebSocket upgrades), as an
/// authenticating reverse proxy would.
async fn proxy_adds(page: &Page<'_>, token: &str) {
    page.send("Network.enable", json!({})).await;
    page.send(
        "Network.setExtraHTTPHeaders",
        json!({ "headers": { PROXY_HEADER: token } }),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_session_through_two_instances_consoles_tenants_and_the_proxy_header() {
    let limit = std::time::Duration::from_secs(240);
    tokio::time::timeout(limit, scenario())
        .await
        .expect("the cluster console scenario took over 4 minutes");
}

async fn scenario() {
    let mut cluster = Cluster::start(
        2,
        vec![Turn {
            chunk_delay_ms: 40,
            ..Turn::text("Hello from **the cluster**: one\ntwo\nthree\nfour\nfive")
        }],
    )
    .await;
    let token = cluster.user_token();
    let browser = Browser::launch().await;

    // Instance A: a pasted JWT, a new session, a streamed answer.
    let a = browser.page().await;
    a.goto(&page_url(&cluster, 0)).await;
    paste_jwt(&a, &token).await;
    a.wait_for("document.querySelector('#new-session')").await;
    a.type_into("#new-title", "cluster console").await;
    a.click("#create").await;
    a.wait_for("document.querySelector('#timeline') && document.querySelector('#session-title').textContent === 'cluster console'")
        .await;
    let session_id = a
        .eval("location.hash.replace('#/session/', '')")
        .await
        .as_str()
        .unwrap()
        .to_string();
    assert!(!session_id.is_empty());
    a.type_into("#prompt", "say hello").await;
    a.click("#send").await;
    a.wait_for("document.querySelector('.item.assistant.streaming')")
        .await;
    a.wait_for("!document.querySelector('.item.assistant.streaming') && [...document.querySelectorAll('.item.assistant strong')].some(e => e.textContent === 'the cluster')")
        .await;
    a.wait_for("document.querySelector('#session-status').textContent === 'idle'")
        .await;
    let seen_on_a = timeline(&a).await;
    assert!(
        seen_on_a.as_array().unwrap().len() >= 2,
        "the prompt and the answer at least: {seen_on_a}"
    );
    assert!(!page_state(&a).await.contains(&token));

    // Instance B, its own pasted JWT: the same session, the same events.
    let b = browser.page().await;
    b.goto(&format!("{}#/session/{session_id}", page_url(&cluster, 1)))
        .await;
    paste_jwt(&b, &token).await;
    b.wait_for("document.querySelector('#session-status') && document.querySelector('#session-status').textContent === 'idle' && document.querySelector('.item.assistant strong')")
        .await;
    assert_eq!(timeline(&b).await, seen_on_a);
    assert_eq!(
        b.text("#session-title").await,
        "cluster console",
        "the session's title on B"
    );

    // Another tenant, on B: no such session, neither listed nor opened.
    let other_tenant = cluster.token(
        "mallory",
        "t2",
        &["lumina:session:read", "lumina:session:write"],
    );
    let c = browser.page().await;
    c.goto(&page_url(&cluster, 1)).await;
    paste_jwt(&c, &other_tenant).await;
    c.wait_for("document.querySelector('#sessions') && document.querySelector('#sessions').textContent.includes('No sessions yet')")
        .await;
    let c = browser.page().await;
    c.goto(&format!("{}#/session/{session_id}", page_url(&cluster, 1)))
        .await;
    paste_jwt(&c, &other_tenant).await;
    c.wait_for("document.querySelector('#session-error') && document.querySelector('#session-error').textContent !== ''")
        .await;
    assert_eq!(
        c.eval("document.querySelectorAll('.item.assistant').length")
            .await,
        json!(0),
        "another tenant sees nothing of the session"
    );

    // The session's artifacts (docs/console.md#artifacts): its tenant's JWT reads them;
    // another tenant's, one without the read scope, or none does not. (These instances
    // share one AppRoot, so both find the file; in a deployment each has its own disk.)
    let artifacts = cluster
        .tmp
        .path()
        .join("app/state/tool-results")
        .join(&session_id)
        .join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let png = b"\x89PNG\r\n\x1a\n(a picture)".to_vec();
    std::fs::write(artifacts.join("screenshot-c1.png"), &png).unwrap();
    let http = reqwest::Client::new();
    let write_only = cluster.token("bob", "t1", &["lumina:session:write"]);
    for (i, token, status) in [
        (0, Some(&token), 200),
        (1, Some(&token), 200),
        (1, Some(&other_tenant), 404),
        (0, Some(&write_only), 403),
        (0, None, 401),
    ] {
        let mut request = http.get(format!(
            "http://127.0.0.1:{}/console/api/sessions/{session_id}/artifacts/screenshot-c1.png",
            cluster.instances[i].port
        ));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), status, "instance {i}, token {token:?}");
        if status == 200 {
            assert_eq!(response.headers()["content-type"], "image/png");
            assert_eq!(response.bytes().await.unwrap().as_ref(), png.as_slice());
        }
    }

    // A proxy header on instances not configured for it is ignored, even with a valid JWT.
    let forged = browser.page().await;
    proxy_adds(&forged, &token).await;
    forged.goto(&page_url(&cluster, 0)).await;
    forged.wait_for("document.querySelector('#signin')").await;
    assert_eq!(
        forged
            .eval("document.querySelectorAll('#sessions, #timeline').length")
            .await,
        json!(0)
    );

    // Instance C, configured with the header: a page load carrying it signs in by itself
    // and shows the session; the token is nowhere in the page.
    cluster
        .extra_env
        .push(("LUMINA_JWT_PROXY_HEADER".into(), PROXY_HEADER.into()));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    cluster.spawn("i2", port);
    cluster.wait_ready(2).await;
    let proxied = browser.page().await;
    proxy_adds(&proxied, &token).await;
    proxied
        .goto(&format!("{}#/session/{session_id}", page_url(&cluster, 2)))
        .await;
    proxied
        .wait_for("document.querySelector('#session-status') && document.querySelector('#session-status').textContent === 'idle' && document.querySelector('.item.assistant strong')")
        .await;
    assert_eq!(timeline(&proxied).await, seen_on_a);
    assert!(!page_state(&proxied).await.contains(&token));

    // On C too, the header's JWT is verified like a bearer one: another tenant's sees
    // nothing, a garbage one gets the sign-in page.
    let proxied_other = browser.page().await;
    proxy_adds(&proxied_other, &other_tenant).await;
    proxied_other.goto(&page_url(&cluster, 2)).await;
    proxied_other
        .wait_for("document.querySelector('#sessions') && document.querySelector('#sessions').textContent.includes('No sessions yet')")
        .await;
    let garbage = browser.page().await;
    proxy_adds(&garbage, "not-a-jwt").await;
    garbage.goto(&page_url(&cluster, 2)).await;
    garbage.wait_for("document.querySelector('#signin')").await;

    browser.close().await;
}
