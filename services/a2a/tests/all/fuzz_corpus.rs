//! Replays `fuzz/corpus/a2a_jsonrpc/` through the fuzz target's own code
//! (`fuzz/src/a2a_jsonrpc.rs`, included below) on the stable toolchain.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

#[path = "../../../../fuzz/src/a2a_jsonrpc.rs"]
mod target;

#[test]
fn a2a_jsonrpc_corpus_replays_without_panics() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/a2a_jsonrpc");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{} holds too few seeds", dir.display());
    let failed: Vec<String> = files
        .iter()
        .filter(|path| {
            let bytes = std::fs::read(path).unwrap();
            catch_unwind(AssertUnwindSafe(|| target::run(&bytes))).is_err()
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "a2a_jsonrpc: these inputs panic: {failed:?}"
    );
}
