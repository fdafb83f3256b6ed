//! Replays `fuzz/corpus/mcp_jsonrpc/` through the fuzz target's own code
//! (`fuzz/src/mcp_jsonrpc.rs`, included below: `jsonrpc::Message::parse` and its round trip)
//! on the stable toolchain, so every committed input runs in `cargo test`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

#[path = "../../../../fuzz/src/mcp_jsonrpc.rs"]
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
fn mcp_jsonrpc_corpus_replays_without_panics() {
    let failed: Vec<String> = corpus("mcp_jsonrpc")
        .into_iter()
        .filter(|(_, bytes)| catch_unwind(AssertUnwindSafe(|| target::run(bytes))).is_err())
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "mcp_jsonrpc: these inputs panic: {failed:?}"
    );
}
