//! Helpers shared by the file tools: confinement, display paths, binary detection, atomic
//! writes, diffs and output caps.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use similar::TextDiff;

use crate::{paths, ToolContext, ToolOutput};

/// Tools return `Result<ToolOutput, ToolOutput>` internally so `?` can short-circuit with an
/// error output; the trait method flattens it.
pub(crate) fn flatten(result: Result<ToolOutput, ToolOutput>) -> ToolOutput {
    match result {
        Ok(out) | Err(out) => out,
    }
}

/// Resolves a path argument inside the project root, as an error output when it escapes.
pub(crate) fn resolve(ctx: &ToolContext, path: &str) -> Result<PathBuf, ToolOutput> {
    paths::resolve(&ctx.project_root, path).map_err(|e| ToolOutput::error(e.to_string()))
}

/// The path as the model should see it: relative to the project root.
pub(crate) fn display(ctx: &ToolContext, path: &Path) -> String {
    paths::display_relative(&ctx.project_root, path)
}

/// An I/O failure as an error output that names the path.
pub(crate) fn io_error(what: &str, shown: &str, err: &io::Error) -> ToolOutput {
    if paths::is_not_found(err) {
        ToolOutput::error(format!("{shown}: no such file or directory"))
    } else {
        ToolOutput::error(format!("cannot {what} {shown}: {err}"))
    }
}

/// How many leading bytes are inspected to decide whether a file is binary.
pub(crate) const BINARY_SNIFF_BYTES: usize = 8192;

/// git's heuristic: a NUL byte in the first few kilobytes means binary. It never rejects
/// text in legacy 8-bit encodings, which are shown lossily instead.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

/// Caps a line at `max` characters, saying how much was cut so the model knows the line is
/// incomplete.
pub(crate) fn cap_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        None => line.to_string(),
        Some((cut, _)) => {
            let total = line.chars().count();
            format!("{}… [line truncated: {total} chars]", &line[..cut])
        }
    }
}

/// A unified diff of `old` → `new` with `a/` and `b/` headers (`/dev/null` for a new file).
pub(crate) fn unified_diff(shown: &str, old: Option<&str>, new: &str) -> String {
    let old_header = match old {
        Some(_) => format!("a/{shown}"),
        None => "/dev/null".to_string(),
    };
    TextDiff::from_lines(old.unwrap_or(""), new)
        .unified_diff()
        .context_radius(3)
        .header(&old_header, &format!("b/{shown}"))
        .to_string()
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so
/// readers never see a half-written file. An existing file's permissions are kept.
pub(crate) async fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "path has no parent directory")
    })?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temp = dir.join(format!(
        ".{name}.lumina-tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = async {
        tokio::fs::write(&temp, bytes).await?;
        if let Ok(meta) = tokio::fs::metadata(path).await {
            tokio::fs::set_permissions(&temp, meta.permissions()).await?;
        }
        tokio::fs::rename(&temp, path).await
    }
    .await;
    if result.is_err() {
        // Best effort: a leftover temp file is only clutter, the original is untouched.
        let _ = tokio::fs::remove_file(&temp).await;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn cap_line_counts_characters() {
        assert_eq!(cap_line("héllo", 10), "héllo");
        assert_eq!(cap_line("héllo", 2), "hé… [line truncated: 5 chars]");
    }

    #[test]
    fn binary_detection_uses_nul_bytes() {
        assert!(looks_binary(b"abc\0def"));
        assert!(!looks_binary("plain text é".as_bytes()));
    }

    #[test]
    fn diff_of_new_file_uses_dev_null() {
        let diff = unified_diff("a.txt", None, "x\n");
        assert_eq!(diff, "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n");
    }
}
