//! Test keys, token construction and a tiny JWKS HTTP server.
//!
//! Tokens are assembled by hand (not with jsonwebtoken) so tests can produce exactly the
//! malformed, mis-signed or hostile tokens the verifier must refuse.

#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use lumina_auth::{AuthConfig, AuthError, Authenticator, JwksSource};
use ring::rand::SystemRandom;
use ring::rsa::PublicKeyComponents;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, RsaKeyPair};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

pub const ISSUER: &str = "https://issuer.test";
pub const AUDIENCE: &str = "lumina";

/// The test-only RSA key (see tests/fixtures/README.md). Never use it for anything else.
pub const RSA_FIXTURE_PEM: &str = include_str!("../fixtures/rsa-test-key.pem");
/// Its public key as SPKI PEM: the "secret" in the algorithm-confusion test.
pub const RSA_FIXTURE_PUB_PEM: &str = include_str!("../fixtures/rsa-test-key.pub.pem");
/// Its public key as a JWK (kid `rsa-test-1`), n/e computed with openssl.
pub const RSA_FIXTURE_JWK: &str = include_str!("../fixtures/rsa-test-key.jwk.json");

pub fn b64(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

pub fn pem_body(pem: &str) -> Vec<u8> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    STANDARD.decode(body).expect("fixture PEM is base64")
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

/// A complete, valid claim set; tests remove or change members.
pub fn claims() -> Value {
    json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "tenant": "acme",
        "exp": now() + 300, "iat": now(), "scope": "lumina:session:read",
    })
}

enum Pair {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    /// P-384: never usable by the verifier (only P-256 is), so it only signs hostile tokens.
    Ec384(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

/// A signing key with its kid; knows its JOSE algorithm and public JWK.
pub struct TestKey {
    pub kid: String,
    pair: Pair,
}

impl TestKey {
    pub fn rsa(kid: &str) -> TestKey {
        let pair =
            RsaKeyPair::from_pkcs8(&pem_body(RSA_FIXTURE_PEM)).expect("fixture is PKCS#8 RSA");
        TestKey {
            kid: kid.into(),
            pair: Pair::Rsa(pair),
        }
    }

    pub fn ec(kid: &str) -> TestKey {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("generate P-256");
        let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).expect("parse P-256");
        TestKey {
            kid: kid.into(),
            pair: Pair::Ec(pair),
        }
    }

    pub fn ec384(kid: &str) -> TestKey {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P384_SHA384_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("generate P-384");
        let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).expect("parse P-384");
        TestKey {
            kid: kid.into(),
            pair: Pair::Ec384(pair),
        }
    }

    pub fn ed(kid: &str) -> TestKey {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("generate Ed25519");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("parse Ed25519");
        TestKey {
            kid: kid.into(),
            pair: Pair::Ed(pair),
        }
    }

    pub fn alg(&self) -> &'static str {
        match self.pair {
            Pair::Rsa(_) => "RS256",
            Pair::Ec(_) => "ES256",
            Pair::Ec384(_) => "ES384",
            Pair::Ed(_) => "EdDSA",
        }
    }

    pub fn jwk(&self) -> Value {
        match &self.pair {
            Pair::Rsa(pair) => {
                let c: PublicKeyComponents<Vec<u8>> = pair.public().into();
                json!({"kty": "RSA", "kid": self.kid, "alg": "RS256", "use": "sig",
                       "n": b64(&c.n), "e": b64(&c.e)})
            }
            Pair::Ec(pair) => {
                // Uncompressed SEC1 point: 0x04 || x (32 bytes) || y (32 bytes).
                let point = pair.public_key().as_ref();
                assert_eq!((point.len(), point[0]), (65, 0x04));
                json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "alg": "ES256", "use": "sig",
                       "x": b64(&point[1..33]), "y": b64(&point[33..])})
            }
            Pair::Ec384(pair) => {
                let point = pair.public_key().as_ref();
                assert_eq!((point.len(), point[0]), (97, 0x04));
                json!({"kty": "EC", "crv": "P-384", "kid": self.kid, "alg": "ES384", "use": "sig",
                       "x": b64(&point[1..49]), "y": b64(&point[49..])})
            }
            Pair::Ed(pair) => {
                json!({"kty": "OKP", "crv": "Ed25519", "kid": self.kid, "alg": "EdDSA", "use": "sig",
                       "x": b64(pair.public_key().as_ref())})
            }
        }
    }

    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match &self.pair {
            Pair::Rsa(pair) => {
                let mut sig = vec![0; pair.public().modulus_len()];
                pair.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut sig)
                    .expect("rsa sign");
                sig
            }
            Pair::Ec(pair) | Pair::Ec384(pair) => pair
                .sign(&rng, message)
                .expect("ecdsa sign")
                .as_ref()
                .to_vec(),
            Pair::Ed(pair) => pair.sign(message).as_ref().to_vec(),
        }
    }

    /// A token with header `{alg, typ, kid}`.
    pub fn token(&self, claims: &Value) -> String {
        self.token_with_header(
            &json!({"alg": self.alg(), "typ": "JWT", "kid": self.kid}),
            claims,
        )
    }

    /// A token signed by this key under an arbitrary header.
    pub fn token_with_header(&self, header: &Value, claims: &Value) -> String {
        self.token_from_json(&header.to_string(), &claims.to_string())
    }

    /// A token from literal JSON texts (which a `Value` cannot express: duplicate members,
    /// trailing bytes, escapes), base64url-encoded and signed by this key.
    pub fn token_from_json(&self, header: &str, claims: &str) -> String {
        self.token_from_segments(&b64(header), &b64(claims))
    }

    /// Signs two already-encoded segments exactly as given (non-canonical encodings too).
    pub fn token_from_segments(&self, header: &str, payload: &str) -> String {
        let message = format!("{header}.{payload}");
        format!("{message}.{}", b64(self.sign(message.as_bytes())))
    }

    /// The public key bytes as published (SEC1 point, Ed25519 key, or RSA SPKI-less n).
    pub fn public_key_bytes(&self) -> Vec<u8> {
        match &self.pair {
            Pair::Rsa(pair) => pair.public().as_ref().to_vec(),
            Pair::Ec(pair) | Pair::Ec384(pair) => pair.public_key().as_ref().to_vec(),
            Pair::Ed(pair) => pair.public_key().as_ref().to_vec(),
        }
    }
}

/// An HS256 token, signed with `secret` (for algorithm-confusion attempts).
pub fn hs256_token(secret: &[u8], kid: &str, claims: &Value) -> String {
    let header = json!({"alg": "HS256", "typ": "JWT", "kid": kid});
    let message = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
    let tag = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret),
        message.as_bytes(),
    );
    format!("{message}.{}", b64(tag.as_ref()))
}

pub fn jwks(keys: &[&TestKey]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()})
}

pub fn write_jwks(path: &Path, jwks: &Value) {
    // Rename so the verifier never reads a half-written file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, jwks.to_string()).expect("write jwks");
    std::fs::rename(&tmp, path).expect("rename jwks");
}

pub fn config(jwks: JwksSource) -> AuthConfig {
    AuthConfig::new(ISSUER, AUDIENCE, jwks)
}

/// An authenticator over a JWKS file holding `keys`; the tempdir must outlive it.
pub async fn file_authenticator(keys: &[&TestKey]) -> (Authenticator, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    write_jwks(&path, &jwks(keys));
    let auth = Authenticator::new(config(JwksSource::File(path)))
        .await
        .expect("authenticator");
    (auth, dir)
}

/// Asserts the refusal reason, the opaque public message, and that nothing of the token
/// leaks into the log text.
#[track_caller]
pub fn assert_refused(
    result: Result<lumina_auth::Principal, AuthError>,
    token: &str,
    expected: AuthError,
) {
    let err = result.expect_err("token must be refused");
    assert_eq!(err, expected);
    assert_eq!(err.public_message(), "invalid or expired token");
    let logged = format!("{err} {err:?}");
    for segment in token.split('.').filter(|s| s.len() > 8) {
        assert!(
            !logged.contains(segment),
            "log text leaks a token segment: {logged}"
        );
    }
}

/// A JWKS server on 127.0.0.1 that counts requests; built on tokio only.
pub struct JwksServer {
    pub url: String,
    body: Arc<Mutex<String>>,
    hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    /// Serves `jwks`; each response is delayed by `delay` (to make concurrent callers overlap).
    pub async fn start(jwks: &Value, delay: Duration) -> JwksServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!(
            "http://{}/.well-known/jwks.json",
            listener.local_addr().expect("addr")
        );
        let body = Arc::new(Mutex::new(jwks.to_string()));
        let hits = Arc::new(AtomicUsize::new(0));
        let (b, h) = (Arc::clone(&body), Arc::clone(&hits));
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let (b, h) = (Arc::clone(&b), Arc::clone(&h));
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    h.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    let body = b.lock().expect("body lock").clone();
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        JwksServer {
            url,
            body,
            hits,
            task,
        }
    }

    pub fn set(&self, jwks: &Value) {
        *self.body.lock().expect("body lock") = jwks.to_string();
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
