//! Integration tests of `lumina-config`: one binary, one module per concern.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixture;
mod hooks;
mod load;
mod model;
