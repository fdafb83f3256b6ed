//! Project instructions (docs/design.md#instructions-and-skills): `{project}/LUMINA.md`,
//! `{project}/AGENTS.md`, then the user's `<AppRoot>/config/instructions/LUMINA.md` and
//! `AGENTS.md`. All are optional; the runtime compiles what is found into the model context
//! in this order.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

/// File names looked up in each directory, in order.
pub const INSTRUCTION_FILE_NAMES: [&str; 2] = ["LUMINA.md", "AGENTS.md"];

/// Bytes of one instruction file that are included; the rest is cut with a note, so a
/// huge generated file cannot eat the context window.
pub const MAX_INSTRUCTION_BYTES: usize = 64 * 1024;

/// Where an instruction file came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstructionSource {
    /// The project directory.
    Project,
    /// `<AppRoot>/config/instructions/`.
    User,
}

/// One instruction file's text, ready for the context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstructionFile {
    pub path: PathBuf,
    pub source: InstructionSource,
    /// The file's text (invalid UTF-8 replaced). When `truncated`, the first
    /// [`MAX_INSTRUCTION_BYTES`] followed by a note saying so.
    pub text: String,
    pub truncated: bool,
}

/// Loads the instruction files that exist, in precedence order. Missing files are
/// skipped silently; unreadable ones (permissions, a directory of that name) are skipped
/// with a warning; blank files are skipped; a file reached twice (e.g. `AGENTS.md` a
/// symlink to `LUMINA.md`, or the project being the instructions directory) is included
/// once.
pub fn load_instructions(project_root: &Path, app_instructions_dir: &Path) -> Vec<InstructionFile> {
    let mut seen = HashSet::new();
    let mut files = Vec::new();
    for (dir, source) in [
        (project_root, InstructionSource::Project),
        (app_instructions_dir, InstructionSource::User),
    ] {
        for name in INSTRUCTION_FILE_NAMES {
            let path = dir.join(name);
            let Some((text, truncated)) = read_capped(&path) else {
                continue;
            };
            let identity = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
            if !seen.insert(identity) || text.trim().is_empty() {
                continue;
            }
            files.push(InstructionFile {
                path,
                source,
                text,
                truncated,
            });
        }
    }
    files
}

/// The file's text, capped; `None` when absent or unreadable (the latter logged).
fn read_capped(path: &Path) -> Option<(String, bool)> {
    let mut bytes = Vec::new();
    // Check the type before opening: opening a FIFO would block.
    let read = std::fs::metadata(path).and_then(|meta| {
        if !meta.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        std::fs::File::open(path)?
            .take(MAX_INSTRUCTION_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
    });
    match read {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "skipping unreadable instruction file");
            return None;
        }
    }
    let truncated = bytes.len() > MAX_INSTRUCTION_BYTES;
    if !truncated {
        return Some((String::from_utf8_lossy(&bytes).into_owned(), false));
    }
    bytes.truncate(MAX_INSTRUCTION_BYTES);
    // Do not leave half a character at the cut.
    if let Err(e) = std::str::from_utf8(&bytes) {
        if e.error_len().is_none() {
            bytes.truncate(e.valid_up_to());
        }
    }
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    text.push_str(&format!(
        "\n\n[truncated: only the first {} KiB of {} are included]",
        MAX_INSTRUCTION_BYTES / 1024,
        path.display()
    ));
    Some((text, true))
}
