//! The project's file list for `@path` completion: collected once in a background thread
//! (hidden directories and build output skipped, bounded in size) and matched by substring
//! with a ranking that prefers file-name hits and short paths.

use std::path::Path;

/// Directories never descended into: VCS data, dependencies and build output.
const SKIP_DIRS: &[&str] = &[
    "target",
    "node_modules",
    "__pycache__",
    "dist",
    "build",
    "venv",
];
/// Most files indexed; a huge tree still completes, from its first part.
const MAX_FILES: usize = 50_000;
/// Deepest directory level visited.
const MAX_DEPTH: usize = 12;

/// Relative paths (with `/`) of the files under `root`, sorted; directories end with `/`.
pub fn index(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    walk(root, root, 0, &mut out);
    out.sort();
    out
}

fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<String>) {
    if depth > MAX_DEPTH || out.len() >= MAX_FILES {
        return;
    }
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = read.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if out.len() >= MAX_FILES {
            return;
        }
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let Ok(relative) = path.strip_prefix(root) else {
            continue;
        };
        let relative = relative.to_string_lossy().replace('\\', "/");
        // `file_type` does not follow symlinks: a link loop cannot trap the walk.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if SKIP_DIRS.contains(&name.as_ref()) {
                continue;
            }
            out.push(format!("{relative}/"));
            walk(root, &path, depth + 1, out);
        } else {
            out.push(relative);
        }
    }
}

/// The best `limit` paths for `query` (case-insensitive substring), best first.
pub fn matches<'a>(files: &'a [String], query: &str, limit: usize) -> Vec<&'a str> {
    let query = query.to_lowercase();
    let mut scored: Vec<(u8, usize, &str)> = files
        .iter()
        .filter_map(|path| {
            let lower = path.to_lowercase();
            let name = lower
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or(&lower);
            let rank = if query.is_empty() {
                // Without a query: top-level entries first.
                u8::from(path.trim_end_matches('/').contains('/'))
            } else if lower.starts_with(&query) {
                0
            } else if name.starts_with(&query) {
                1
            } else if name.contains(&query) {
                2
            } else if lower.contains(&query) {
                3
            } else {
                return None;
            };
            Some((rank, path.len(), path.as_str()))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(limit).map(|(_, _, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn indexes_a_tree_and_skips_hidden_and_build_dirs() {
        let dir = tempfile::tempdir().unwrap();
        for path in [
            "src/main.rs",
            "src/ui/app.rs",
            ".git/HEAD",
            "target/x",
            "README.md",
        ] {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, "").unwrap();
        }
        assert_eq!(
            index(dir.path()),
            vec![
                "README.md",
                "src/",
                "src/main.rs",
                "src/ui/",
                "src/ui/app.rs"
            ]
        );
    }

    #[test]
    fn ranks_prefix_then_name_then_substring() {
        let files: Vec<String> = ["docs/app.md", "src/app.rs", "app.toml", "src/mapper.rs"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            matches(&files, "app", 10),
            vec!["app.toml", "src/app.rs", "docs/app.md", "src/mapper.rs"]
        );
        assert_eq!(matches(&files, "APP.R", 1), vec!["src/app.rs"]);
    }
}
