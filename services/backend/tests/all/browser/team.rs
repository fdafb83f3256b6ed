//! The team chat in a real browser: a session in a three-member team (`lead`, `builder`,
//! `qa`) runs a task against the scripted model; the session page's team chat shows the
//! leader's two hand-offs, the message `builder → qa`, both members' results with their
//! summaries, the `qa` gate (passed, its output collapsed) and the members' statuses — each
//! exactly once, also after a reload — and no raw tool payload. It passes axe at 1280×800
//! and at phone width, and takes `team.png`. The team's `transcript.show_thinking` is on, so
//! the builder's thinking is there too, dimmed and collapsed. Then the session leaves that
//! team for one whose `transcript.show_member_dialogue` and `show_thinking` are off: its
//! member's message and thinking are not shown (the thinking is not even journaled).

use lumina_protocol::methods::{TeamEnterParams, TeamExitParams};
use lumina_protocol::Event;
use lumina_testkit::Turn;
use serde_json::{json, Value};

use super::cdp::{Browser, Page};
use super::flows::signed_in;
use super::shots;
use crate::support::{bypass, submit, until_run_end, Harness};
use crate::team::{write, LEADER};

const BUILDER: &str = "You are `builder`, a member";
const QA: &str = "You are `qa`, a member";

/// The lines of the team chat of one kind, as text.
async fn lines(page: &Page<'_>, kind: &str) -> Vec<String> {
    let found = page
        .eval(&format!(
            "[...document.querySelectorAll('#team-chat > li[data-kind=\"{kind}\"]')].map(li => li.textContent)"
        ))
        .await;
    serde_json::from_value(found).unwrap()
}

async fn members(page: &Page<'_>) -> Value {
    page.eval("[...document.querySelectorAll('#team-members > li')].map(li => [li.dataset.member, li.querySelector('.badge').textContent])")
        .await
}

/// Everything the finished run put in the team chat, each exactly once.
async fn assert_chat(page: &Page<'_>) {
    page.wait_for(
        "document.querySelectorAll('#team-chat > li[data-kind=\"completed\"]').length === 1",
    )
    .await;
    let handoffs = lines(page, "handoff").await;
    assert_eq!(handoffs.len(), 2, "{handoffs:?}");
    assert!(
        handoffs[0].starts_with("lead") && handoffs[0].contains("builder: write the parser"),
        "{handoffs:?}"
    );
    assert!(
        handoffs[1].starts_with("lead") && handoffs[1].contains("qa: review the parser"),
        "{handoffs:?}"
    );
    let messages = lines(page, "message").await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(
        messages[0].starts_with("builder") && messages[0].contains("qa: parser ready for review"),
        "{messages:?}"
    );
    let results = lines(page, "result").await;
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].starts_with("builder")
            && results[0].contains("done")
            && results[0].contains("parser written"),
        "{results:?}"
    );
    assert!(
        results[1].starts_with("qa")
            && results[1].contains("done")
            && results[1].contains("parser reviewed: all good"),
        "{results:?}"
    );
    // show_thinking: the builder's thinking, once, collapsed to its first line.
    let thinking = lines(page, "thinking").await;
    assert_eq!(thinking.len(), 1, "{thinking:?}");
    assert!(
        thinking[0].starts_with("builder") && thinking[0].contains("thinking: Parsing plan:"),
        "{thinking:?}"
    );
    let collapsed = page
        .eval("(() => { const d = document.querySelector('#team-chat li[data-kind=\"thinking\"] details'); return [d.open, d.querySelector('pre').textContent]; })()")
        .await;
    assert_eq!(
        collapsed,
        json!([false, "Parsing plan:\nrecursive descent"])
    );
    let gates = lines(page, "gate").await;
    assert_eq!(gates.len(), 1, "{gates:?}");
    assert!(
        gates[0].contains("qa") && gates[0].contains("passed"),
        "{gates:?}"
    );
    // The gate's output is there, collapsed.
    let output = page
        .eval("(() => { const d = document.querySelector('#team-chat li[data-gate=\"qa\"] details'); return [d.open, d.querySelector('pre').textContent]; })()")
        .await;
    assert_eq!(output, json!([false, "3 tests passed\nno findings"]));
    assert_eq!(
        members(page).await,
        json!([["lead", "idle"], ["builder", "done"], ["qa", "done"]])
    );
    // No raw tool payload or tool name in the chat.
    let all = page.text("#team").await;
    for raw in [
        "team_dispatch",
        "team_message",
        "team_verdict",
        "{\"",
        "\"agent\"",
    ] {
        assert!(!all.contains(raw), "{raw} in the team chat: {all}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_team_chat_shows_hand_offs_messages_results_gates_and_members_once() {
    let harness = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call(
                "team_dispatch",
                json!({"agent": "builder", "task": "write the parser"}),
            )
            .matching(LEADER),
            Turn::tool_call(
                "team_message",
                json!({"to": "qa", "text": "parser ready for review"}),
            )
            .with_thinking("Parsing plan:\nrecursive descent")
            .matching(BUILDER),
            Turn::text("parser written").matching(BUILDER),
            Turn::tool_call(
                "team_dispatch",
                json!({"agent": "qa", "task": "review the parser"}),
            )
            .matching(LEADER),
            Turn::tool_call(
                "team_verdict",
                json!({"passed": true, "output": "3 tests passed\nno findings"}),
            )
            .matching(QA),
            Turn::text("parser reviewed: all good").matching(QA),
            Turn::tool_call("team_complete", json!({"summary": "the parser is done"}))
                .matching(LEADER),
            // The second team, which hides messages between members.
            Turn::tool_call(
                "team_dispatch",
                json!({"agent": "builder", "task": "tidy the lexer"}),
            )
            .matching(LEADER),
            Turn::tool_call(
                "team_message",
                json!({"to": "lead", "text": "a quiet note"}),
            )
            .with_thinking("a private musing")
            .matching(BUILDER),
            Turn::text("lexer tidied").matching(BUILDER),
            Turn::tool_call("team_complete", json!({"summary": "tidy"})).matching(LEADER),
        ],
    )
    .await;
    let root = harness.project.join(".Lumina/TEAM/crew");
    write(
        &root,
        "team.yaml",
        "name: crew\ndisplay_name: Parser crew\nentry_agent: lead\nagents: [lead, builder, qa]\n\
         transcript:\n  show_thinking: true\n",
    );
    for (member, extra) in [
        ("lead", ""),
        ("builder", "communicates_with: [lead, qa]\n"),
        ("qa", ""),
    ] {
        write(
            &root,
            &format!("agents/{member}/agent.yaml"),
            &format!("name: {member}\n{extra}"),
        );
        write(
            &root,
            &format!("agents/{member}/system.md"),
            "Do your part.\n",
        );
    }
    let quiet = harness.project.join(".Lumina/TEAM/quiet");
    write(
        &quiet,
        "team.yaml",
        "name: quiet\nentry_agent: lead\nagents: [lead, builder]\ntranscript:\n  show_member_dialogue: false\n",
    );
    for member in ["lead", "builder"] {
        write(
            &quiet,
            &format!("agents/{member}/agent.yaml"),
            &format!("name: {member}\n"),
        );
        write(
            &quiet,
            &format!("agents/{member}/system.md"),
            "Do your part.\n",
        );
    }

    let (client, mut notes) = harness.client().await;
    let session = harness.session(&client).await;
    client
        .calls()
        .team_enter(&TeamEnterParams {
            session_id: session.id.clone(),
            team: "crew".into(),
        })
        .await
        .unwrap();

    let browser = Browser::launch().await;
    let page = signed_in(&browser, &harness, &format!("#/session/{}", session.id)).await;
    page.wait_for("!document.querySelector('#team').hidden && document.querySelectorAll('#team-members > li').length === 3")
        .await;
    assert_eq!(
        members(&page).await,
        json!([["lead", "idle"], ["builder", "idle"], ["qa", "idle"]])
    );
    assert!(page.text("#team-name").await.contains("Parser crew"));

    let run = client
        .session_submit(&submit(&session.id, "Build the parser", bypass()))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    assert_chat(&page).await;
    page.screenshot(&shots().join("team.png")).await;
    super::a11y::assert_team_chat_accessible(&page).await;

    // A reload replays the journal: the same chat, nothing twice.
    page.eval("window.beforeReload = true").await;
    page.reload().await;
    page.wait_for("!window.beforeReload && document.querySelector('#team-chat')")
        .await;
    assert_chat(&page).await;
    assert!(
        page.eval("document.querySelector('#team-dialogue-note').hidden")
            .await
            == json!(true)
    );

    // A team that hides member dialogue: the message is journaled but not shown.
    let calls = client.calls();
    calls
        .team_exit(&TeamExitParams {
            session_id: session.id.clone(),
        })
        .await
        .unwrap();
    calls
        .team_enter(&TeamEnterParams {
            session_id: session.id.clone(),
            team: "quiet".into(),
        })
        .await
        .unwrap();
    let run = client
        .session_submit(&submit(&session.id, "Tidy the lexer", bypass()))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    page.wait_for(
        "document.querySelectorAll('#team-chat > li[data-kind=\"completed\"]').length === 2",
    )
    .await;
    assert!(lines(&page, "result").await[2].contains("lexer tidied"));
    assert_eq!(lines(&page, "message").await.len(), 1);
    assert!(!page.text("#team").await.contains("a quiet note"));
    assert_eq!(lines(&page, "thinking").await.len(), 1);
    assert!(!page.text("#team").await.contains("a private musing"));
    assert!(
        page.eval("document.querySelector('#team-dialogue-note').hidden")
            .await
            == json!(false)
    );
    assert_eq!(
        members(&page).await,
        json!([["lead", "idle"], ["builder", "done"]])
    );
    let sent = client
        .session_events(&session.id, 0, Some(1000))
        .await
        .unwrap()
        .events;
    assert!(sent
        .iter()
        .any(|f| matches!(&f.event, Event::TeamMessageSent(m) if m.text == "a quiet note")));
    assert!(!sent
        .iter()
        .any(|f| matches!(&f.event, Event::TeamMemberThinking(t) if t.text == "a private musing")));

    browser.close().await;
    harness.stop().await;
}

/// Presses `key` (`" "`, `"Enter"`) on the focused element, as the keyboard does.
pub(super) async fn press(page: &Page<'_>, key: &str) {
    let (code, text, vk) = match key {
        " " => ("Space", " ", 32),
        "Enter" => ("Enter", "\r", 13),
        other => panic!("no key {other}"),
    };
    for kind in ["keyDown", "keyUp"] {
        let mut params =
            json!({"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": vk});
        if kind == "keyDown" {
            params["text"] = json!(text);
        }
        page.send("Input.dispatchKeyEvent", params).await;
    }
}

/// The team events of the session's main stream, as (kind, team or team_run_id).
async fn team_events(client: &lumina_client::Client, session: &str) -> Vec<String> {
    client
        .session_events(session, 0, Some(1000))
        .await
        .unwrap()
        .events
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamEntered(e) => Some(format!("entered {}", e.team)),
            Event::TeamExited(_) => Some("exited".to_owned()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_enters_and_leaves_a_team_from_the_console() {
    let harness = Harness::start("anthropic", vec![]).await;
    // A broken project team: listed with its error, not selectable.
    write(
        &harness.project.join(".Lumina/TEAM/broken"),
        "team.yaml",
        "name: broken\nentry_agent: lead\nagents: [lead]\nloop:\n  max_parallel_agents: 0\n",
    );
    let (client, _notes) = harness.client().await;
    let session = harness.session(&client).await;

    let browser = Browser::launch().await;
    let page = signed_in(&browser, &harness, &format!("#/session/{}", session.id)).await;
    page.wait_for("document.querySelector('#team-option-product-development')")
        .await;
    assert!(page.eval("document.querySelector('#team').hidden").await == json!(true));
    let listed = page
        .eval("[...document.querySelectorAll('#team-picker li.team-option')].map(li => [li.dataset.team, li.querySelector('input').disabled])")
        .await;
    assert_eq!(
        listed,
        json!([
            ["broken", true],
            ["deep-research", false],
            ["product-development", false]
        ])
    );
    let broken = page.text("#team-picker li[data-team=\"broken\"]").await;
    assert!(broken.contains("Broken:"), "{broken}");
    assert!(broken.contains("max_parallel_agents"), "{broken}");
    // The broken team's radio is described by its error.
    assert_eq!(
        page.eval("document.querySelector('#team-option-broken').getAttribute('aria-describedby')")
            .await,
        json!("team-option-broken-error")
    );
    page.eval("document.querySelectorAll('#team-picker details').forEach(d => d.open = true)")
        .await;
    super::a11y::assert_accessible(&page, "team picker").await;
    page.viewport(390, 844, true).await;
    super::a11y::assert_accessible(&page, "team picker at phone width").await;
    page.viewport(1280, 800, false).await;
    page.screenshot(&shots().join("team-picker.png")).await;

    // With the keyboard: Space chooses the team, Enter on the button enters it.
    page.eval("document.querySelector('#team-option-product-development').focus()")
        .await;
    press(&page, " ").await;
    assert_eq!(
        page.eval("document.querySelector('#team-option-product-development').checked")
            .await,
        json!(true)
    );
    page.eval("document.querySelector('#team-enter').focus()")
        .await;
    press(&page, "Enter").await;
    page.wait_for(
        "!document.querySelector('#team').hidden && document.querySelector('#team-leave')",
    )
    .await;
    assert!(page
        .text("#team-current")
        .await
        .contains("product-development"));
    assert!(page
        .text("#team-name")
        .await
        .contains("product-development"));
    page.wait_for("document.querySelectorAll('#team-members > li').length === 8")
        .await;
    assert_eq!(
        team_events(&client, &session.id).await,
        vec!["entered product-development"]
    );
    super::a11y::assert_team_chat_accessible(&page).await;
    page.screenshot(&shots().join("team-entered.png")).await;

    // Leave: focus moved to *Leave team* on entering, so Enter leaves. The chat says so, the
    // list comes back, and focus is on *Enter team*.
    page.wait_for("document.activeElement && document.activeElement.id === 'team-leave'")
        .await;
    press(&page, "Enter").await;
    page.wait_for("document.querySelector('#team-option-product-development') && document.querySelector('#team-name .badge.left')")
        .await;
    page.wait_for("document.activeElement && document.activeElement.id === 'team-enter'")
        .await;
    let chat = lines(&page, "team").await;
    assert_eq!(
        chat.last().map(String::as_str),
        Some("Left the team."),
        "{chat:?}"
    );
    assert_eq!(
        team_events(&client, &session.id).await,
        vec!["entered product-development", "exited"]
    );
    super::a11y::assert_accessible(&page, "team picker after leaving").await;

    // A reload agrees: not in a team, the picker offers the teams.
    page.eval("window.beforeReload = true").await;
    page.reload().await;
    page.wait_for(
        "!window.beforeReload && document.querySelector('#team-option-product-development')",
    )
    .await;
    assert!(page
        .eval("document.querySelector('#team-leave')")
        .await
        .is_null());

    browser.close().await;
    harness.stop().await;
}
