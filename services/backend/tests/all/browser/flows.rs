//! The console's session controls in a real browser: a follow-up queued while a run waits
//! for approval and switched to steering, a goal started from its panel with a sub-agent in
//! the agent tree, two tabs on one session showing identical conversations, an oversized
//! paste refused with a clear message.

use lumina_protocol::methods::Empty;
use lumina_testkit::Turn;
use serde_json::json;

use super::cdp::{Browser, Page};
use super::shots;
use crate::support::Harness;

/// A signed-in page (its own browser context and ticket) at `#/session/<id>` or the list.
pub(super) async fn signed_in<'a>(browser: &'a Browser, harness: &Harness, hash: &str) -> Page<'a> {
    let (client, _notes) = harness.client().await;
    let ticket = client.calls().console_ticket(&Empty {}).await.unwrap();
    let base = harness
        .url
        .replace("ws://", "http://")
        .trim_end_matches("/v1/ws")
        .to_string();
    let page = browser.page().await;
    page.goto(&format!("{base}{}", ticket.login_path)).await;
    page.wait_for("document.querySelector('#new-session')")
        .await;
    if !hash.is_empty() {
        page.eval(&format!("location.hash = {}", json!(hash))).await;
        page.wait_for("document.querySelector('#timeline')").await;
    }
    page
}

const TIMELINE_TEXT: &str =
    "[...document.querySelectorAll('#timeline > li')].map(li => li.textContent).join('\\n')";

#[tokio::test(flavor = "multi_thread")]
async fn follow_ups_queue_and_switch_to_steering_goals_and_the_agent_tree() {
    let harness = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("write_file", json!({"path": "a.txt", "content": "a\n"})),
            Turn::text("Wrote a.txt and looked at b."),
            // The goal: a sub-agent, then goal_complete.
            Turn::tool_call(
                "agent",
                json!({"prompt": "look around the project", "description": "explorer"}),
            ),
            Turn::text("Nothing odd here."),
            Turn::text("Explored.")
                .with_tool_call("goal_complete", json!({"summary": "explored the project"})),
        ],
    )
    .await;
    let browser = Browser::launch().await;
    let page = signed_in(&browser, &harness, "").await;
    page.type_into("#new-title", "controls").await;
    page.click("#create").await;
    page.wait_for("document.querySelector('#timeline')").await;

    // The run waits for approval; a message sent now queues as a follow-up.
    page.type_into("#prompt", "write a.txt").await;
    page.click("#send").await;
    page.wait_for("document.querySelector('dialog#permission[open]')")
        .await;
    page.click("#approval-later").await;
    page.wait_for("!document.querySelector('dialog#permission').open && !document.querySelector('#show-approval').hidden").await;
    page.type_into("#prompt", "also look at b").await;
    page.click("#send").await;
    page.wait_for("document.querySelector('#queue').textContent.includes('also look at b')")
        .await;
    page.screenshot(&shots().join("queue.png")).await;

    // The switch turns it into steering for the running turn.
    page.eval("[...document.querySelectorAll('#queue button')].find(b => b.textContent === 'Make steering').click()")
        .await;
    page.wait_for("document.querySelector('.item.steering') && document.querySelector('.item.steering').textContent.includes('also look at b')")
        .await;
    page.wait_for("!document.querySelector('#queue').textContent.includes('also look at b')")
        .await;
    // The request is still pending; reopening and answering it lets the run end.
    page.click("#show-approval").await;
    page.wait_for("document.querySelector('dialog#permission[open]')")
        .await;
    page.click("#allow-once").await;
    page.wait_for("[...document.querySelectorAll('.item.assistant')].some(e => e.textContent.includes('looked at b'))")
        .await;
    page.wait_for("document.querySelector('#session-status').textContent === 'idle'")
        .await;
    assert_eq!(crate::support::read(&harness.path("a.txt")), "a\n");
    let requests = harness.model.requests();
    assert!(
        requests[1].body.to_string().contains("also look at b"),
        "the steering message reached the model"
    );

    // A goal from its panel; its sub-agent shows in the agent tree.
    page.type_into("#goal-objective", "explore the project")
        .await;
    page.click("#goal form button").await;
    page.wait_for("document.querySelector('#goal-state') && document.querySelector('#goal-state').textContent === 'success'")
        .await;
    page.wait_for("document.querySelector('#agents [data-agent]') && document.querySelector('#agents').textContent.includes('explorer') && document.querySelector('#agents').textContent.includes('completed')")
        .await;
    // No text node is a stray `null` or `undefined` (an absent field rendered as text).
    let stray = page
        .eval("(() => { const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT); let n = 0; while (w.nextNode()) { if (/^\\s*(null|undefined)\\s*$/.test(w.currentNode.data)) n++; } return n; })()")
        .await;
    assert_eq!(stray, json!(0));
    page.screenshot(&shots().join("goal.png")).await;

    // A second tab on the same session shows the same conversation.
    let hash = page.eval("location.hash").await;
    let other = signed_in(&browser, &harness, hash.as_str().unwrap()).await;
    other
        .wait_for("document.querySelector('#goal-state') && document.querySelector('#goal-state').textContent === 'success'")
        .await;
    assert_eq!(
        page.eval(TIMELINE_TEXT).await,
        other.eval(TIMELINE_TEXT).await
    );

    // An oversized paste is refused in the page, with the limit named.
    let before = harness.model.requests().len();
    other
        .eval("document.querySelector('#prompt').value = 'x'.repeat(5 * 1024 * 1024)")
        .await;
    other.click("#send").await;
    other
        .wait_for("document.querySelector('#session-error').textContent.includes('at most')")
        .await;
    assert_eq!(harness.model.requests().len(), before);

    browser.close().await;
    harness.stop().await;
}

/// A TCP proxy in front of the backend whose open connections the test can cut (the
/// browser cannot be told to drop a WebSocket otherwise).
struct Proxy {
    addr: std::net::SocketAddr,
    connections: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(backend: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>> =
            Default::default();
        let held = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let backend = backend.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                held.lock().unwrap().push(task);
            }
        });
        Proxy { addr, connections }
    }

    /// Closes every open connection (new ones are still accepted).
    fn cut(&self) {
        for task in self.connections.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_connection_reconnects_and_resumes_without_duplicates() {
    let harness = Harness::start(
        "anthropic",
        vec![Turn::text("first answer"), Turn::text("second answer")],
    )
    .await;
    let backend = harness
        .url
        .trim_start_matches("ws://")
        .trim_end_matches("/v1/ws")
        .to_string();
    let proxy = Proxy::start(backend).await;
    let browser = Browser::launch().await;
    let (client, _notes) = harness.client().await;
    let ticket = client.calls().console_ticket(&Empty {}).await.unwrap();
    let page = browser.page().await;
    page.goto(&format!("http://{}{}", proxy.addr, ticket.login_path))
        .await;
    page.wait_for("document.querySelector('#new-session')")
        .await;
    page.click("#create").await;
    page.wait_for("document.querySelector('#timeline')").await;
    page.type_into("#prompt", "one").await;
    page.click("#send").await;
    page.wait_for("document.querySelector('#session-status').textContent === 'idle' && document.querySelector('.item.assistant')")
        .await;
    let before = page.eval(TIMELINE_TEXT).await;

    // The connection drops; while the page is away another client runs a turn, so the
    // page must pull what it missed when it resumes.
    let session_id = page.eval("location.hash.split('/').pop()").await;
    let session_id = session_id.as_str().unwrap().to_string();
    proxy.cut();
    page.wait_for("document.querySelector('#conn').textContent !== 'connected'")
        .await;
    let mut submit = crate::support::submit(&session_id, "two", json!({}));
    submit.headless = true;
    client.session_submit(&submit).await.unwrap();
    page.wait_for("document.querySelector('#conn').textContent === 'connected'")
        .await;
    page.wait_for("[...document.querySelectorAll('.item.assistant')].some(e => e.textContent.includes('second answer'))")
        .await;
    page.wait_for("document.querySelector('#session-status').textContent === 'idle'")
        .await;
    let after = page.eval(TIMELINE_TEXT).await;
    let after = after.as_str().unwrap();
    assert!(after.starts_with(before.as_str().unwrap()), "{after}");
    assert_eq!(after.matches("first answer").count(), 1, "{after}");
    assert_eq!(after.matches("second answer").count(), 1, "{after}");
    assert_eq!(after.matches("Run completed").count(), 2, "{after}");
    browser.close().await;
    harness.stop().await;
}
