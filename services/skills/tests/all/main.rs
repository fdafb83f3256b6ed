//! Integration tests of `lumina-skills` against real directories.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod instructions;
mod invocation;
mod skills;

use std::path::Path;

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}
