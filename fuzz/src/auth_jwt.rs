//! Target `auth_jwt`: `lumina_auth::Authenticator::verify`, the whole bearer-token path
//! (shape, header, algorithm allow-list, key selection, signature, payload, claim rules).
//!
//! The verifier's JWKS holds an Ed25519 and a P-256 key generated when the process starts,
//! so no input can carry a valid signature by itself. The first byte picks the mode:
//!
//! - even: the rest is the token text (non-UTF-8 inputs are skipped), verified as is. Every
//!   such token must be refused — an accepted one would be a forgery.
//! - odd: the rest is `header JSON`, a NUL byte, `payload JSON`; both are base64url-encoded
//!   and signed with the process's Ed25519 key, so the fuzzer explores header and claim
//!   handling behind a valid signature. An accepted token must satisfy every claim rule.
//!
//! Every refusal must carry the one public message, and its log text must not contain the
//! token.

use std::sync::OnceLock;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use lumina_auth::{
    AuthConfig, Authenticator, JwksSource, Principal, PUBLIC_MESSAGE, SCOPE_ADMIN, SCOPE_READ,
    SCOPE_WRITE,
};
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair as _};
use serde_json::{json, Value};

const ISSUER: &str = "https://issuer.fuzz";
const AUDIENCE: &str = "lumina";
/// The key id of the Ed25519 key (the P-256 key is `fuzz-ec`).
pub const KID: &str = "fuzz-ed";
const LEEWAY_SECS: i64 = 30;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    auth: Authenticator,
    key: Ed25519KeyPair,
    _dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let rng = SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng)
            .unwrap_or_else(|e| panic!("generate Ed25519: {e}"));
        let key = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
            .unwrap_or_else(|e| panic!("parse Ed25519: {e}"));
        let ec_alg = &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let ec_pkcs8 = EcdsaKeyPair::generate_pkcs8(ec_alg, &rng)
            .unwrap_or_else(|e| panic!("generate P-256: {e}"));
        let ec = EcdsaKeyPair::from_pkcs8(ec_alg, ec_pkcs8.as_ref(), &rng)
            .unwrap_or_else(|e| panic!("parse P-256: {e}"));
        let point = ec.public_key().as_ref();
        let jwks = json!({"keys": [
            lumina_auth::ed25519_jwk(key.public_key().as_ref(), KID),
            {"kty": "EC", "crv": "P-256", "kid": "fuzz-ec", "alg": "ES256", "use": "sig",
             "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..])},
        ]});
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("jwks.json");
        std::fs::write(&path, jwks.to_string()).unwrap_or_else(|e| panic!("write jwks: {e}"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        let mut config = AuthConfig::new(ISSUER, AUDIENCE, JwksSource::File(path));
        // Unknown kids re-read the file at most once an hour: the input decides, not time.
        config.refresh_min_interval = Duration::from_secs(3600);
        let auth = runtime
            .block_on(Authenticator::new(config))
            .unwrap_or_else(|e| panic!("authenticator: {e}"));
        Fixture {
            runtime,
            auth,
            key,
            _dir: dir,
        }
    })
}

/// Runs one input.
pub fn run(data: &[u8]) {
    // The checks are made inside `outcome`; the result is for the replay tests.
    let _ = outcome(data);
}

/// Runs one input and returns what `verify` said (`None`: skipped, not UTF-8).
pub fn outcome(data: &[u8]) -> Option<Result<Principal, lumina_auth::AuthError>> {
    let (&mode, rest) = data.split_first()?;
    let fx = fixture();
    if mode % 2 == 0 {
        let token = std::str::from_utf8(rest).ok()?;
        let result = fx.runtime.block_on(fx.auth.verify(token));
        assert!(result.is_err(), "a token nobody signed was accepted");
        check_refusal(token, &result);
        return Some(result);
    }
    let (header, payload) = match rest.iter().position(|b| *b == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &b""[..]),
    };
    let message = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(payload)
    );
    let signature = fx.key.sign(message.as_bytes());
    let token = format!("{message}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()));
    let result = fx.runtime.block_on(fx.auth.verify(&token));
    match &result {
        Ok(principal) => check_accepted(header, payload, principal),
        Err(_) => check_refusal(&token, &result),
    }
    Some(result)
}

fn check_refusal(token: &str, result: &Result<Principal, lumina_auth::AuthError>) {
    let Err(err) = result else {
        return;
    };
    assert_eq!(err.public_message(), PUBLIC_MESSAGE);
    // Reasons quote at most 64 characters of one attacker-chosen string.
    if token.chars().count() > 80 {
        let logged = format!("{err} {err:?}");
        assert!(
            !logged.contains(token),
            "the refusal reason contains the token"
        );
    }
}

/// What an accepted token must have been: an EdDSA header, and claims that pass every rule.
fn check_accepted(header: &[u8], payload: &[u8], p: &Principal) {
    let header: Value = serde_json::from_slice(header)
        .unwrap_or_else(|e| panic!("accepted a header that is not JSON: {e}"));
    assert_eq!(
        header["alg"], "EdDSA",
        "accepted a header that is not EdDSA"
    );
    assert!(header.get("crit").is_none(), "accepted a crit header");
    let claims: Value = serde_json::from_slice(payload)
        .unwrap_or_else(|e| panic!("accepted a payload that is not JSON: {e}"));
    assert_eq!(claims["iss"], ISSUER, "accepted a foreign issuer");
    let aud_ok = match &claims["aud"] {
        Value::String(a) => a == AUDIENCE,
        Value::Array(a) => a.iter().any(|a| a == AUDIENCE),
        _ => false,
    };
    assert!(aud_ok, "accepted a foreign audience");
    assert_eq!(claims["sub"], p.sub.as_str());
    assert_eq!(claims["tenant"], p.tenant.as_str());
    assert!(!p.sub.is_empty() && p.sub.len() <= 256 && !p.sub.chars().any(char::is_control));
    assert!(
        !p.tenant.is_empty()
            && p.tenant.len() <= 128
            && !p.tenant.starts_with('.')
            && p.tenant
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b)),
        "accepted tenant {:?}",
        p.tenant
    );
    assert!(
        p.scopes
            .iter()
            .any(|s| [SCOPE_READ, SCOPE_WRITE, SCOPE_ADMIN].contains(&s.as_str())),
        "accepted a token without a lumina scope"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    // One extra second: the verifier read the clock a moment before this check did.
    assert!(
        p.expires_at.saturating_add(LEEWAY_SECS + 1) > now,
        "accepted an expired token"
    );
}
