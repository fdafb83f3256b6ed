//! Integration tests of `lumina-model` against the scripted model server, for both wire
//! formats. One test binary (CONTRIBUTING.md#tests).

// Scenario functions are plain `async fn`s called from generated `#[tokio::test]`s, which
// clippy's `allow-unwrap-in-tests` does not recognise as test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod all {
    pub mod errors;
    mod fuzz_corpus;
    pub mod retries;
    pub mod streaming;
    pub mod support;
}
