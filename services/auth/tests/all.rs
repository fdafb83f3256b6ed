//! Integration tests for `lumina-auth`, one binary (CONVENTIONS.md "Tests").
//!
//! Keys are generated per run with ring (Ed25519, ECDSA P-256, P-384); RSA uses the
//! committed, test-only fixtures in `tests/fixtures/` because ring cannot generate RSA keys
//! (nor sign with the 1024-bit one, which `hostile.rs` signs with by hand).

// Helpers outside `#[test]` functions are test code too; clippy's allow-*-in-tests does not
// see them as such.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod all {
    pub mod support;

    mod fuzz_corpus;
    mod hostile;
    #[cfg(unix)]
    mod local;
    mod refresh;
    mod verify;
}
