//! The Conversation API (REST + SSE) against a real local backend with a real HTTP client;
//! the cluster's conversation tests are in `cluster::conversation`.

pub mod api;
mod local;
