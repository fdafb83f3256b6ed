//! Integration tests of the MCP client: the reference server over stdio, Streamable HTTP
//! and HTTP+SSE; in-test servers for the eras with no reference server here; config,
//! trust and the manager; OAuth against an in-test authorization server; and the official
//! conformance suite's client scenarios (including every core `auth/*` scenario).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conformance;
mod fake_http;
mod fake_oauth;
mod fake_stdio;
mod fuzz_corpus;
mod http_everything;
mod manager_config;
mod oauth;
mod stdio_everything;
mod support;
