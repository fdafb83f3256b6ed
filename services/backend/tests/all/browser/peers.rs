//! The A2A peers page (`#/peers`, `a2a.peers` over the console's WebSocket): a backend that
//! knows two peers — a second in-process backend serving A2A (loopback agents allowed as in
//! every test) and a closed loopback port — is opened from the header's *A2A peers* link
//! with the keyboard; the page shows each peer's URL, authentication, state and, for the
//! reachable one, its card's agent and skills; for the other, why. *Refresh* reads the cards
//! again. No token is on the page. axe finds no serious or critical violation at 1280×800 or
//! at phone width. It takes `peers.png`.

use lumina_protocol::WS_PATH;
use serde_json::{json, Value};

use super::cdp::{Browser, Page};
use super::flows::signed_in;
use super::shots;
use crate::support::Harness;

const TOKEN: &str = "console-peer-t0ken-never-on-the-page";

fn http_base(ws_url: &str) -> String {
    ws_url.replace("ws://", "http://").replace(WS_PATH, "")
}

/// Each peer card as {name, state, url, auth, reason, agent, skills}.
async fn cards(page: &Page<'_>) -> Value {
    page.eval(
        "[...document.querySelectorAll('#peers li.peer')].map(li => { \
           const t = s => (li.querySelector(s) || {}).textContent || null; \
           return { name: li.dataset.peer, state: t('.peer-state'), url: t('.peer-url'), \
             auth: t('.peer-auth'), reason: t('.peer-reason'), agent: t('.peer-agent'), \
             skills: [...li.querySelectorAll('.peer-skills li')].map(s => s.textContent) }; })",
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_peers_page_shows_each_peer_with_its_card_or_why_not() {
    let remote = Harness::start("anthropic", vec![]).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let peers = json!({
        "research": {"url": http_base(&remote.url), "token": TOKEN},
        "offline": {"url": format!("http://127.0.0.1:{closed}"), "sign": false},
    });
    let local = Harness::start_with(
        "anthropic",
        vec![],
        &[("LUMINA_A2A_PEERS", &peers.to_string())],
    )
    .await;

    let browser = Browser::launch().await;
    let page = signed_in(&browser, &local, "").await;
    // The header link, by keyboard: focus it and press Enter.
    page.eval("document.querySelector('#nav-peers').focus()")
        .await;
    assert_eq!(
        page.eval("document.activeElement.id").await,
        json!("nav-peers")
    );
    page.send(
        "Input.dispatchKeyEvent",
        json!({"type": "keyDown", "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"}),
    )
    .await;
    page.send(
        "Input.dispatchKeyEvent",
        json!({"type": "keyUp", "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13}),
    )
    .await;
    page.wait_for(
        "location.hash === '#/peers' && document.querySelectorAll('#peers li.peer').length === 2",
    )
    .await;

    let shown = cards(&page).await;
    assert_eq!(shown[0]["name"], "offline", "{shown}");
    assert_eq!(shown[0]["state"], "unreachable", "{shown}");
    assert_eq!(shown[0]["auth"], "none", "{shown}");
    assert_eq!(shown[0]["url"], format!("http://127.0.0.1:{closed}"));
    assert!(
        shown[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("cannot reach http://127.0.0.1:"),
        "{shown}"
    );
    assert_eq!(shown[1]["name"], "research", "{shown}");
    assert!(
        shown[1]["state"]
            .as_str()
            .unwrap()
            .starts_with("reachable · "),
        "{shown}"
    );
    assert_eq!(shown[1]["auth"], "bearer token", "{shown}");
    assert_eq!(shown[1]["url"], http_base(&remote.url));
    assert!(
        shown[1]["agent"].as_str().unwrap().starts_with("Lumina"),
        "{shown}"
    );
    assert_eq!(
        shown[1]["skills"],
        json!(["Agent run agent-run"]),
        "{shown}"
    );
    assert_eq!(shown[1]["reason"], Value::Null, "{shown}");
    let text = page.eval("document.body.textContent").await;
    assert!(!text.as_str().unwrap().contains(TOKEN));

    // The first listing read B's card; the next one (a new page) takes it from the cache,
    // Refresh reads it again.
    page.eval("location.hash = '#/'").await;
    page.wait_for("document.querySelector('#new-session')")
        .await;
    page.eval("location.hash = '#/peers'").await;
    page.wait_for("(document.querySelector('#peers li[data-peer=\"research\"] .peer-state') || {}).textContent === 'reachable · card cached'")
        .await;
    page.click("#peers-refresh").await;
    page.wait_for("(() => { const s = document.querySelector('#peers li[data-peer=\"research\"] .peer-state'); \
        return s && /^reachable · \\d+ ms$/.test(s.textContent) && !document.querySelector('#peers-refresh').disabled; })()")
        .await;

    page.screenshot(&shots().join("peers.png")).await;
    super::a11y::assert_accessible(&page, "A2A peers").await;
    page.viewport(390, 844, true).await;
    super::a11y::assert_accessible(&page, "A2A peers at phone width").await;
    // At phone width nothing is wider than the screen.
    assert_eq!(
        page.eval("document.documentElement.scrollWidth <= window.innerWidth")
            .await,
        json!(true)
    );
    page.viewport(1280, 800, false).await;

    browser.close().await;
    local.stop().await;
    remote.stop().await;
}
