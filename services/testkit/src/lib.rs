//! Test-only helpers for Lumina: a scripted model server (the one stand-in Lumina's tests
//! use, see CONVENTIONS "Tests") and, later, launchers for real PostgreSQL and Redis
//! processes on free ports (SYSTEM.md §12).
//!
//! Nothing here is used by production code paths.

pub mod mcp_peers;
pub mod model_server;
pub mod postgres;
pub mod redis;

pub use mcp_peers::{EverythingServer, McpPeers};
pub use model_server::{
    HttpError, RecordedRequest, ScriptedApi, ScriptedModelServer, ScriptedToolCall, ScriptedUsage,
    Turn,
};
