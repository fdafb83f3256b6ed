//! A generic MCP (Model Context Protocol) server: the protocol core plus the stdio and
//! Streamable HTTP transports. Applications implement [`Handler`]; the library owns the
//! lifecycle (`initialize` negotiation for the handshake revisions 2024-11-05 … 2025-11-25,
//! the stateless 2026-07-28 revision with `server/discover`), capabilities, errors,
//! cancellation, logging levels, progress and server→client requests ([`RequestContext`]).
//!
//! - [`serve_stdio`]: newline-delimited JSON-RPC on a reader/writer pair.
//! - [`http::serve`] / [`http::router`]: the Streamable HTTP endpoint (sessions, SSE with
//!   resumption, DNS-rebinding protection, an optional auth hook).
//!
//! - [`fixtures`]: the conformance suite's fixture server (`lumina-mcp-everything`).
//!
//! Spec digest: `docs/specs/mcp.md`.

mod context;
mod dispatch;
mod error;
pub mod fixtures;
mod handler;
pub mod http;
mod session;
pub mod stateless;
mod stdio;
mod types;

pub use context::{AuthValue, RequestContext};
pub use error::{Error, Result};
pub use handler::{resource_not_found, Handler};
pub use stdio::{serve_process_stdio, serve_stdio, serve_stdio_until};
pub use types::{
    CallToolResult, Completion, Content, Features, GetPromptResult, Implementation, LogLevel,
    Prompt, PromptArgument, PromptMessage, Resource, ResourceContents, ResourceTemplate, Role,
    Tool,
};

/// Re-exported so handlers need not depend on `lumina-mcp-proto` for errors and ids.
pub use lumina_mcp_proto::jsonrpc::{code, ErrorObject, Id};
