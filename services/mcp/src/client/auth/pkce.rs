//! PKCE (RFC 7636) with `S256`, and the `state` value of an authorization request.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// A code verifier and its `S256` challenge. `Debug` shows the challenge only.
pub struct Pkce {
    verifier: String,
    challenge: String,
}

impl Pkce {
    /// A fresh verifier: 32 random bytes, base64url (43 characters of the unreserved set).
    pub fn new() -> Self {
        Self::from_verifier(random_token(32))
    }

    /// The pair for a given verifier (tests, RFC 7636 Appendix B).
    pub fn from_verifier(verifier: String) -> Self {
        let challenge = challenge_s256(&verifier);
        Self {
            verifier,
            challenge,
        }
    }

    pub fn verifier(&self) -> &str {
        &self.verifier
    }

    pub fn challenge(&self) -> &str {
        &self.challenge
    }

    pub const METHOD: &'static str = "S256";
}

impl Default for Pkce {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkce")
            .field("challenge", &self.challenge)
            .finish_non_exhaustive()
    }
}

/// `BASE64URL(SHA256(ASCII(verifier)))`.
pub fn challenge_s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// `bytes` random bytes from the OS generator, base64url without padding.
pub fn random_token(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rngs::OsRng.fill_bytes(&mut buf);
    URL_SAFE_NO_PAD.encode(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7636_appendix_b() {
        let p = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into());
        assert_eq!(p.challenge(), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    }

    #[test]
    fn fresh_verifiers_are_long_unreserved_and_distinct() {
        let a = Pkce::new();
        let b = Pkce::new();
        assert_ne!(a.verifier(), b.verifier());
        assert_eq!(a.verifier().len(), 43);
        assert!(a
            .verifier()
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-._~".contains(&c)));
        assert_eq!(a.challenge(), challenge_s256(a.verifier()));
        assert!(!format!("{a:?}").contains(a.verifier()));
    }
}
