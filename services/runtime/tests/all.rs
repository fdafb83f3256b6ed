//! Integration tests of lumina-runtime driven through `Runtime` and `Session` directly (the
//! backend's tests drive it over WebSocket): the Memory Fabric's background compile, agent
//! teams, ownership lost and taken again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod memory;
mod ownership;
mod team;
