//! Integration tests of `lumina`: end-to-end runs of the real binary (it finds or starts a
//! real `lumina-backend`, which talks to the scripted model server), the full-screen UI in
//! tmux, and rendering snapshots of every screen through ratatui's `TestBackend`.

// Test support code outside `#[test]` functions may panic on setup failures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod acceptance;
mod cli;
mod delegate_retry;
mod reconnect;
mod render;
mod support;
mod tmux;
mod web;
