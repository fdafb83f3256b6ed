//! Integration tests of `lumina-mcp-server`: the stdio transport over in-memory pipes, the
//! Streamable HTTP endpoint served in-process on port 0 (sessions, SSE, resumption, the
//! stateless revision), and the official conformance suite against the fixture binary.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conformance;
mod http;
mod stateless;
mod stdio;
mod support;
