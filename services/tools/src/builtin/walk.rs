//! The project walker shared by `glob` and `grep`: `.gitignore`-aware (also outside a git
//! repository), hidden files included, `.git` itself skipped, symlinks not followed (a link
//! out of the root must not lead the search outside it), entries in name order so results
//! are deterministic.

use std::path::Path;

use ignore::{Walk, WalkBuilder};

pub(crate) fn walker(start: &Path) -> Walk {
    WalkBuilder::new(start)
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .sort_by_file_name(|a, b| a.cmp(b))
        .build()
}
