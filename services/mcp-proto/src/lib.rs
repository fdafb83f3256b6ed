//! The Model Context Protocol on the wire (spec digest: `docs/specs/mcp.md`), shared by
//! Lumina's MCP client (`lumina-mcp`) and server library (`lumina-mcp-server`): neither
//! depends on the other.
//!
//! - [`jsonrpc`]: the JSON-RPC 2.0 envelope (messages, ids, error objects, error codes).
//! - [`version`]: the protocol revisions Lumina speaks.
//! - [`meta`]: the `_meta` keys of the stateless revision.
//! - [`header`]: the Streamable HTTP header names.
//! - the MCP data types ([`Tool`], [`CallToolResult`], [`Content`], [`Implementation`], …).

pub mod jsonrpc;
mod types;

pub use types::{
    CallToolResult, Completion, Content, GetPromptResult, Implementation, LogLevel, Prompt,
    PromptArgument, PromptMessage, Resource, ResourceContents, ResourceTemplate, Role, Tool,
};

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

/// The `_meta` keys of the stateless revision (2026-07-28).
pub mod meta {
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
}

/// Streamable HTTP header names (lowercase, as `http` stores them).
pub mod header {
    pub const SESSION_ID: &str = "mcp-session-id";
    pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
}
