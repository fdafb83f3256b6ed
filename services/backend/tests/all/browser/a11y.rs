//! axe-core (npm, run inside the browser) reports no serious or critical violation on any
//! console page: sign-in, sessions, a session with answers, tool calls and changed files
//! (and the goal form with its budget fields), the approval dialog, the same at phone width,
//! the skills page. It then archives the session from the list. The team chat is checked the
//! same way (`assert_team_chat_accessible`) by `browser::team`, on the page its team run
//! filled.

use lumina_protocol::methods::Empty;
use lumina_testkit::Turn;
use serde_json::json;

use super::cdp::{Browser, Page};
use crate::support::Harness;

pub(super) async fn assert_accessible(page: &Page<'_>, what: &str) {
    let violations = page.axe_violations().await;
    assert!(
        violations.is_empty(),
        "{what}: serious or critical accessibility violations:\n{}",
        violations.join("\n")
    );
}

/// The team chat (filled by a team run, `browser::team`) with every gate output open, at
/// 1280×800 and at phone width.
pub(super) async fn assert_team_chat_accessible(page: &Page<'_>) {
    page.eval("document.querySelectorAll('#team details').forEach(d => d.open = true)")
        .await;
    assert_accessible(page, "team chat").await;
    page.viewport(390, 844, true).await;
    assert_accessible(page, "team chat at phone width").await;
    page.viewport(1280, 800, false).await;
    page.eval("document.querySelectorAll('#team details').forEach(d => d.open = false)")
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_console_page_passes_axe_without_serious_violations() {
    let harness = Harness::start(
        "anthropic",
        vec![
            Turn::text("Some **Markdown** with `code` and a [link](https://example.com)."),
            Turn::tool_call("write_file", json!({"path": "x.txt", "content": "x\n"})),
            Turn::text("done"),
        ],
    )
    .await;
    let skill = harness.tmp.path().join("app/config/skills/tidy");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\ndescription: Tidy the imports\n---\nTidy.\n",
    )
    .unwrap();
    let base = harness
        .url
        .replace("ws://", "http://")
        .trim_end_matches("/v1/ws")
        .to_string();
    let browser = Browser::launch().await;

    let page = browser.page().await;
    page.goto(&format!("{base}/")).await;
    page.wait_for("document.querySelector('#signin')").await;
    assert_accessible(&page, "sign-in").await;
    // The check can fail: an unnamed button is a critical violation.
    page.eval(
        "document.body.append(Object.assign(document.createElement('button'), { id: 'unnamed' }))",
    )
    .await;
    let found = page.axe_violations().await;
    assert!(
        found.iter().any(|v| v.starts_with("button-name")),
        "{found:?}"
    );
    page.eval("document.getElementById('unnamed').remove()")
        .await;

    let (client, _notes) = harness.client().await;
    let ticket = client.calls().console_ticket(&Empty {}).await.unwrap();
    page.goto(&format!("{base}{}", ticket.login_path)).await;
    page.wait_for("document.querySelector('#new-session')")
        .await;
    page.type_into("#new-title", "fix the parser").await;
    page.click("#create").await;
    page.wait_for("document.querySelector('#timeline')").await;
    page.wait_for("location.hash.startsWith('#/session/')")
        .await;
    let session_hash = page.eval("location.hash").await;
    page.type_into("#prompt", "hello").await;
    page.click("#send").await;
    page.wait_for("document.querySelector('.item.assistant strong')")
        .await;
    page.type_into("#prompt", "write").await;
    page.click("#send").await;
    page.wait_for("document.querySelector('dialog#permission[open]')")
        .await;
    assert_accessible(&page, "approval dialog").await;
    page.click("#allow-once").await;
    page.wait_for("!document.querySelector('#changes').hidden && document.querySelector('#session-status').textContent === 'idle'")
        .await;
    page.eval("document.querySelectorAll('details').forEach(d => d.open = true)")
        .await;
    assert_accessible(&page, "session").await;
    page.viewport(390, 844, true).await;
    assert_accessible(&page, "session at phone width").await;
    page.viewport(1280, 800, false).await;

    page.eval("location.hash = '#/'").await;
    page.wait_for("document.querySelector('#sessions table')")
        .await;
    assert_accessible(&page, "sessions").await;
    page.screenshot(&super::shots().join("sessions.png")).await;
    assert!(session_hash.as_str().is_some());

    page.click("#nav-skills").await;
    page.wait_for("document.querySelector('#skills tr[data-skill=\"tidy\"]')")
        .await;
    assert_accessible(&page, "skills").await;
    page.eval("location.hash = '#/'").await;
    page.wait_for("document.querySelector('#sessions table')")
        .await;

    // Archive: the session leaves the list and comes back with "show archived".
    page.eval("[...document.querySelectorAll('#sessions button')].find(b => b.textContent === 'Archive').click()")
        .await;
    page.wait_for("document.querySelector('#sessions').textContent.includes('No sessions yet')")
        .await;
    page.click("#show-archived").await;
    page.wait_for("document.querySelector('#sessions .badge.archived')")
        .await;

    browser.close().await;
    harness.stop().await;
}
