//! Test-only helpers for Lumina: a scripted model server (the one stand-in Lumina's tests
//! use, see CONTRIBUTING.md#tests), launchers for real PostgreSQL and Redis processes on
//! free ports, the MCP peers from npm (docs/design.md#real-services), and an OAuth-protected
//! MCP server for sign-in tests (`mcp_oauth`).
//!
//! Nothing here is used by production code paths.

pub mod mcp_oauth;
pub mod mcp_peers;
pub mod model_server;
pub mod postgres;
pub mod redis;

pub use mcp_oauth::{OAuthCounts, OAuthMcpServer};
pub use mcp_peers::{EverythingServer, McpPeers};
pub use model_server::{
    HttpError, RecordedRequest, ScriptedApi, ScriptedModelServer, ScriptedToolCall, ScriptedUsage,
    Turn,
};

/// The variable `scripts/test --quick` sets: the quick loop installs and starts no services.
pub const QUICK_ENV: &str = "LUMINA_TEST_QUICK";

/// Whether the tests run in the quick loop (`LUMINA_TEST_QUICK` set, not empty, not `0`).
pub fn quick_mode() -> bool {
    std::env::var_os(QUICK_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// In the quick loop, the error a launcher returns instead of starting `what`, so a test
/// that needs a service fails at once with a message naming it (the quick loop leaves such
/// tests out; one that slips through says so here). Outside the quick loop: `Ok`.
fn refuse_in_quick_mode(what: &str) -> anyhow::Result<()> {
    if quick_mode() {
        anyhow::bail!(
            "not run in the quick loop: needs {what} (run scripts/test); {QUICK_ENV}=1 is set, \
             so the test kit starts no services — add this test to the quick loop's skip \
             list in scripts/test"
        );
    }
    Ok(())
}
