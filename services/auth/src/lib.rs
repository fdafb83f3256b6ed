//! Bearer-token authentication for the cluster profile: JWT verification against a JWKS,
//! scopes and tenants, and the self-contained credentials `cluster init-local` writes.
//!
//! What this crate owns (SYSTEM.md §6 "Auth"):
//!
//! - [`Authenticator`] verifies a JWT and yields a [`Principal`] (`sub`, `tenant`, scopes,
//!   expiry). Only RS256, ES256 and EdDSA are accepted; the algorithm must match the key's
//!   type, `exp`, `iss`, `aud`, `sub` and `tenant` are mandatory, and the token must grant
//!   at least one `lumina:*` scope. Header and claims must be canonical base64url and JSON
//!   objects without duplicate members; `crit`, nested tokens (`cty: JWT`) and `b64: false`
//!   are refused, and keys embedded in or linked from a header are never used. Keys come
//!   from a JWKS file or URL, cached and refreshed (rate-limited) when a token names an
//!   unknown `kid`.
//! - [`AuthError`] says why a token was refused for logs, while
//!   [`AuthError::public_message`] is the same opaque text for every refusal, so callers can
//!   put it in a 401 body without becoming an oracle.
//! - [`init_local`] / [`mint`] create and use an Ed25519 signing key under
//!   `<AppRoot>/config/cluster/` so a multi-process cluster runs on one machine with no IdP.
//!
//! It does not own transport concerns (reading the `Authorization` header, HTTP status
//! codes) nor authorization decisions beyond [`Principal::has_scope`]; the backend does.

mod claims;
mod error;
mod json;
mod jwks;
mod local;
mod verify;

pub use claims::{Principal, SCOPE_ADMIN, SCOPE_READ, SCOPE_WRITE};
pub use error::{AuthError, Error, JwksProblem, Result, PUBLIC_MESSAGE};
pub use jwks::{JwksSource, JwksStats};
pub use local::{
    ed25519_jwk, ed25519_kid, generate_ed25519_pkcs8, init_local, mint, sign_ed25519_pkcs8,
    token_claims, LocalCluster, ADMIN_TOKEN_FILE, CLUSTER_FILE, JWKS_FILE, KEY_FILE,
};
pub use verify::{
    bearer_token, AuthConfig, Authenticator, DEFAULT_FETCH_TIMEOUT, DEFAULT_LEEWAY_SECS,
    DEFAULT_REFRESH_MIN_INTERVAL, MAX_TOKEN_LEN,
};
