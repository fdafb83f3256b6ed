//! Replays `fuzz/corpus/ws_frame/` through the fuzz target's own code
//! (`fuzz/src/ws_frame.rs`, included below: client and server frames as the backend and the
//! client decode them, and the params of every method) on the stable toolchain, so every
//! committed input runs in `cargo test`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

#[path = "../../../fuzz/src/ws_frame.rs"]
mod target;

/// Every file of `fuzz/corpus/<target>/`, sorted by name.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let bytes = std::fs::read(&path).expect("read corpus file");
            (path, bytes)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    files
}

#[test]
fn ws_frame_corpus_replays_without_panics() {
    let failed: Vec<String> = corpus("ws_frame")
        .into_iter()
        .filter(|(_, bytes)| catch_unwind(AssertUnwindSafe(|| target::run(bytes))).is_err())
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "ws_frame: these inputs panic: {failed:?}"
    );
}
