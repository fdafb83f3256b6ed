//! Integration tests for `lumina-team`, one binary (CONTRIBUTING.md "Tests"). Every test works
//! in its own temporary folders; nothing needs a service.

// Helpers outside `#[test]` functions are test code too; clippy's allow-*-in-tests does not
// see them as such.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod all {
    pub mod support;

    mod builtins;
    mod create;
    mod defaults;
    mod gates;
    mod hostile;
    mod install;
    mod lookup;
    mod names;
    mod validation;
}
