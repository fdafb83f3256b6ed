//! The skills page (`skill.list` over the console's WebSocket: the user's and built-in skills,
//! with a session its project's too, a shadowed name and a skipped file) and a goal started
//! with budgets: refused in the page and by the backend when a budget is not a whole number
//! of at least 1, and shown with the goal's state and usage once it runs.

use std::path::Path;

use lumina_protocol::methods::{GoalStartParams, SkillListParams};
use lumina_protocol::{ErrorCode, GoalBudgets};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::cdp::Page;
use super::flows::signed_in;
use super::shots;
use crate::support::Harness;

fn skill(dir: &Path, folder: &str, text: &str) {
    std::fs::create_dir_all(dir.join(folder)).unwrap();
    std::fs::write(dir.join(folder).join("SKILL.md"), text).unwrap();
}

/// The skills table: name, description and source of each row.
async fn rows(page: &Page<'_>) -> Value {
    page.eval("[...document.querySelectorAll('#skills tr[data-skill]')].map(tr => [...tr.cells].map(c => c.textContent))")
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_skills_page_lists_skills_and_a_goal_runs_within_its_budgets() {
    let harness = Harness::start("anthropic", vec![Turn::text("Still working on it.")]).await;
    let app = harness.tmp.path().join("app");
    skill(
        &harness.project.join("skills"),
        "review",
        "---\nname: review\ndescription: Review the diff of this project\n---\nReview it.\n",
    );
    let user = app.join("config/skills");
    skill(
        &user,
        "review",
        "---\ndescription: Review anything\n---\nReview.\n",
    );
    skill(
        &user,
        "deploy",
        "---\ndescription: Deploy the service\n---\nDeploy.\n",
    );
    skill(&user, "broken", "---\nname broken\n---\nBroken.\n");
    skill(
        &app.join("app/resources/skills"),
        "explain",
        "# Explain\nExplain the code you are shown.\n",
    );

    let (client, _notes) = harness.client().await;
    let session = harness.session(&client).await;
    let browser = super::cdp::Browser::launch().await;
    let page = signed_in(&browser, &harness, "").await;
    page.click("#nav-skills").await;
    page.wait_for("document.querySelector('#skills table')")
        .await;
    assert_eq!(
        rows(&page).await,
        json!([
            ["/deploy", "Deploy the service", "your config/skills/"],
            ["/explain", "Explain the code you are shown.", "built-in"],
            ["/review", "Review anything", "your config/skills/"],
        ])
    );
    page.wait_for("document.querySelector('#skills-problems').textContent.includes('broken')")
        .await;

    // With a session, its project's skills come first and hide the user's of that name.
    page.wait_for(&format!(
        "document.querySelector('#skills-session option[value=\"{}\"]')",
        session.id
    ))
    .await;
    page.eval(&format!(
        "(() => {{ const s = document.querySelector('#skills-session'); s.value = {}; s.dispatchEvent(new Event('change')); }})()",
        json!(session.id)
    ))
    .await;
    page.wait_for("document.querySelector('#skills tr[data-skill=\"review\"]') && document.querySelector('#skills tr[data-skill=\"review\"]').textContent.includes('project')")
        .await;
    assert_eq!(
        rows(&page).await,
        json!([
            ["/deploy", "Deploy the service", "your config/skills/"],
            ["/explain", "Explain the code you are shown.", "built-in"],
            [
                "/review",
                "Review the diff of this project",
                "project skills/hides 1 of the same name"
            ],
        ])
    );
    assert_eq!(
        page.eval("location.hash").await,
        json!(format!("#/skills/{}", session.id))
    );
    page.screenshot(&shots().join("skills.png")).await;
    // The same over the protocol; an unknown session is `not_found`.
    let listed = client
        .calls()
        .skill_list(&SkillListParams {
            session_id: Some(session.id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let names: Vec<&str> = listed.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["deploy", "explain", "review"]);
    assert_eq!(listed.errors.len(), 1, "{:?}", listed.errors);
    let unknown = client
        .calls()
        .skill_list(&SkillListParams {
            session_id: Some("no-such-session".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        unknown.server_error().map(|e| e.code),
        Some(ErrorCode::NotFound),
        "{unknown:?}"
    );

    // The backend refuses a budget of 0 whoever sends it.
    let refused = client
        .calls()
        .goal_start(&GoalStartParams {
            session_id: session.id.clone(),
            idempotency_key: "zero".into(),
            objective: "anything".into(),
            acceptance_criteria: vec![],
            budgets: GoalBudgets {
                max_turns: Some(0),
                ..GoalBudgets::default()
            },
            no_progress_turns: None,
            settings: Value::Null,
            headless: false,
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused.server_error().map(|e| e.code),
        Some(ErrorCode::InvalidParams),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("budgets.max_turns"),
        "{refused}"
    );

    // The page refuses what is not a whole number of at least 1, naming the field.
    page.eval(&format!(
        "location.hash = {}",
        json!(format!("#/session/{}", session.id))
    ))
    .await;
    page.wait_for("document.querySelector('#goal-form')").await;
    assert_eq!(
        page.eval("document.querySelector('#session-skills').getAttribute('href')")
            .await,
        json!(format!("#/skills/{}", session.id))
    );
    page.type_into("#goal-objective", "make the tests pass")
        .await;
    for bad in ["0", "1.5", "-2"] {
        page.eval(&format!(
            "document.querySelector('#goal-max_turns').value = {}",
            json!(bad)
        ))
        .await;
        page.click("#goal-start").await;
        page.wait_for("document.querySelector('#goal-error').textContent.startsWith('Max turns: enter a whole number')")
            .await;
        assert_eq!(
            page.eval("document.querySelector('#goal-max_turns').getAttribute('aria-invalid')")
                .await,
            json!("true"),
            "{bad}"
        );
        page.eval("document.querySelector('#goal-error').textContent = ''")
            .await;
    }
    assert_eq!(harness.model.requests().len(), 0, "nothing was started");

    // Valid budgets start the goal; it stops when the turn budget is spent.
    page.eval("document.querySelector('#goal-max_turns').value = ''")
        .await;
    page.type_into("#goal-max_turns", "1").await;
    page.type_into("#goal-max_tokens", "100000").await;
    page.type_into("#goal-max_wall_ms", "10").await;
    page.click("#goal-start").await;
    page.wait_for("document.querySelector('#goal-state') && document.querySelector('#goal-state').textContent === 'budget-exhausted'")
        .await;
    assert_eq!(page.text("#goal-reason").await, "max_turns");
    page.screenshot(&shots().join("goal-budgets.png")).await;
    let budgets = page
        .eval("[...document.querySelectorAll('#goal-budgets tr')].map(tr => tr.dataset.budget + ': ' + tr.cells[1].textContent)")
        .await;
    let budgets: Vec<String> = serde_json::from_value(budgets).unwrap();
    assert_eq!(budgets[0], "max_turns: 1 / 1");
    assert_eq!(budgets[1], "max_tool_calls: 0");
    assert!(
        budgets[2].starts_with("max_tokens: ") && budgets[2].ends_with(" / 100000"),
        "{budgets:?}"
    );
    assert!(
        budgets[3].starts_with("max_wall_ms: ") && budgets[3].ends_with(" s / 10 min"),
        "{budgets:?}"
    );
    // What the backend recorded is what the page sent (minutes become milliseconds).
    let request = harness.model.requests();
    assert_eq!(request.len(), 1);
    let started = client
        .session_events(&session.id, 0, Some(1000))
        .await
        .unwrap();
    let budgets = started
        .events
        .iter()
        .find_map(|f| match &f.event {
            lumina_protocol::Event::GoalStarted { budgets, .. } => Some(*budgets),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        budgets,
        GoalBudgets {
            max_turns: Some(1),
            max_tool_calls: None,
            max_tokens: Some(100_000),
            max_wall_ms: Some(600_000),
        }
    );

    browser.close().await;
    harness.stop().await;
}
