//! A delegation parked while its agent is down, retried from the console
//! (docs/console.md#delegated-tasks): the console's backend delegates to backend B (the real
//! binary, as in `crate::delegate_kill`); B is killed mid-task, so the call is parked. The
//! *Delegated tasks* card then shows it `waiting`, with the reason and a *Retry* button named
//! for the agent. Retry with the keyboard while B is down: the card's status says B is still
//! unreachable (`delegate.retry` answered `waiting`; the runtime journaled a new `waiting`
//! step) and the focus stays on *Retry*. B starts again on the same port and data; Retry:
//! the call continues B's task in place, the card ends `completed` with B's answer as the
//! result and no *Retry*, and every step names one remote task. It takes
//! `delegate-waiting.png`; axe passes on the parked card.

use std::time::{Duration, Instant};

use lumina_protocol::{DelegateStep, Event, WS_PATH};
use lumina_testkit::{ScriptedModelServer, Turn};
use serde_json::json;

use super::cdp::Browser;
use super::flows::signed_in;
use super::shots;
use super::team::press;
use crate::delegate_kill::{delegate_steps, spawn_b};
use crate::support::Harness;

const CARD: &str = "document.querySelector('#delegates-list > li.delegate')";

async fn waiting_steps(client: &lumina_client::Client, session: &str) -> usize {
    let frames = client
        .session_events(session, 0, Some(1000))
        .await
        .unwrap()
        .events;
    delegate_steps(&frames)
        .iter()
        .filter(|s| s.0 == DelegateStep::Waiting)
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parked_delegation_is_retried_from_the_console() {
    let keys = lumina_peer::generate_ed25519().unwrap();
    // B: its first answer stalls mid-stream (it is killed then); the continuation answers.
    let b_model = ScriptedModelServer::start(vec![
        Turn::text("thinking about it, slowly").stall_after(1),
        Turn::text("B's artifact: the answer is 42"),
    ])
    .unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let (b_app, b_project) = (b_dir.path().join("app"), b_dir.path().join("project"));
    std::fs::create_dir_all(&b_project).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut b = spawn_b(
        &b_app,
        &b_project,
        &b_model.base_url(),
        port,
        &keys.public_key,
    );

    let me = json!({"node": "caller", "ed25519_private_key": keys.private_seed.expose()});
    let peers = json!({"remote": {"url": format!("http://127.0.0.1:{port}")}});
    let local = Harness::start_with(
        "anthropic",
        vec![
            Turn::tool_call(
                "a2a_delegate",
                json!({"agent": "remote", "message": "compute the answer"}),
            ),
            Turn::text("the remote agent says 42"),
        ],
        &[
            ("LUMINA_PEER", &me.to_string()),
            ("LUMINA_A2A_PEERS", &peers.to_string()),
            ("LUMINA_PERMISSIONS", r#"{"allow": ["a2a_delegate"]}"#),
        ],
    )
    .await;
    assert!(local.url.ends_with(WS_PATH));
    let (client, _notes) = local.client().await;
    let session = local.session(&client).await;

    let browser = Browser::launch().await;
    let page = signed_in(&browser, &local, &format!("#/session/{}", session.id)).await;
    page.type_into("#prompt", "ask the remote agent").await;
    page.click("#send").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while b_model.request_count() == 0 {
        assert!(Instant::now() < deadline, "B's model was never asked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    // B dies mid-task: the card waits, says why, and offers Retry (and Cancel).
    b.kill().unwrap();
    b.wait().unwrap();
    page.wait_for(&format!(
        "{CARD}.querySelector('.delegate-state').textContent === 'waiting' && {CARD}.querySelector('.delegate-retry')"
    ))
    .await;
    let detail = page
        .text("#delegates-list > li.delegate .delegate-detail")
        .await;
    assert!(detail.contains("`remote` is unreachable"), "{detail}");
    let button = page
        .eval(&format!(
            "(() => {{ const b = {CARD}.querySelector('.delegate-retry'); return {{ name: b.getAttribute('aria-label'), text: b.textContent, described: document.getElementById(b.getAttribute('aria-describedby')).textContent, stop: !!{CARD}.querySelector('.delegate-stop') }}; }})()"
        ))
        .await;
    assert_eq!(
        button["name"], "Retry the task delegated to remote",
        "{button}"
    );
    assert_eq!(button["text"], "Retry", "{button}");
    assert_eq!(button["described"], json!(detail), "{button}");
    assert_eq!(button["stop"], true, "{button}");
    page.screenshot(&shots().join("delegate-waiting.png")).await;
    super::a11y::assert_accessible(&page, "a parked delegation").await;
    let parked = waiting_steps(&client, &session.id).await;
    assert_eq!(parked, 1);

    // Retry with the keyboard while B is down: still unreachable, still parked, and the
    // focus is where it was.
    page.eval(&format!("{CARD}.querySelector('.delegate-retry').focus()"))
        .await;
    press(&page, "Enter").await;
    page.wait_for(&format!(
        "{CARD}.querySelector('.delegate-retry-status').textContent.includes('still unreachable')"
    ))
    .await;
    let status = page
        .text("#delegates-list > li.delegate .delegate-retry-status")
        .await;
    assert!(
        status.starts_with("Retried: remote is still unreachable"),
        "{status}"
    );
    assert_eq!(
        page.eval(&format!(
            "{CARD}.querySelector('.delegate-retry-status').getAttribute('role')"
        ))
        .await,
        json!("status")
    );
    assert_eq!(
        page.eval("document.activeElement && document.activeElement.className")
            .await,
        json!("delegate-retry")
    );
    // The retry reached the backend: it parked the call again.
    assert_eq!(waiting_steps(&client, &session.id).await, parked + 1);

    // B is back: Retry continues B's task in place and the call ends with B's answer.
    let mut b = spawn_b(
        &b_app,
        &b_project,
        &b_model.base_url(),
        port,
        &keys.public_key,
    );
    press(&page, "Enter").await;
    page.wait_for_within(
        &format!(
            "{CARD}.querySelector('.delegate-state').textContent === 'completed' && {CARD}.querySelector('.delegate-result') && document.querySelector('#session-status').textContent === 'idle'"
        ),
        Duration::from_secs(60),
    )
    .await;
    assert!(page
        .eval(&format!("{CARD}.querySelector('.delegate-retry')"))
        .await
        .is_null());
    let result = page
        .text("#delegates-list > li.delegate .delegate-result pre")
        .await;
    assert!(
        result.contains("B's artifact: the answer is 42"),
        "{result}"
    );
    page.wait_for(&format!(
        "{CARD}.querySelector('.delegate-retry-status').textContent.startsWith('Retried: ') && !{CARD}.querySelector('.delegate-retry-status').textContent.includes('still unreachable')"
    ))
    .await;
    page.wait_for(
        "document.querySelector('#timeline').textContent.includes('the remote agent says 42')",
    )
    .await;

    let frames = client
        .session_events(&session.id, 0, Some(1000))
        .await
        .unwrap()
        .events;
    let remote_tasks: std::collections::BTreeSet<_> = delegate_steps(&frames)
        .iter()
        .filter_map(|s| s.1.clone())
        .collect();
    assert_eq!(remote_tasks.len(), 1, "{remote_tasks:?}");
    assert!(frames.iter().any(|f| matches!(
        &f.event,
        Event::ToolCompleted {
            is_error: false,
            ..
        }
    )));
    assert_eq!(b_model.request_count(), 2);

    browser.close().await;
    local.stop().await;
    b.kill().unwrap();
    b.wait().unwrap();
}
