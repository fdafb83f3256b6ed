//! `kill -9` of the real `lumina-backend` binary while the console streams an answer, then a
//! restart on the same AppRoot: the backend takes the port of the one it replaces, keeps the
//! page's cookie session, and the page reconnects by itself (no sign-in), resumes from its
//! last seq and shows the run as interrupted, every line once — also when the backend stays
//! down longer than the page's first retries.

use std::time::Duration;

use lumina_client::Client;
use lumina_protocol::methods::Empty;
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;

use super::cdp::{Browser, Page};
use crate::crash::{dirs, kill9, spawn_backend, unsafe_free_sigterm, Backend};

/// The timeline's lines, in order.
async fn lines(page: &Page<'_>) -> Vec<String> {
    let value = page
        .eval("[...document.querySelectorAll('#timeline > li')].map(li => li.textContent)")
        .await;
    serde_json::from_value(value).unwrap()
}

/// A page of `browser` signed in to `backend` with a one-time link.
async fn sign_in<'a>(browser: &'a Browser, backend: &Backend) -> Page<'a> {
    let (client, _notes) = Client::connect(&backend.url, Some(&backend.token))
        .await
        .unwrap();
    let ticket = client.calls().console_ticket(&Empty {}).await.unwrap();
    let base = backend
        .url
        .replace("ws://", "http://")
        .trim_end_matches("/v1/ws")
        .to_string();
    let page = browser.page().await;
    page.goto(&format!("{base}{}", ticket.login_path)).await;
    page.wait_for("document.querySelector('#new-session')")
        .await;
    page
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_reconnects_to_a_backend_killed_mid_stream_and_restarted() {
    let (_tmp, project, app) = dirs();
    let words: Vec<String> = (1..=80).map(|i| format!("word{i}")).collect();
    let model = ScriptedModelServer::start(vec![
        // 4 characters every 300 ms: about 30 s for the whole answer.
        Turn::text(words.join(" ")).with_chunk_delay_ms(300),
    ])
    .unwrap();
    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let browser = Browser::launch().await;
    let page = sign_in(&browser, &backend).await;
    page.type_into("#new-title", "restart").await;
    page.click("#create").await;
    page.wait_for("document.querySelector('#timeline')").await;
    page.type_into("#prompt", "count slowly").await;
    page.click("#send").await;
    // Mid-stream: the start of the answer is on the page, its end is not.
    page.wait_for("document.querySelector('.item.assistant.streaming') && document.querySelector('.item.assistant.streaming').textContent.includes('word3 ')")
        .await;
    kill9(&mut backend);
    assert!(
        !page.text(".item.assistant").await.contains("word80"),
        "the answer was complete before the kill"
    );
    page.wait_for("document.querySelector('#conn').textContent !== 'connected'")
        .await;

    let mut restarted = spawn_backend(&app, &project, &model.base_url());
    assert_eq!(
        restarted.url, backend.url,
        "the restarted backend takes the port of the one it replaces"
    );
    // The page's backoff reaches 8 s between attempts: give it two of them.
    page.wait_for_within(
        "document.querySelector('#conn').textContent === 'connected'",
        Duration::from_secs(30),
    )
    .await;
    page.wait_for("document.querySelector('.run-end.interrupted') && document.querySelector('#session-status').textContent === 'idle'")
        .await;
    assert_eq!(
        page.eval("!!document.querySelector('#signin')").await,
        serde_json::json!(false),
        "the page was sent to sign in"
    );
    let seen = lines(&page).await;
    assert_eq!(seen.len(), 4, "{seen:#?}");
    assert!(seen[0].starts_with("Session created in"), "{seen:#?}");
    assert_eq!(seen[1], "Youcount slowly");
    assert!(
        seen[2].starts_with("Lumina")
            && seen[2].contains("word1 word2 word3")
            && seen[2].contains("Answer cut off"),
        "{seen:#?}"
    );
    assert!(seen[3].starts_with("Run interrupted"), "{seen:#?}");
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "a line is duplicated: {seen:#?}");

    // A reload is still signed in (the cookie outlived the process that issued it) and
    // shows the journal's view: the run and its interruption, once each.
    page.reload().await;
    page.wait_for("document.querySelector('.run-end.interrupted')")
        .await;
    let reloaded = lines(&page).await;
    assert_eq!(
        reloaded,
        vec![seen[0].clone(), seen[1].clone(), seen[3].clone()]
    );

    browser.close().await;
    unsafe_free_sigterm(restarted.child.id());
    let status = restarted.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_waits_for_a_backend_that_stays_down_longer_than_its_retries() {
    let (_tmp, project, app) = dirs();
    let model = ScriptedModelServer::start(vec![Turn::text("before the outage")]).unwrap();
    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let browser = Browser::launch().await;
    let page = sign_in(&browser, &backend).await;
    page.click("#create").await;
    page.wait_for("document.querySelector('#timeline')").await;
    page.type_into("#prompt", "hello").await;
    page.click("#send").await;
    page.wait_for("document.querySelector('#session-status').textContent === 'idle' && document.querySelector('.run-end.ok')")
        .await;
    let before = lines(&page).await;

    kill9(&mut backend);
    // Eight attempts take about 40 s; a page that gave up would be on the sign-in page.
    tokio::time::sleep(Duration::from_secs(45)).await;
    assert_eq!(page.text("#conn").await, "reconnecting");
    assert_eq!(
        page.eval("!!document.querySelector('#signin')").await,
        serde_json::json!(false),
        "the page gave up on a backend that was only down"
    );

    let mut restarted = spawn_backend(&app, &project, &model.base_url());
    assert_eq!(restarted.url, backend.url);
    page.wait_for_within(
        "document.querySelector('#conn').textContent === 'connected'",
        Duration::from_secs(20),
    )
    .await;
    page.wait_for("document.querySelector('#session-status').textContent === 'idle'")
        .await;
    assert_eq!(lines(&page).await, before);

    browser.close().await;
    unsafe_free_sigterm(restarted.child.id());
    assert!(restarted.child.wait().unwrap().success());
}
