//! How skills reach the model: `/name args` in a prompt invokes one, its instructions
//! are rendered into the model request (not into the visible conversation), and the
//! system prompt carries a short list of what is available.

use crate::{Skill, SkillCatalog};

/// Longest description shown per skill in the system-prompt summary.
const SUMMARY_DESCRIPTION_CHARS: usize = 200;

/// Splits `/name args` into the lowercased name and the trimmed arguments. Only syntax
/// is checked: the caller looks the name up ([`SkillCatalog::match_invocation`] does
/// both) and treats an unknown name as an ordinary prompt.
///
/// Not invocations: a prompt not starting with `/` (leading whitespace is allowed), a
/// bare `/`, and tokens with characters a skill name cannot have, so paths such as
/// `/usr/bin/env` or `//x` are left alone.
pub fn parse_invocation(prompt: &str) -> Option<(String, String)> {
    let rest = prompt.trim_start().strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (token, args) = rest.split_at(end);
    let valid = token.starts_with(|c: char| c.is_ascii_alphanumeric())
        && token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    valid.then(|| (token.to_ascii_lowercase(), args.trim().to_string()))
}

impl SkillCatalog {
    /// The skill a prompt invokes and its arguments; `None` when the prompt is not an
    /// invocation or names no known skill.
    pub fn match_invocation(&self, prompt: &str) -> Option<(&Skill, String)> {
        let (name, args) = parse_invocation(prompt)?;
        self.get(&name).map(|skill| (skill, args))
    }

    /// A short list of the available skills for the system prompt (`- name:
    /// description`, one line each), or an empty string when there are none.
    pub fn summary_for_system_prompt(&self) -> String {
        if self.skills.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "Skills available in this session (the user invokes one with /name followed by \
             arguments; its instructions are then included in the request):\n",
        );
        for skill in &self.skills {
            let description = one_line(&skill.description, SUMMARY_DESCRIPTION_CHARS);
            if description.is_empty() {
                out.push_str(&format!("- {}\n", skill.name));
            } else {
                out.push_str(&format!("- {}: {description}\n", skill.name));
            }
        }
        out
    }
}

impl Skill {
    /// The text that goes into the model request when the skill is invoked: who invoked
    /// what, where the skill lives (relative paths resolve against its folder), its
    /// instructions and the user's arguments.
    pub fn render_for_model(&self, args: &str) -> String {
        let args = args.trim();
        let args_text = if args.is_empty() { "(none)" } else { args };
        format!(
            "<skill name=\"{name}\" location=\"{location}\" path=\"{path}\">\n\
             The user invoked the skill /{name}. Follow the instructions below for this \
             request. Relative paths in them are relative to {dir}.\n\n\
             {body}\n\
             </skill>\n\
             <skill-arguments>\n{args_text}\n</skill-arguments>",
            name = self.name,
            location = self.location.label(),
            path = self.path.display(),
            dir = self.dir().display(),
            body = self.body,
        )
    }
}

/// Whitespace collapsed to single spaces, cut at `max` characters with an ellipsis.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_collapses_and_cuts() {
        assert_eq!(one_line(" a\n b  c ", 10), "a b c");
        assert_eq!(one_line("abcdef", 4), "abc…");
    }
}
