//! Integration tests of lumina-embed: the remote embeddings client against a local
//! OpenAI-compatible server (and a SQLite store using its vectors), the local
//! all-MiniLM-L6-v2 and BGE-M3 models, and the provider selection from the settings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bge_m3;
mod embeddings;
// The test target always has `local-embeddings` (the crate's dev-dependency on itself).
mod local;
mod select;
