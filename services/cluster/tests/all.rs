//! Integration tests of `lumina-cluster` against real `redis-server` processes started by
//! the test kit, one per test, so tests run in parallel and may kill their Redis.

// Scenario helpers are plain functions shared by tests, which clippy's
// `allow-unwrap-in-tests` does not recognise as test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod all {
    pub mod bench;
    pub mod conn;
    pub mod hints;
    pub mod hot;
    pub mod keeper;
    pub mod lease;
    pub mod registry;
    pub mod rpc;
    pub mod support;
}
