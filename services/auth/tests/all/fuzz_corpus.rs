//! Replays `fuzz/corpus/auth_jwt/` and `fuzz/corpus/auth_jwks/` through the fuzz targets'
//! own code (`fuzz/src/auth_jwt.rs`, `fuzz/src/auth_jwks.rs`, included below) on the stable
//! toolchain, so every committed input — seeds and fixed crashes — runs in `cargo test`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

#[path = "../../../../fuzz/src/auth_jwks.rs"]
mod auth_jwks;
#[path = "../../../../fuzz/src/auth_jwt.rs"]
mod auth_jwt;

/// Every file of `fuzz/corpus/<target>/`, sorted by name.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|path| path.is_file())
        .map(|path| {
            let bytes = std::fs::read(&path).expect("read corpus file");
            (path, bytes)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    files
}

fn replay(target: &str, run: fn(&[u8])) {
    let failed: Vec<String> = corpus(target)
        .into_iter()
        .filter(|(_, bytes)| catch_unwind(AssertUnwindSafe(|| run(bytes))).is_err())
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "{target}: these inputs panic: {failed:?}"
    );
}

fn input(target: &str, name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// One test per target: each target's fixture (keys, JWKS file) is shared process state.
#[test]
fn auth_jwt_corpus_replays_without_panics() {
    replay("auth_jwt", auth_jwt::run);
    // The harness reaches the claim rules: a signed seed verifies, a hostile one does not.
    let valid = auth_jwt::outcome(&input("auth_jwt", "signed_valid"));
    assert!(matches!(valid, Some(Ok(_))), "{valid:?}");
    assert_eq!(
        auth_jwt::outcome(&input("auth_jwt", "signed_duplicate_tenant")),
        Some(Err(lumina_auth::AuthError::Malformed(
            "payload has a duplicate member"
        )))
    );
}

#[test]
fn auth_jwks_corpus_replays_without_panics() {
    replay("auth_jwks", auth_jwks::run);
    assert_eq!(
        auth_jwks::loaded_keys(&input("auth_jwks", "mixed")),
        Some(3)
    );
    assert_eq!(
        auth_jwks::loaded_keys(&input("auth_jwks", "skipped_entries")),
        Some(1)
    );
    assert_eq!(
        auth_jwks::loaded_keys(&input("auth_jwks", "empty_set")),
        None
    );
}
