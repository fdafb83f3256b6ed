//! Target `auth_jwks`: JWKS documents, through `lumina_auth::Authenticator::new` with a JWKS
//! file (document parsing, per-key validation and conversion; the parser itself is private
//! to the crate) and one verification with whatever keys loaded.
//!
//! Properties: nothing panics; an accepted document yields at least one key; and a token
//! signed by a key generated in this process — which no input can contain — is refused
//! whatever the document says.

use std::path::PathBuf;
use std::sync::OnceLock;

use lumina_auth::{AuthConfig, Authenticator, JwksSource, PUBLIC_MESSAGE};
use serde_json::json;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    path: PathBuf,
    token: String,
    _dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let pkcs8 = lumina_auth::generate_ed25519_pkcs8()
            .unwrap_or_else(|e| panic!("generate Ed25519: {e}"));
        let claims = json!({
            "iss": "https://issuer.fuzz", "aud": "lumina", "sub": "alice", "tenant": "acme",
            "scope": "lumina:session:read", "exp": 4_102_444_800_i64,
        });
        // The kid most documents in the corpus use, so lookup finds a key and the signature
        // check (not the kid) is what refuses.
        let token = lumina_auth::sign_ed25519_pkcs8(&pkcs8, "key-1", &claims)
            .unwrap_or_else(|e| panic!("sign: {e}"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        Fixture {
            runtime,
            path: dir.path().join("jwks.json"),
            token,
            _dir: dir,
        }
    })
}

/// Runs one input: the bytes are the JWKS document.
pub fn run(data: &[u8]) {
    // The checks are made inside `loaded_keys`; the count is for the replay tests.
    let _ = loaded_keys(data);
}

/// Runs one input and returns how many keys loaded (`None`: the document was refused).
pub fn loaded_keys(data: &[u8]) -> Option<usize> {
    let fx = fixture();
    std::fs::write(&fx.path, data).unwrap_or_else(|e| panic!("write jwks: {e}"));
    let config = AuthConfig::new(
        "https://issuer.fuzz",
        "lumina",
        JwksSource::File(fx.path.clone()),
    );
    let auth = fx.runtime.block_on(Authenticator::new(config)).ok()?;
    let keys = auth.key_stats().keys;
    assert!(keys >= 1, "a JWKS loaded without keys");
    let result = fx.runtime.block_on(auth.verify(&fx.token));
    match result {
        Ok(p) => panic!("a key the document does not contain verified a token: {p:?}"),
        Err(err) => assert_eq!(err.public_message(), PUBLIC_MESSAGE),
    }
    Some(keys)
}
