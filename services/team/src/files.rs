//! Bounded, link-free reading of the files in a team folder. A project's team comes with
//! the project, which may be a repository someone else wrote, so nothing here follows a
//! symbolic link (a `system.md` linked to a private key would otherwise go to the model),
//! opens a FIFO or device, or reads more than [`MAX_FILE_BYTES`].

use std::io::Read;
use std::path::Path;

use crate::error::{Issue, IssueKind};

/// Largest file of a team definition (`team.yaml`, `agent.yaml`, prompts) accepted. Prompts
/// go into model requests whole, and the YAML parser never sees more than this.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// What is at a path inside a team folder, without following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    Missing,
    File,
    Dir,
    /// A symbolic link, socket, FIFO or device.
    Other,
}

pub(crate) fn entry(path: &Path) -> Result<Entry, std::io::Error> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Ok(Entry::Other),
        Ok(meta) if meta.is_file() => Ok(Entry::File),
        Ok(meta) if meta.is_dir() => Ok(Entry::Dir),
        Ok(_) => Ok(Entry::Other),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Entry::Missing),
        Err(e) => Err(e),
    }
}

/// Reads `team_dir/rel` as UTF-8 text (a leading BOM removed). `Ok(None)` when it does not
/// exist; an [`Issue`] about `rel` when it is not a readable regular UTF-8 file of at most
/// [`MAX_FILE_BYTES`].
pub(crate) fn read_text(team_dir: &Path, rel: &Path) -> Result<Option<String>, Issue> {
    let path = team_dir.join(rel);
    let unreadable =
        |e: std::io::Error| Issue::new(rel, IssueKind::Unreadable, format!("cannot be read: {e}"));
    match entry(&path).map_err(unreadable)? {
        Entry::Missing => return Ok(None),
        Entry::File => {}
        Entry::Dir => {
            return Err(Issue::new(
                rel,
                IssueKind::NotRegular,
                "is a folder, expected a file".into(),
            ))
        }
        Entry::Other => {
            return Err(Issue::new(
                rel,
                IssueKind::NotRegular,
                "is not a regular file (symbolic links are not followed in team folders)".into(),
            ))
        }
    }
    let file = open_no_follow(&path).map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(Issue::new(
            rel,
            IssueKind::NotRegular,
            "is not a regular file".into(),
        ));
    }
    let too_large = || {
        Issue::new(
            rel,
            IssueKind::TooLarge,
            format!("is larger than {} KiB", MAX_FILE_BYTES / 1024),
        )
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    // One byte more than the cap, so a file that grew since the size check is caught.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large());
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        Issue::new(
            rel,
            IssueKind::NotUtf8,
            format!(
                "is not valid UTF-8 (first bad byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    Ok(Some(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    }))
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: a FIFO swapped in after the type check must not block the open.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}
