//! Project instructions and skills reach the model request, not the visible conversation.

use lumina_protocol::Event;
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;

use crate::support::*;

#[tokio::test]
async fn instructions_and_skills_are_compiled_into_the_request() {
    let h = Harness::start(
        "anthropic",
        vec![Turn::text("reviewed"), Turn::text("plain")],
    )
    .await;
    std::fs::write(h.path("LUMINA.md"), "Always answer in haiku.\n").unwrap();
    let skill_dir = h.path("skills/review");
    std::fs::create_dir_all(&skill_dir).unwrap();
    std::fs::write(
        skill_dir.join("SKILL.md"),
        "---\nname: review\ndescription: Review a file for bugs\n---\nCheck SKILL-SECRET-STEPS carefully.\n",
    )
    .unwrap();
    // The same skill name in a lower-priority location: reported, the project one wins.
    let shadow = h.path(".Lumina/PROJECT_SKILLS/review");
    std::fs::create_dir_all(&shadow).unwrap();
    std::fs::write(
        shadow.join("SKILL.md"),
        "---\nname: review\ndescription: other\n---\nSHADOWED\n",
    )
    .unwrap();
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, "/review main.rs", bypass()))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    let user = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::MessageUser { text, skill, .. } => Some((text.clone(), skill.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        user,
        ("/review main.rs".to_string(), Some("review".to_string()))
    );
    let conflict = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::Warning { code, message, .. } if code == "skill_conflict" => {
                Some(message.clone())
            }
            _ => None,
        })
        .expect("a skill_conflict warning");
    assert!(
        conflict.contains("`review`") && conflict.contains("PROJECT_SKILLS"),
        "{conflict}"
    );
    let body = h.model.requests()[0].body.to_string();
    assert!(!body.contains("SHADOWED"));
    assert!(body.contains("Always answer in haiku."), "{body}");
    assert!(body.contains("SKILL-SECRET-STEPS"), "{body}");
    assert!(body.contains("main.rs"));
    assert!(body.contains("Review a file for bugs"));
    // The visible conversation never holds the skill text.
    let journal = client.session_events(&session.id, 0, None).await.unwrap();
    assert!(!serde_json::to_string(&journal)
        .unwrap()
        .contains("SKILL-SECRET-STEPS"));

    // Settings are re-read before every turn: a new instructions file shows up next run.
    std::fs::write(h.path("AGENTS.md"), "Prefer small diffs.\n").unwrap();
    let run = client
        .session_submit(&submit(&session.id, "hello", bypass()))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    let body = h.model.requests()[1].body.to_string();
    assert!(body.contains("Prefer small diffs."));
    h.stop().await;
}
