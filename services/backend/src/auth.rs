//! Local-profile authentication: one random bearer token, compared in constant time.

use axum::http::{header::AUTHORIZATION, HeaderMap};
use lumina_protocol::methods::Identity;
use subtle::ConstantTimeEq;

pub struct LocalAuth {
    token: String,
}

impl LocalAuth {
    pub fn new(token: String) -> Self {
        Self { token }
    }

    /// A fresh random token (256 bits, hex).
    pub fn generate_token() -> String {
        let bytes: [u8; 32] = rand::random();
        hex::encode(bytes)
    }

    /// The identity for a request carrying the right `Authorization: Bearer` header.
    pub fn authenticate(&self, headers: &HeaderMap) -> Option<Identity> {
        let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
        let presented = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))?
            .trim();
        let equal: bool = presented.as_bytes().ct_eq(self.token.as_bytes()).into();
        equal.then(local_identity)
    }
}

/// The local profile's one tenant (its sessions, its approvals audit).
pub const LOCAL_TENANT: &str = "local";

/// The identity of the local profile's single user: every scope.
pub fn local_identity() -> Identity {
    use lumina_protocol::Scope;
    Identity {
        sub: "local".into(),
        tenant: LOCAL_TENANT.into(),
        scopes: [Scope::Read, Scope::Write, Scope::Admin]
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, value.parse().unwrap());
        h
    }

    #[test]
    fn accepts_only_the_exact_token() {
        let auth = LocalAuth::new("abc123".into());
        assert!(auth.authenticate(&headers("Bearer abc123")).is_some());
        assert!(auth.authenticate(&headers("Bearer abc124")).is_none());
        assert!(auth.authenticate(&headers("Bearer abc1234")).is_none());
        assert!(auth.authenticate(&headers("Basic abc123")).is_none());
        assert!(auth.authenticate(&HeaderMap::new()).is_none());
    }
}
