//! `/name args` parsing, rendering for the model and the system-prompt summary.

use lumina_skills::{parse_invocation, SkillCatalog};
use pretty_assertions::assert_eq;

use crate::write;

fn inv(prompt: &str) -> Option<(String, String)> {
    parse_invocation(prompt)
}

fn some(name: &str, args: &str) -> Option<(String, String)> {
    Some((name.into(), args.into()))
}

#[test]
fn invocation_syntax() {
    assert_eq!(inv("/review"), some("review", ""));
    assert_eq!(
        inv("/review check the auth flow"),
        some("review", "check the auth flow")
    );
    assert_eq!(inv("  /Review   a\n  b  "), some("review", "a\n  b"));
    assert_eq!(inv("/review\nmulti\nline"), some("review", "multi\nline"));
    assert_eq!(
        inv("/review 检查认证流程有没有安全问题"),
        some("review", "检查认证流程有没有安全问题")
    );
    assert_eq!(inv("/my_skill-2 x"), some("my_skill-2", "x"));
    assert_eq!(
        inv("/tmp is full"),
        some("tmp", "is full"),
        "syntax only; the catalog decides"
    );

    for not in [
        "",
        "/",
        "/ review",
        "  / ",
        "review",
        "please /review",
        "/usr/bin/env python",
        "//comment",
        "/review/",
        "/-x",
        "/review: do it",
        "/revi.ew",
        "/révision",
    ] {
        assert_eq!(inv(not), None, "{not:?}");
    }
}

fn catalog_with_review() -> (tempfile::TempDir, SkillCatalog) {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("p");
    write(
        &project.join("skills/review/SKILL.md"),
        "---\nname: review\ndescription: |\n  Review code\n  for security.\n---\nRead the diff.\nReport issues.\n",
    );
    write(
        &project.join("skills/zeta/SKILL.md"),
        "---\nname: zeta\n---\n# Zeta\n",
    );
    let catalog = SkillCatalog::discover(&project, &tmp.path().join("u"), &tmp.path().join("b"));
    (tmp, catalog)
}

#[test]
fn render_for_model_carries_name_location_body_and_args() {
    let (tmp, catalog) = catalog_with_review();
    let (skill, args) = catalog
        .match_invocation("/review the login handler")
        .unwrap();
    let dir = tmp.path().join("p/skills/review");
    assert_eq!(
        skill.render_for_model(&args),
        format!(
            "<skill name=\"review\" location=\"project skills/\" path=\"{}\">\n\
             The user invoked the skill /review. Follow the instructions below for this request. \
             Relative paths in them are relative to {}.\n\n\
             Read the diff.\nReport issues.\n\
             </skill>\n\
             <skill-arguments>\nthe login handler\n</skill-arguments>",
            dir.join("SKILL.md").display(),
            dir.display()
        )
    );
    assert!(skill
        .render_for_model("  ")
        .ends_with("<skill-arguments>\n(none)\n</skill-arguments>"));
    assert!(catalog.match_invocation("/unknown x").is_none());
    assert!(catalog.match_invocation("review x").is_none());
}

#[test]
fn summary_lists_name_and_one_line_description() {
    let (_tmp, catalog) = catalog_with_review();
    assert_eq!(
        catalog.summary_for_system_prompt(),
        "Skills available in this session (the user invokes one with /name followed by \
         arguments; its instructions are then included in the request):\n\
         - review: Review code for security.\n\
         - zeta\n"
    );
    assert_eq!(SkillCatalog::default().summary_for_system_prompt(), "");
}
