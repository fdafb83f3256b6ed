//! `/skills`: the skills a prompt can invoke (`skill.list`), as a notice.

use lumina_client::protocol::methods::{SkillListParams, SkillListResult, SkillSource};

use super::{Conn, Lost};
use crate::ui::app::ConnEvent;

impl Conn {
    pub(super) async fn skill_list(&mut self) -> Result<(), Lost> {
        // The project's skills come with the session's project, or before a session is
        // open with the project this UI was started in.
        let params = SkillListParams {
            session_id: self.session.as_ref().map(|s| s.id.clone()),
            project_root: Some(self.project_root.clone()),
        };
        match self.client.calls().skill_list(&params).await {
            Ok(list) => {
                let notice = skills_notice(&list);
                self.send(ConnEvent::Notice(notice));
                Ok(())
            }
            Err(error) => Self::classify(error)
                .map(|error| self.failed(None, format!("/skills failed: {error}"))),
        }
    }
}

fn source_name(source: SkillSource) -> &'static str {
    match source {
        SkillSource::Project => "project",
        SkillSource::ProjectPrivate => "project, private",
        SkillSource::User => "user",
        SkillSource::Builtin => "built-in",
    }
}

/// One line per skill (name, description, where it is defined and what it hides), then the
/// skipped skill files with their reasons.
fn skills_notice(list: &SkillListResult) -> String {
    let mut text = if list.skills.is_empty() {
        String::from("no skills (put one in skills/NAME/SKILL.md of the project)")
    } else {
        String::from("skills (/NAME ARGS runs one):")
    };
    for skill in &list.skills {
        text.push_str(&format!("\n  /{}", skill.name));
        if !skill.description.is_empty() {
            text.push_str(&format!(" — {}", skill.description));
        }
        text.push_str(&format!(" ({}", source_name(skill.source)));
        if skill.shadows > 0 {
            text.push_str(&format!("; hides {} of the same name", skill.shadows));
        }
        text.push(')');
    }
    for error in &list.errors {
        text.push_str(&format!("\n  skipped: {error}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use lumina_client::protocol::methods::SkillInfo;
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn the_notice_lists_each_skill_with_its_source_and_the_skipped_files() {
        let list = SkillListResult {
            skills: vec![
                SkillInfo {
                    name: "deploy".into(),
                    description: "Ship the service".into(),
                    source: SkillSource::Project,
                    shadows: 1,
                },
                SkillInfo {
                    name: "review".into(),
                    description: String::new(),
                    source: SkillSource::Builtin,
                    shadows: 0,
                },
            ],
            errors: vec!["skills/bad/SKILL.md: no front matter".into()],
        };
        assert_eq!(
            skills_notice(&list),
            "skills (/NAME ARGS runs one):\n  /deploy — Ship the service (project; hides 1 of the \
             same name)\n  /review (built-in)\n  skipped: skills/bad/SKILL.md: no front matter"
        );
        assert_eq!(
            skills_notice(&SkillListResult::default()),
            "no skills (put one in skills/NAME/SKILL.md of the project)"
        );
    }
}
