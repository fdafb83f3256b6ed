//! On-disk layout of the SQLite backend: where session directories live, which session ids
//! are acceptable as directory names, and the atomically written `meta.json` projection.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::{Result, SessionRecord};

/// The journal database inside a session directory.
pub(super) const DB_FILE: &str = "runtime.sqlite";
/// The human-readable session-list projection inside a session directory.
pub(super) const META_FILE: &str = "meta.json";

/// Longest accepted session id (well under every filesystem's name limit).
const MAX_SESSION_ID_LEN: usize = 128;
/// Prefix of the directory a session is built in before it is renamed into place. It is not
/// a valid session id, so scans never mistake a half-created session for a real one.
const STAGING_PREFIX: &str = ".creating-";

/// Whether `id` can name a session directory: non-empty, at most 128 bytes of
/// `[A-Za-z0-9_-]`. Anything else (`..`, `/`, `.`, NUL …) could escape the sessions folder.
pub(super) fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_SESSION_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Where a session's directory currently is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Location {
    Active,
    Archive,
}

/// The `active/` and `archive/` folders under `<AppRoot>/data/sessions`.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    active: PathBuf,
    archive: PathBuf,
}

impl Layout {
    pub(super) fn new(sessions_dir: &Path) -> Self {
        Self {
            active: sessions_dir.join("active"),
            archive: sessions_dir.join("archive"),
        }
    }

    /// Creates both folders (owner-only on unix) if missing.
    pub(super) fn ensure(&self) -> io::Result<()> {
        create_private_dir_all(&self.active)?;
        create_private_dir_all(&self.archive)
    }

    /// The session's directory in `location`.
    pub(super) fn dir(&self, location: Location, id: &str) -> PathBuf {
        match location {
            Location::Active => self.active.join(id),
            Location::Archive => self.archive.join(id),
        }
    }

    /// The directory a new session is built in before being renamed to `active/{id}`.
    pub(super) fn staging_dir(&self, id: &str) -> PathBuf {
        self.active.join(format!("{STAGING_PREFIX}{id}"))
    }

    /// Where the session's journal is, if it exists (active wins over archive).
    pub(super) fn locate(&self, id: &str) -> Option<Location> {
        [Location::Active, Location::Archive]
            .into_iter()
            .find(|&location| self.dir(location, id).join(DB_FILE).is_file())
    }

    /// Whether any directory (even one without a journal) claims the id.
    pub(super) fn is_claimed(&self, id: &str) -> bool {
        self.dir(Location::Active, id).exists() || self.dir(Location::Archive, id).exists()
    }

    /// Session ids found in `location`, skipping names that are not valid ids.
    pub(super) fn scan(&self, location: Location) -> io::Result<Vec<String>> {
        let root = match location {
            Location::Active => &self.active,
            Location::Archive => &self.archive,
        };
        let entries = match fs::read_dir(root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry?;
            if !entry.file_type()?.is_dir() {
                continue;
            }
            if let Some(name) = entry.file_name().to_str() {
                if valid_session_id(name) {
                    ids.push(name.to_owned());
                }
            }
        }
        Ok(ids)
    }
}

/// Creates a directory (and parents), owner-only on unix: journals hold whole conversations.
pub(super) fn create_private_dir_all(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

/// Creates one directory, owner-only on unix; fails if it exists.
pub(super) fn create_private_dir(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

/// Writes `{dir}/meta.json` atomically (temp file, then rename), mode 0600 on unix.
///
/// Not fsynced: the file is a projection that can be rebuilt from the journal, and a
/// rename either happened or did not, so readers never see a torn file.
pub(super) fn write_meta(dir: &Path, record: &SessionRecord) -> Result<()> {
    let json = serde_json::to_vec_pretty(record)
        .map_err(|e| crate::Error::Corrupt(format!("session record is not serializable: {e}")))?;
    let tmp = dir.join(format!(".{META_FILE}.tmp"));
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp)?;
    file.write_all(&json)?;
    file.write_all(b"\n")?;
    drop(file);
    fs::rename(&tmp, dir.join(META_FILE))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::valid_session_id;

    #[test]
    fn session_ids_that_could_escape_the_folder_are_invalid() {
        for ok in ["a", "s1", "0b7c-uuid_like-ID", &"x".repeat(128)] {
            assert!(valid_session_id(ok), "{ok:?} should be valid");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\\b",
            "a.b",
            "a b",
            "a\0",
            "é",
            &"x".repeat(129),
        ] {
            assert!(!valid_session_id(bad), "{bad:?} should be invalid");
        }
    }
}
