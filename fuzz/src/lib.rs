//! The bodies of Lumina's fuzz targets, one module per target (`fuzz_targets/*.rs` are
//! one-line wrappers). Each module depends only on its owning crate and that crate's own
//! dependencies, so the owning crate's test binary can include the same file with
//! `#[path]` and replay `fuzz/corpus/<target>/` on the stable toolchain.

pub mod a2a_jsonrpc;
pub mod auth_jwks;
pub mod auth_jwt;
pub mod mcp_jsonrpc;
pub mod model_sse;
pub mod ws_frame;
