//! A member's private skills.

use super::*;

impl Checker<'_> {
    /// The member's `skills/` folder through the skills crate's own discovery, after making
    /// sure nothing in it is a symbolic link (which that discovery would follow).
    pub(super) fn skills(&mut self, rel: &Path, source: TeamSource) -> SkillCatalog {
        let dir = self.dir.join(rel);
        match files::entry(&dir) {
            Ok(Entry::Missing) => return SkillCatalog::default(),
            Ok(Entry::Dir) => {}
            Ok(Entry::File | Entry::Other) => {
                self.push(Issue::new(
                    rel,
                    IssueKind::NotRegular,
                    "is not a folder (symbolic links are not followed)".into(),
                ));
                return SkillCatalog::default();
            }
            Err(e) => {
                self.push(Issue::new(rel, IssueKind::Unreadable, format!("{e}")));
                return SkillCatalog::default();
            }
        }
        let mut linked = false;
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let entry_rel = rel.join(entry.file_name());
            let skill_file = entry_rel.join("SKILL.md");
            let kinds = (
                files::entry(&self.dir.join(&entry_rel)),
                files::entry(&self.dir.join(&skill_file)),
            );
            let bad = match kinds {
                (Ok(Entry::Other), _) => Some(entry_rel),
                (Ok(Entry::Dir), Ok(Entry::Other)) => Some(skill_file),
                _ => None,
            };
            if let Some(bad) = bad {
                linked = true;
                self.push(Issue::new(
                    bad,
                    IssueKind::NotRegular,
                    "is a symbolic link or special file; skills in a team are not followed \
                     through links"
                        .into(),
                ));
            }
        }
        if linked {
            return SkillCatalog::default();
        }
        let catalog = SkillCatalog::from_locations(&[(skill_location(source), dir)]);
        for error in &catalog.errors {
            let (file, reason) = self.split_skill_error(rel, error);
            self.push(Issue::new(file, IssueKind::InvalidSkill, reason));
        }
        for conflict in &catalog.conflicts {
            let others: Vec<String> = conflict
                .shadowed
                .iter()
                .map(|p| self.relative(p).display().to_string())
                .collect();
            self.push(Issue::new(
                self.relative(&conflict.winner),
                IssueKind::InvalidSkill,
                format!(
                    "skill name `{}` is also used by {}",
                    conflict.name,
                    others.join(", ")
                ),
            ));
        }
        catalog
    }

    pub(super) fn private_skills(
        &mut self,
        file: &str,
        rel: &Path,
        names: &[String],
        catalog: &SkillCatalog,
    ) -> Vec<Skill> {
        let mut skills: Vec<Skill> = Vec::new();
        for (i, raw) in names.iter().enumerate() {
            let field = format!("private_skills[{i}]");
            let Some(name) = normalize_name(raw) else {
                let message = format!("{raw:?} is not a valid skill name");
                self.issue(file, field, IssueKind::InvalidName, message);
                continue;
            };
            match catalog.get(&name) {
                None => {
                    let found: Vec<&str> = catalog.skills.iter().map(|s| s.name.as_str()).collect();
                    let found = if found.is_empty() {
                        "it has none".to_string()
                    } else {
                        format!("it has: {}", found.join(", "))
                    };
                    let message = format!(
                        "no skill `{name}` in {}/ ({found})",
                        rel.join("skills").display()
                    );
                    self.issue(file, field, IssueKind::UnknownSkill, message);
                }
                Some(_) if skills.iter().any(|s| s.name == name) => {
                    let message = format!("skill `{name}` is listed twice");
                    self.issue(file, field, IssueKind::Duplicate, message);
                }
                Some(skill) => skills.push(skill.clone()),
            }
        }
        skills
    }
}

/// Private skills are labelled with the layer their team came from.
fn skill_location(source: TeamSource) -> SkillLocation {
    match source {
        TeamSource::Project => SkillLocation::ProjectPrivate,
        TeamSource::User => SkillLocation::User,
        TeamSource::Builtin => SkillLocation::Builtin,
    }
}
