//! Model Context Protocol (spec digest: `docs/specs/mcp.md`): the MCP client. The wire types
//! it shares with Lumina's MCP server library are in `lumina-mcp-proto`.
//!
//! - [`jsonrpc`], [`version`]: re-exported from `lumina-mcp-proto`.
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
pub mod manager;
mod tool;
pub mod trust;

pub use error::{Error, Result};
pub use expand::{expand_vars, ExpandError};
pub use manager::{
    ManagerOptions, McpManager, PendingSignIn, ServerState, ServerStatus, SignInEnd,
};
pub use tool::{result_text, tool_name, McpTool};
pub use trust::{project_id, TrustStore};

/// The envelope and the revisions, from `lumina-mcp-proto` (the server library shares them).
pub use lumina_mcp_proto::{jsonrpc, version};
