//! Streaming clients for the Anthropic Messages API and OpenAI-compatible Chat Completions,
//! with the SDKs' retry policy and the fallback rule (docs/design.md#model-settings,
//! docs/design.md#fallback; wire formats: docs/specs/model-streaming.md).
//!
//! Entry point: [`ModelClient::stream`]. Module map: [`sse`] decodes the byte stream,
//! `anthropic`/`openai` build request bodies and parse each vendor's events, `retry` holds
//! the SDKs' backoff rules, `client` runs attempts, retries and the fallback. The crate owns
//! the HTTP/SSE details only; the agent loop lives in `lumina-runtime`.

mod anthropic;
mod client;
mod endpoint;
mod error;
#[cfg(test)]
mod fixtures;
mod http;
mod openai;
mod retry;
pub mod sse;
mod stream;
mod types;

pub use client::ModelClient;
pub use error::ModelError;
pub use types::*;
