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

#[tokio::test]
async fn skill_list_shows_the_skills_a_session_can_invoke() {
    use lumina_protocol::methods::{SkillInfo, SkillListParams, SkillListResult};
    use lumina_protocol::{ErrorCode, SkillSource};

    let h = Harness::start("anthropic", vec![]).await;
    let write = |dir: std::path::PathBuf, text: &str| {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), text).unwrap();
    };
    let app = h.tmp.path().join("app");
    write(
        h.path("skills/review"),
        "---\ndescription: Project review\n---\nx\n",
    );
    write(
        h.path(".Lumina/PROJECT_SKILLS/notes"),
        "---\ndescription: Private notes\n---\nx\n",
    );
    write(
        app.join("config/skills/review"),
        "---\ndescription: User review\n---\nx\n",
    );
    write(app.join("app/resources/skills/hello"), "Say hello.\n");
    write(app.join("config/skills/bad"), "---\nunterminated\n");
    let (client, _notes) = h.client().await;
    let session = h.session(&client).await;
    let skill = |name: &str, description: &str, source, shadows| SkillInfo {
        name: name.into(),
        description: description.into(),
        source,
        shadows,
    };

    let global = client
        .calls()
        .skill_list(&SkillListParams::default())
        .await
        .unwrap();
    assert_eq!(
        global.skills,
        vec![
            skill("hello", "Say hello.", SkillSource::Builtin, 0),
            skill("review", "User review", SkillSource::User, 0),
        ]
    );
    assert_eq!(global.errors.len(), 1, "{:?}", global.errors);
    assert!(global.errors[0].contains("bad"), "{:?}", global.errors);

    let project = client
        .calls()
        .skill_list(&SkillListParams {
            session_id: Some(session.id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        project,
        SkillListResult {
            skills: vec![
                skill("hello", "Say hello.", SkillSource::Builtin, 0),
                skill("notes", "Private notes", SkillSource::ProjectPrivate, 0),
                skill("review", "Project review", SkillSource::Project, 1),
            ],
            errors: global.errors.clone(),
        }
    );

    // Before a session is open, the project is named by its root: the same listing.
    let by_root = client
        .calls()
        .skill_list(&SkillListParams {
            project_root: Some(h.path("").display().to_string()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_root, project);
    let not_a_dir = client
        .calls()
        .skill_list(&SkillListParams {
            project_root: Some(h.path("no-such-dir").display().to_string()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        not_a_dir.server_error().map(|e| e.code),
        Some(ErrorCode::InvalidParams)
    );

    let missing = client
        .calls()
        .skill_list(&SkillListParams {
            session_id: Some("nope".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        missing.server_error().map(|e| e.code),
        Some(ErrorCode::NotFound)
    );
    h.stop().await;
}
