//! Delegated A2A tasks in the console: the caller's scripted model calls `a2a_delegate`
//! against a second in-process backend (the two-backend harness of `crate::delegate`: the
//! caller signs as peer `caller`, the remote accepts its key, loopback agents are allowed in
//! tests). The session page's *Delegated tasks* panel shows the call's card — the agent, the
//! remote task id, its states ending `completed`, the history of its steps (collapsed) and
//! the remote agent's answer from the tool result — also after a reload, and passes axe at
//! 1280×800 and at phone width. It takes `delegate.png`. A second delegation to a slowly
//! answering remote is stopped with the card's *Cancel*, which interrupts the run; the
//! interrupted call cancels the remote task, and the card shows it `canceled`.

use lumina_protocol::{Event, WS_PATH};
use lumina_testkit::Turn;
use serde_json::json;

use super::cdp::Browser;
use super::flows::signed_in;
use super::shots;
use crate::support::Harness;

fn http_base(ws_url: &str) -> String {
    ws_url.replace("ws://", "http://").replace(WS_PATH, "")
}

const CARD: &str = "(() => { const c = document.querySelector('#delegates-list > li.delegate'); \
    return c && { agent: c.querySelector('.delegate-agent').textContent, \
    state: c.querySelector('.delegate-state').textContent, \
    task: (c.querySelector('.delegate-task') || {}).textContent || null, \
    history: [...c.querySelectorAll('.delegate-history > li')].map(li => li.textContent), \
    historyOpen: c.querySelector('.delegate-steps').open, \
    result: (c.querySelector('.delegate-result pre') || {}).textContent || null }; })()";

#[tokio::test(flavor = "multi_thread")]
async fn the_console_shows_a_delegated_task_until_it_completes() {
    let keys = lumina_peer::generate_ed25519().unwrap();
    let peer =
        json!({"node": "remote", "nodes": {"caller": {"ed25519_public_key": keys.public_key}}});
    let remote = Harness::start_with(
        "anthropic",
        vec![
            Turn::text("remote answer: 42"),
            // The second task takes its time: the caller stops waiting for it.
            Turn::text("a slow answer, word by word, that takes a while to arrive")
                .with_chunk_delay_ms(400),
        ],
        &[("LUMINA_PEER", &peer.to_string())],
    )
    .await;
    let me = json!({"node": "caller", "ed25519_private_key": keys.private_seed.expose()});
    let peers = json!({"remote": {"url": http_base(&remote.url)}});
    let local = Harness::start_with(
        "anthropic",
        vec![
            Turn::tool_call(
                "a2a_delegate",
                json!({"agent": "remote", "message": "what is the answer?"}),
            ),
            Turn::text("the remote agent says 42"),
            Turn::tool_call(
                "a2a_delegate",
                json!({"agent": "remote", "message": "take your time"}),
            ),
        ],
        &[
            ("LUMINA_PEER", &me.to_string()),
            ("LUMINA_A2A_PEERS", &peers.to_string()),
            ("LUMINA_PERMISSIONS", r#"{"allow": ["a2a_delegate"]}"#),
        ],
    )
    .await;
    let (client, _notes) = local.client().await;
    let session = local.session(&client).await;

    let browser = Browser::launch().await;
    let page = signed_in(&browser, &local, &format!("#/session/{}", session.id)).await;
    // Nothing delegated yet: no panel.
    assert_eq!(
        page.eval("document.querySelector('#delegates').hidden")
            .await,
        json!(true)
    );
    page.type_into("#prompt", "ask the remote agent").await;
    page.click("#send").await;
    page.wait_for("document.querySelector('#session-status').textContent === 'idle' && document.querySelector('#delegates-list .delegate-result')")
        .await;

    let journaled: Vec<(String, Option<String>, Option<String>)> = client
        .session_events(&session.id, 0, Some(1000))
        .await
        .unwrap()
        .events
        .into_iter()
        .filter_map(|f| match f.event {
            Event::DelegateUpdated {
                step,
                state,
                task_id,
                ..
            } => Some((format!("{step:?}"), state, task_id)),
            _ => None,
        })
        .collect();
    let task_id = journaled
        .iter()
        .find_map(|s| s.2.clone())
        .expect("a remote task id");

    let check = |card: serde_json::Value| {
        assert_eq!(card["agent"], "remote", "{card}");
        assert_eq!(card["state"], "completed", "{card}");
        assert_eq!(card["task"], json!(task_id), "{card}");
        assert_eq!(card["historyOpen"], false, "{card}");
        let history: Vec<String> = serde_json::from_value(card["history"].clone()).unwrap();
        // One line per journaled step, in order: the card read, the message sent, … the end.
        assert_eq!(
            history.len(),
            journaled.len(),
            "{history:?} vs {journaled:?}"
        );
        assert!(history[0].starts_with("Agent card read"), "{history:?}");
        assert!(history[1].starts_with("Message sent"), "{history:?}");
        assert!(
            history.last().unwrap().starts_with("Stopped following")
                && history.last().unwrap().contains("completed"),
            "{history:?}"
        );
        let result = card["result"].as_str().unwrap_or_default();
        assert!(result.contains("remote answer: 42"), "{card}");
    };
    check(page.eval(CARD).await);
    // The answer reached the conversation too.
    page.wait_for(
        "document.querySelector('#timeline').textContent.includes('the remote agent says 42')",
    )
    .await;
    page.eval("document.querySelector('#delegates .delegate-steps').open = true")
        .await;
    page.screenshot(&shots().join("delegate.png")).await;
    super::a11y::assert_accessible(&page, "delegated tasks").await;
    page.viewport(390, 844, true).await;
    super::a11y::assert_accessible(&page, "delegated tasks at phone width").await;
    page.viewport(1280, 800, false).await;

    // A reload replays the journal: the same card, once.
    page.eval("window.beforeReload = true").await;
    page.reload().await;
    page.wait_for(
        "!window.beforeReload && document.querySelector('#delegates-list .delegate-result')",
    )
    .await;
    assert_eq!(
        page.eval("document.querySelectorAll('#delegates-list > li').length")
            .await,
        json!(1)
    );
    check(page.eval(CARD).await);

    // Cancel: the card's button interrupts the run that made the call, and the interrupted
    // call cancels the remote task; the card shows the remote's answer.
    page.type_into("#prompt", "ask again").await;
    page.click("#send").await;
    let second = "document.querySelectorAll('#delegates-list > li')[1]";
    page.wait_for(&format!(
        "{second} && {second}.querySelector('.delegate-state').textContent === 'working' && {second}.querySelector('.delegate-stop')"
    ))
    .await;
    super::a11y::assert_accessible(&page, "a delegated task being followed").await;
    page.click("#delegates-list > li:nth-child(2) .delegate-stop")
        .await;
    page.wait_for(&format!(
        "{second}.querySelector('.delegate-state').textContent === 'canceled' && document.querySelector('#session-status').textContent === 'idle'"
    ))
    .await;
    let detail = page
        .eval(&format!(
            "{second}.querySelector('.delegate-detail').textContent"
        ))
        .await;
    assert!(
        detail
            .as_str()
            .unwrap_or_default()
            .contains("canceled: the run was interrupted"),
        "{detail}"
    );
    assert!(page
        .eval(&format!("{second}.querySelector('.delegate-stop')"))
        .await
        .is_null());
    // The first card is untouched.
    check(page.eval(CARD).await);

    browser.close().await;
    local.stop().await;
    remote.stop().await;
}
