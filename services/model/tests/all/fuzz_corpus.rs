//! Replays `fuzz/corpus/model_anthropic_sse/` and `fuzz/corpus/model_openai_sse/` through the
//! fuzz targets' own code (`fuzz/src/model_sse.rs`, included below: the SSE decoder's split
//! invariance, then `ModelClient::stream` against an in-process loopback server) on the
//! stable toolchain, so every committed input runs in `cargo test`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

#[path = "../../../../fuzz/src/model_sse.rs"]
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

fn replay(target: &str, run: fn(&[u8])) {
    let failed: Vec<String> = corpus(target)
        .into_iter()
        .filter(|(_, bytes)| catch_unwind(AssertUnwindSafe(|| run(bytes))).is_err())
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "{target}: these inputs panic: {failed:?}"
    );
}

fn input(target: &str, name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// One test for both: they share the target's loopback server and its response body.
#[test]
fn model_sse_corpora_replay_without_panics() {
    replay("model_anthropic_sse", target::run_anthropic);
    replay("model_openai_sse", target::run_openai);

    // The harness reaches the vendor parsers: complete transcripts give complete turns.
    use lumina_model::ApiType;
    let turn = target::stream(
        ApiType::Anthropic,
        &input("model_anthropic_sse", "text_crlf.sse"),
    )
    .expect("a complete Anthropic stream");
    assert_eq!(turn.text, "Hello, w\u{f6}rld \u{1f980}");
    let turn = target::stream(
        ApiType::OpenaiCompatible,
        &input("model_openai_sse", "text_done.sse"),
    )
    .expect("a complete OpenAI stream");
    assert_eq!(turn.text, "Hello \u{65e5}\u{672c}");
    assert!(target::stream(
        ApiType::Anthropic,
        &input("model_anthropic_sse", "tool_thinking.sse")
    )
    .is_ok_and(|t| !t.tool_calls.is_empty()));
    assert!(target::stream(
        ApiType::Anthropic,
        &input("model_anthropic_sse", "overloaded_error.sse")
    )
    .is_err());
}
