//! Writing a team folder so that nobody ever sees half of it: the files go into a hidden
//! temporary folder next to the target, are flushed, and the folder is renamed into place.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// A unique hidden sibling of `target`: `.<name>.<tag>-<pid>-<nanos>-<n>`.
pub(crate) fn hidden_sibling(target: &Path, tag: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let sibling = format!(".{name}.{tag}-{}-{nanos}-{n}", std::process::id());
    target.with_file_name(sibling)
}

/// Writes `files` (relative path, contents) and `dirs` (relative folders that must exist,
/// possibly empty) into the new folder `root`, flushing every file.
pub(crate) fn write_tree(root: &Path, files: &[(PathBuf, &str)], dirs: &[PathBuf]) -> Result<()> {
    std::fs::create_dir(root).map_err(|e| Error::io("create", root, e))?;
    for dir in dirs {
        let path = root.join(dir);
        std::fs::create_dir_all(&path).map_err(|e| Error::io("create", &path, e))?;
    }
    for (rel, contents) in files {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io("create", parent, e))?;
        }
        write_synced(&path, contents.as_bytes())?;
    }
    sync_dir(root);
    Ok(())
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Error::io("create", path, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| Error::io("write", path, e))
}

/// Flushes a folder's entries (the renames in it) to disk. Best effort: not every platform
/// or file system can open a folder for this.
pub(crate) fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(handle) = std::fs::File::open(dir) {
        let _ = handle.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// Removes whatever is at `path` (folder tree, file or link, never following a link).
pub(crate) fn remove_any(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
