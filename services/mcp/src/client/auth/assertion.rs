//! `private_key_jwt` client authentication (RFC 7523 §2.2, used by the `client_credentials`
//! extension): a short-lived JWT signed with the client's private key, `iss` = `sub` = the
//! client id, `aud` = the authorization server's issuer.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use lumina_config::Secret;
use serde::Serialize;

use super::error::AuthError;
use super::pkce::random_token;

pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// Lifetime of an assertion.
const LIFETIME_SECS: u64 = 300;

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
    jti: String,
}

/// A PEM private key (PKCS#8) and its JWS algorithm (`ES256` by default). `Debug` redacts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKey {
    pub private_key_pem: Secret,
    /// `ES256`, `ES384`, `RS256`, `PS256`, `EdDSA`, ...
    pub algorithm: String,
}

/// The signed assertion for `client_id` towards `audience`.
pub fn client_assertion(
    key: &SigningKey,
    client_id: &str,
    audience: &str,
) -> Result<String, AuthError> {
    let fail = |what: &str| AuthError::failed(format!("cannot sign the client assertion: {what}"));
    let alg: Algorithm = key
        .algorithm
        .parse()
        .map_err(|_| fail("unknown signing algorithm"))?;
    let pem = key.private_key_pem.expose().as_bytes();
    let encoding = match alg {
        Algorithm::ES256 | Algorithm::ES384 => EncodingKey::from_ec_pem(pem),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(pem),
        _ => EncodingKey::from_rsa_pem(pem),
    }
    .map_err(|_| fail("the private key is not a PEM key for that algorithm"))?;
    let iat = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let claims = Claims {
        iss: client_id,
        sub: client_id,
        aud: audience,
        iat,
        exp: iat + LIFETIME_SECS,
        jti: random_token(16),
    };
    jsonwebtoken::encode(&Header::new(alg), &claims, &encoding).map_err(|_| fail("signing failed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_keys_fail_without_echoing_them() {
        let key = SigningKey {
            private_key_pem: Secret::new(
                "-----BEGIN PRIVATE KEY-----\nnot-a-key\n-----END PRIVATE KEY-----",
            ),
            algorithm: "ES256".into(),
        };
        let err = client_assertion(&key, "c", "https://as")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("not-a-key"), "{err}");
        assert!(!format!("{key:?}").contains("not-a-key"));
        let unknown = SigningKey {
            algorithm: "nope".into(),
            ..key
        };
        assert!(client_assertion(&unknown, "c", "https://as").is_err());
    }
}
