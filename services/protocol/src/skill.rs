//! `skill.list`: the skills a session can invoke as `/name` (docs/protocol.md, "Skills").

use serde::{Deserialize, Serialize};

/// Where a skill was found, highest priority first (a name found in two places is the
/// higher one's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkillSource {
    /// `{project}/skills/`.
    Project,
    /// `{project}/.Lumina/PROJECT_SKILLS/`.
    ProjectPrivate,
    /// `<AppRoot>/config/skills/`.
    User,
    /// `<AppRoot>/app/resources/skills/`.
    Builtin,
}

/// `skill.list` params: with a session, its project's skills are included; without one, those
/// of `project_root` (a client that has not opened a session yet knows its project).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SkillListParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The project directory, used only without `session_id` (a session's own project wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_root: Option<String>,
}

/// One skill that a prompt can invoke as `/name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillInfo {
    pub name: String,
    /// One line, from its front matter (or its first line of text).
    pub description: String,
    pub source: SkillSource,
    /// How many skills of the same name in lower-priority places this one hides.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shadows: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SkillListResult {
    /// Sorted by name.
    pub skills: Vec<SkillInfo>,
    /// Skills that were skipped, each naming its file and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_have_their_wire_names() {
        let names: Vec<String> = [
            SkillSource::Project,
            SkillSource::ProjectPrivate,
            SkillSource::User,
            SkillSource::Builtin,
        ]
        .iter()
        .map(|s| {
            serde_json::to_value(s)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
        assert_eq!(names, ["project", "project-private", "user", "builtin"]);
    }
}
