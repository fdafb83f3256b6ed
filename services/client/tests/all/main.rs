//! Integration tests of `lumina-client` against a scripted in-process WebSocket server.

// Test support code outside `#[test]` functions may panic on setup failures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client;
mod fake_server;
