//! lumina-a2a integration tests: one binary, modules under `all/`.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/support.rs"]
mod support;

#[path = "all/card.rs"]
mod card;
#[path = "all/envelope.rs"]
mod envelope;
#[path = "all/fuzz_corpus.rs"]
mod fuzz_corpus;
#[path = "all/methods.rs"]
mod methods;
#[path = "all/push.rs"]
mod push;
#[path = "all/streaming.rs"]
mod streaming;
#[path = "all/v03.rs"]
mod v03;
