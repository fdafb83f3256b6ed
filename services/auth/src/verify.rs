//! [`Authenticator`]: bearer JWT → [`Principal`].
//!
//! The order of checks is deliberate: size and shape, then the header — strict JSON, the
//! `alg` allow-list, `crit`, `cty`, `b64` — before any key is looked up, so `none`/HS* or
//! nested tokens cannot even trigger a JWKS refresh; then key selection, the key/algorithm
//! binding, the signature over the segments exactly as sent, and only then the payload,
//! which is untrusted until the signature holds. Every segment must be canonical base64url
//! (no padding, no `+`/`/`, no stray bits) and every JSON document a single object without
//! duplicate member names, so no two parsers can read one signed token two ways.
//!
//! Decoding and verification are done here with ring directly (jsonwebtoken only signs, in
//! `local.rs`): one parser sees the header, and the signature check cannot pick an
//! algorithm the key was not published for.

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::Value;

use crate::claims::{self, unix_now, Expectations, Principal};
use crate::error::{loggable, AuthError, Error, Result};
use crate::json::{parse_object, StrictError};
use crate::jwks::{Alg, JwksSource, JwksStats, KeyCache};

/// Default clock skew tolerated on `exp` and `nbf`.
pub const DEFAULT_LEEWAY_SECS: u64 = 30;
/// Default minimum time between two JWKS reloads caused by unknown `kid`s.
pub const DEFAULT_REFRESH_MIN_INTERVAL: Duration = Duration::from_secs(30);
/// Default limit for one JWKS HTTP fetch (connect and whole response).
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Tokens longer than this are refused before any decoding (headers are rarely > 8 KiB).
pub const MAX_TOKEN_LEN: usize = 16 * 1024;

/// How to verify tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    /// Required `iss`, compared exactly.
    pub issuer: String,
    /// Required member of `aud` (a string or an array).
    pub audience: String,
    /// Where the verification keys come from.
    pub jwks: JwksSource,
    /// Clock skew tolerated on `exp`/`nbf`, seconds. Default [`DEFAULT_LEEWAY_SECS`].
    pub leeway_secs: u64,
    /// At most one unknown-`kid` reload per this interval. Default
    /// [`DEFAULT_REFRESH_MIN_INTERVAL`].
    pub refresh_min_interval: Duration,
    /// Timeout of one JWKS URL fetch. Default [`DEFAULT_FETCH_TIMEOUT`].
    pub fetch_timeout: Duration,
}

impl AuthConfig {
    /// A config with the documented defaults.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>, jwks: JwksSource) -> Self {
        AuthConfig {
            issuer: issuer.into(),
            audience: audience.into(),
            jwks,
            leeway_secs: DEFAULT_LEEWAY_SECS,
            refresh_min_interval: DEFAULT_REFRESH_MIN_INTERVAL,
            fetch_timeout: DEFAULT_FETCH_TIMEOUT,
        }
    }
}

/// Verifies bearer tokens. Cheap to clone; clones share the key cache.
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

struct Inner {
    issuer: String,
    audience: String,
    leeway_secs: i64,
    keys: KeyCache,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("issuer", &self.inner.issuer)
            .field("audience", &self.inner.audience)
            .field("keys", &self.inner.keys.stats())
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Validates the config and loads the JWKS. An empty issuer/audience, an unreachable
    /// JWKS or one without a usable key is an error: cluster mode fails closed.
    pub async fn new(config: AuthConfig) -> Result<Self> {
        if config.issuer.is_empty() || config.audience.is_empty() {
            return Err(Error::Config(
                "jwt issuer and audience must be set".to_owned(),
            ));
        }
        let leeway_secs = i64::try_from(config.leeway_secs)
            .map_err(|_| Error::Config("jwt leeway is out of range".to_owned()))?;
        let keys = KeyCache::load(
            config.jwks,
            config.refresh_min_interval,
            config.fetch_timeout,
        )
        .await?;
        Ok(Authenticator {
            inner: Arc::new(Inner {
                issuer: config.issuer,
                audience: config.audience,
                leeway_secs,
                keys,
            }),
        })
    }

    /// Verifies `token` (the bare JWT, without `Bearer `) and returns who it speaks for.
    pub async fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(AuthError::Malformed("token too long"));
        }
        let mut parts = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthError::Malformed("not three segments"));
        };
        let header = parse_header(header_b64)?;
        let alg = Alg::from_header(&header.alg)
            .ok_or_else(|| AuthError::AlgorithmNotAllowed(loggable(&header.alg)))?;
        if payload_b64.is_empty() || signature_b64.is_empty() {
            return Err(AuthError::Malformed("empty segment"));
        }

        let key = self.inner.keys.resolve(header.kid.as_deref()).await?;
        if key.alg != alg {
            return Err(AuthError::KeyAlgorithmMismatch {
                kid: key.kid_for_log(),
                alg: alg.as_str(),
            });
        }

        // RFC 7515 §5.2: the signing input is the two segments exactly as received.
        let signature = URL_SAFE_NO_PAD
            .decode(signature_b64)
            .map_err(|_| AuthError::Malformed("signature is not base64url"))?;
        let signing_input = &token[..header_b64.len() + 1 + payload_b64.len()];
        key.verify(alg, signing_input.as_bytes(), &signature)?;

        let payload = URL_SAFE_NO_PAD
            .decode(payload_b64)
            .map_err(|_| AuthError::Malformed("payload is not base64url"))?;
        let claims = parse_object(&payload).map_err(|e| match e {
            StrictError::NotAnObject => AuthError::Malformed("payload is not a JSON object"),
            StrictError::DuplicateMember => AuthError::Malformed("payload has a duplicate member"),
        })?;

        let expect = Expectations {
            issuer: &self.inner.issuer,
            audience: &self.inner.audience,
            leeway_secs: self.inner.leeway_secs,
        };
        claims::validate(&claims, &expect, unix_now())
    }

    /// Reloads the JWKS now, ignoring the rate limit (for an operator action or a periodic
    /// task). On failure the cached keys stay in use. Returns the number of usable keys.
    pub async fn refresh_keys(&self) -> Result<usize> {
        self.inner.keys.force_refresh().await
    }

    /// Load counters and the number of cached keys.
    pub fn key_stats(&self) -> JwksStats {
        self.inner.keys.stats()
    }
}

/// Extracts the token from an `Authorization` header value: the `Bearer` scheme is
/// case-insensitive (RFC 7235 §2.1) and surrounding whitespace is ignored. `None` for any
/// other scheme or an empty token.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let value = authorization.trim();
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

struct Header {
    alg: String,
    kid: Option<String>,
}

/// The only header parse: jsonwebtoken's `Header` cannot represent `alg: none` or unknown
/// algorithms, and we want those to fail as "algorithm not allowed", not as "malformed".
/// Members we do not name here (`typ`, `x5t`, and the key-carrying `jwk`, `jku`, `x5u`,
/// `x5c`) are ignored: keys only ever come from the configured JWKS, and nothing in a header
/// is ever fetched.
fn parse_header(b64: &str) -> Result<Header, AuthError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(b64)
        .map_err(|_| AuthError::Malformed("header is not base64url"))?;
    let map = parse_object(&bytes).map_err(|e| match e {
        StrictError::NotAnObject => AuthError::Malformed("header is not a JSON object"),
        StrictError::DuplicateMember => AuthError::Malformed("header has a duplicate member"),
    })?;
    let alg = match map.get("alg") {
        Some(Value::String(alg)) => alg.clone(),
        _ => return Err(AuthError::Malformed("header has no alg")),
    };
    let kid = match map.get("kid") {
        None | Some(Value::Null) => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(AuthError::Malformed("kid is not a string")),
    };
    if map.contains_key("crit") {
        return Err(AuthError::CriticalHeader);
    }
    // RFC 7519 §5.2: `cty: JWT` (compared case-insensitively) says the payload is another
    // JWT. We do not unwrap nested tokens, so reading the payload as claims would be wrong.
    if let Some(cty) = map.get("cty") {
        if cty.as_str().is_none_or(|c| c.eq_ignore_ascii_case("jwt")) {
            return Err(AuthError::UnsupportedHeader("cty"));
        }
    }
    // RFC 7797: with `b64: false` the payload is not base64url and the signing input differs.
    if map.get("b64").is_some_and(|b| b != &Value::Bool(true)) {
        return Err(AuthError::UnsupportedHeader("b64"));
    }
    Ok(Header { alg, kid })
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn bearer_token_parses_the_authorization_header() {
        assert_eq!(bearer_token("Bearer abc.def.ghi"), Some("abc.def.ghi"));
        assert_eq!(bearer_token("  bearer   abc  "), Some("abc"));
        assert_eq!(bearer_token("Basic dXNlcjpwdw=="), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearerabc"), None);
    }
}
