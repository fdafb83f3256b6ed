//! Integration tests of `lumina-loadtest` on real parts: the `lumina-backend` binary (local
//! profile, and cluster instances over the test kit's PostgreSQL and Redis), the scripted
//! model server, the `lumina-loadtest` binary for bad input.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

mod bad_input;
mod chaos;
mod cluster;
mod local;
mod support;
