//! Error types: [`AuthError`] for a refused token, [`Error`] for setup (JWKS loading, local
//! credentials).
//!
//! Neither ever carries a token, a private key or a JWKS URL's credentials. Strings taken
//! from a token (`alg`, `kid`, `iss`) are attacker-controlled, so they are truncated and
//! escaped before they reach a log line.

use std::path::PathBuf;

/// The only text a caller may show to the client for any refused token (the 401 body).
pub const PUBLIC_MESSAGE: &str = "invalid or expired token";

/// Why a bearer token was refused.
///
/// `Display` names the reason and is meant for logs; it never includes the token. Clients
/// must only ever see [`AuthError::public_message`], which is identical for every variant
/// so the response does not help anyone probe which check failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// Not three base64url segments, undecodable JSON, oversized, etc.
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// The header's `alg` is not RS256, ES256 or EdDSA (this covers `none` and every HS*).
    #[error("token algorithm {0} is not allowed")]
    AlgorithmNotAllowed(String),
    /// The header has a `crit` extension; we implement none, so RFC 7515 §4.1.11 says reject.
    #[error("token header has unsupported critical extensions")]
    CriticalHeader,
    /// A header parameter this verifier does not implement and must not ignore: `cty: JWT`
    /// (a nested token) or `b64: false` (an unencoded payload, RFC 7797).
    #[error("token header parameter {0} is not supported")]
    UnsupportedHeader(&'static str),
    /// No `kid` in the header but the key set holds several keys.
    #[error("token has no kid and the key set holds {0} keys")]
    KidRequired(usize),
    /// No key with this `kid`, even after the (rate-limited) refresh.
    #[error("no verification key for kid {0}")]
    UnknownKey(String),
    /// The key found for `kid` is of another type or declared for another algorithm.
    #[error("key {kid} cannot verify {alg} tokens")]
    KeyAlgorithmMismatch {
        /// The key's id (escaped).
        kid: String,
        /// The token's algorithm.
        alg: &'static str,
    },
    /// The signature does not verify with the selected key.
    #[error("signature verification failed")]
    BadSignature,
    /// `exp` (plus leeway) is in the past.
    #[error("token expired at {exp} (now {now})")]
    Expired {
        /// The token's `exp`, unix seconds.
        exp: i64,
        /// The verifier's clock, unix seconds.
        now: i64,
    },
    /// `nbf` (minus leeway) is in the future.
    #[error("token not valid before {nbf} (now {now})")]
    NotYetValid {
        /// The token's `nbf`, unix seconds.
        nbf: i64,
        /// The verifier's clock, unix seconds.
        now: i64,
    },
    /// `iss` is not the configured issuer.
    #[error("issuer {0} is not the configured issuer")]
    WrongIssuer(String),
    /// `aud` does not contain the configured audience.
    #[error("audience does not include the configured audience")]
    WrongAudience,
    /// A mandatory claim (`exp`, `iss`, `aud`, `sub`, `tenant`) is absent.
    #[error("required claim {0} is missing")]
    MissingClaim(&'static str),
    /// The token grants none of the `lumina:*` scopes (`scope`/`scp` absent, empty or
    /// foreign only), so it could not be used for anything.
    #[error("token grants no lumina scope")]
    MissingScope,
    /// A claim is present but has the wrong type or an unacceptable value.
    #[error("claim {0} has an invalid value")]
    InvalidClaim(&'static str),
}

impl AuthError {
    /// The text for the client: always [`PUBLIC_MESSAGE`], whatever the reason.
    pub fn public_message(&self) -> &'static str {
        PUBLIC_MESSAGE
    }
}

/// Errors from building an [`crate::Authenticator`] or managing local cluster credentials.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or directory operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What we were doing ("read", "write", "create directory", ...).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The JWKS could not be fetched or holds no usable key. `source` is a redacted
    /// description (a URL loses userinfo and query) in `origin`.
    #[error("jwks from {origin}: {reason}")]
    Jwks {
        /// Where the JWKS came from, redacted.
        origin: String,
        /// What went wrong.
        reason: JwksProblem,
    },
    /// A stored private key could not be parsed (its content is never included).
    #[error("signing key {}: {reason}", path.display())]
    Key {
        /// The key file.
        path: PathBuf,
        /// What went wrong.
        reason: &'static str,
    },
    /// A configuration value or argument is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Producing a signature failed.
    #[error("signing failed: {0}")]
    Sign(&'static str),
}

/// Why a JWKS, or one key in it, is unusable. Attacker-controlled strings in it went
/// through [`loggable`]; none carries a URL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JwksProblem {
    #[error("not a JWKS document: {0}")]
    NotJwks(serde_json::Error),
    #[error("not a JWK object")]
    NotJwk,
    #[error("use {0} is not sig")]
    UseNotSig(String),
    #[error("key_ops does not allow verify")]
    KeyOpsNoVerify,
    #[error("RSA modulus shorter than 2048 bits")]
    RsaTooShort,
    #[error("P-256 coordinates must be 32 bytes")]
    P256Coordinates,
    #[error("Ed25519 public key must be 32 bytes")]
    Ed25519Length,
    #[error("unsupported key type {kty} / curve {crv}")]
    Unsupported { kty: String, crv: String },
    #[error("alg {declared} does not match a {alg} key")]
    AlgMismatch { declared: String, alg: &'static str },
    #[error("missing {0}")]
    MissingField(&'static str),
    #[error("{0} is not base64url")]
    NotBase64(&'static str),
    #[error("no HTTP client")]
    NoHttpClient,
    #[error("no usable signing key (RS256, ES256 or EdDSA)")]
    NoUsableKey,
    #[error("read failed: {0}")]
    Read(std::io::Error),
    #[error("larger than {0} bytes")]
    TooLarge(usize),
    /// The request failed; the error was stripped of its URL.
    #[error("request failed: {0}")]
    Request(reqwest::Error),
    #[error("HTTP status {0}")]
    Status(reqwest::StatusCode),
    /// Reading the body failed; the error was stripped of its URL.
    #[error("body read failed: {0}")]
    Body(reqwest::Error),
}

/// Result with this crate's setup [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Makes an attacker-controlled string safe for a log line: at most 64 characters, quoted,
/// control characters escaped.
pub(crate) fn loggable(s: &str) -> String {
    const MAX: usize = 64;
    let mut cut: String = s.chars().take(MAX).collect();
    if s.chars().count() > MAX {
        cut.push('…');
    }
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_message_is_identical_for_every_reason() {
        let errors = [
            AuthError::Malformed("segments"),
            AuthError::AlgorithmNotAllowed(loggable("none")),
            AuthError::BadSignature,
            AuthError::Expired { exp: 1, now: 2 },
            AuthError::UnknownKey(loggable("k")),
        ];
        for e in errors {
            assert_eq!(e.public_message(), "invalid or expired token");
            assert_ne!(
                e.to_string(),
                PUBLIC_MESSAGE,
                "display must name the reason"
            );
        }
    }

    #[test]
    fn loggable_truncates_and_escapes() {
        assert_eq!(loggable("a\nb"), "\"a\\nb\"");
        let long = "x".repeat(100);
        let out = loggable(&long);
        assert_eq!(out.chars().count(), 64 + 3);
        assert!(out.ends_with("…\""));
    }
}
