//! Instruction file order, absence, caps and odd files.

use lumina_skills::{load_instructions, InstructionFile, InstructionSource, MAX_INSTRUCTION_BYTES};
use pretty_assertions::assert_eq;

use crate::write;

#[test]
fn project_files_then_user_files_all_optional() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("p");
    let user = tmp.path().join("u");
    assert_eq!(load_instructions(&project, &user), vec![]);

    write(&project.join("AGENTS.md"), "project agents");
    write(&project.join("LUMINA.md"), "project lumina");
    write(&user.join("LUMINA.md"), "user lumina");
    write(&user.join("AGENTS.md"), "user agents");
    write(&user.join("CLAUDE.md"), "not read");
    let file = |dir: &std::path::Path, name: &str, source, text: &str| InstructionFile {
        path: dir.join(name),
        source,
        text: text.into(),
        truncated: false,
    };
    assert_eq!(
        load_instructions(&project, &user),
        vec![
            file(
                &project,
                "LUMINA.md",
                InstructionSource::Project,
                "project lumina"
            ),
            file(
                &project,
                "AGENTS.md",
                InstructionSource::Project,
                "project agents"
            ),
            file(&user, "LUMINA.md", InstructionSource::User, "user lumina"),
            file(&user, "AGENTS.md", InstructionSource::User, "user agents"),
        ]
    );
}

#[test]
fn large_files_are_cut_on_a_character_boundary_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    // 'é' is two bytes: an odd prefix puts the cap in the middle of one.
    let text = format!("x{}", "é".repeat(MAX_INSTRUCTION_BYTES));
    write(&tmp.path().join("LUMINA.md"), &text);
    let files = load_instructions(tmp.path(), &tmp.path().join("none"));
    assert_eq!(files.len(), 1);
    let file = &files[0];
    assert!(file.truncated);
    let (kept, note) = file.text.split_once("\n\n[truncated: ").unwrap();
    assert_eq!(kept.len(), MAX_INSTRUCTION_BYTES - 1);
    assert!(text.starts_with(kept));
    assert!(note.starts_with("only the first 64 KiB of "), "{note}");
}

#[test]
fn blank_unreadable_and_duplicate_files_are_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path();
    write(&project.join("LUMINA.md"), "  \n\n");
    std::fs::create_dir_all(project.join("AGENTS.md")).unwrap(); // a directory
    assert_eq!(load_instructions(project, project), vec![]);

    // The project is also the user's instructions directory: each file once.
    std::fs::remove_dir(project.join("AGENTS.md")).unwrap();
    write(&project.join("AGENTS.md"), "agents");
    let files = load_instructions(project, project);
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].source, InstructionSource::Project);

    #[cfg(unix)]
    {
        let other = tmp.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        write(&other.join("LUMINA.md"), "shared");
        std::os::unix::fs::symlink(other.join("LUMINA.md"), other.join("AGENTS.md")).unwrap();
        let files = load_instructions(&other, &tmp.path().join("none"));
        assert_eq!(files.len(), 1, "a symlinked AGENTS.md is the same file");
    }
}
