//! Model Context Protocol (spec digest: `docs/specs/mcp.md`): the JSON-RPC envelope and
//! protocol revisions shared by Lumina's MCP client and server, and the MCP client.
//!
//! - [`jsonrpc`]: messages, ids, error codes.
//! - [`client`]: one session with one server over stdio, Streamable HTTP or legacy
//!   HTTP+SSE, in the handshake era (≤ 2025-11-25) or the stateless one (2026-07-28);
//!   [`client::auth`]: OAuth 2.1 authorization for the HTTP transports (discovery,
//!   registration, PKCE, refresh, step-up; pluggable user agent; token file).
//! - [`config`]: server definitions from `<project>/.mcp.json` and `<AppRoot>/config/mcp.json`
//!   with `${VAR}` expansion at connect time.
//! - [`trust`]: which project servers the user trusted (by definition fingerprint).
//! - [`manager`]: [`McpManager`], the runtime's view: lazily connected servers per project,
//!   their tools as `lumina_tools::Tool`s named `mcp__<server>__<tool>`, and `/mcp` status;
//!   HTTP servers that need a sign-in use the loopback sign-in and
//!   `<AppRoot>/data/mcp/oauth/<sha256(url)>.json`.

pub mod client;
pub mod config;
mod error;
mod expand;
pub mod jsonrpc;
pub mod manager;
mod tool;
pub mod trust;

pub use error::{Error, Result};
pub use expand::{expand_vars, ExpandError};
pub use manager::{ManagerOptions, McpManager, ServerState, ServerStatus};
pub use tool::{result_text, tool_name, McpTool};
pub use trust::{project_id, TrustStore};

/// Protocol revisions Lumina speaks, newest first.
pub mod version {
    /// The stateless revision: no `initialize`; version and capabilities in every `_meta`.
    pub const STATELESS: &str = "2026-07-28";
    /// The last handshake revision; what a client offers in `initialize`.
    pub const LATEST_HANDSHAKE: &str = "2025-11-25";
    pub const V2025_06_18: &str = "2025-06-18";
    pub const V2025_03_26: &str = "2025-03-26";
    pub const V2024_11_05: &str = "2024-11-05";
    /// Handshake revisions accepted from a peer, newest first.
    pub const HANDSHAKE: [&str; 4] = [LATEST_HANDSHAKE, V2025_06_18, V2025_03_26, V2024_11_05];

    /// Whether `v` is a handshake revision Lumina speaks.
    pub fn is_handshake(v: &str) -> bool {
        HANDSHAKE.contains(&v)
    }
}
