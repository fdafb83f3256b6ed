//! Credentials for a cluster on one machine (`lumina-backend cluster init-local`).
//!
//! Layout of `<AppRoot>/config/cluster/` (directory 0700):
//!
//! | file | mode | content |
//! |---|---|---|
//! | [`KEY_FILE`] | 0600 | Ed25519 private key, PKCS#8 PEM (`openssl pkey` reads it) |
//! | [`JWKS_FILE`] | 0644 | the public key as an OKP JWK (`kid`, `alg: EdDSA`, `use: sig`) |
//! | [`ADMIN_TOKEN_FILE`] | 0600 | a token with read, write and admin scopes for `sub: admin` |
//! | [`CLUSTER_FILE`] | 0644 | issuer, audience, tenant, kid — no secrets |
//!
//! The `kid` is the RFC 7638 thumbprint of the public key, so it is stable across re-runs
//! and changes exactly when the key does. Files are written to a temporary name and renamed,
//! so a verifier re-reading the JWKS never sees half a document.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::claims::{is_valid_tenant, unix_now, SCOPE_ADMIN, SCOPE_READ, SCOPE_WRITE};
use crate::error::{Error, Result};

/// The Ed25519 private key (PKCS#8 PEM).
pub const KEY_FILE: &str = "signing-key.pem";
/// The public JWKS verifiers load (`LUMINA_JWT_JWKS_FILE`).
pub const JWKS_FILE: &str = "jwks.json";
/// The admin bearer token (`LUMINA_JWT`).
pub const ADMIN_TOKEN_FILE: &str = "admin.jwt";
/// Non-secret metadata: issuer, audience, tenant, kid.
pub const CLUSTER_FILE: &str = "cluster.json";

const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";

/// What [`init_local`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalCluster {
    /// The credentials directory.
    pub dir: PathBuf,
    /// `<dir>/jwks.json`.
    pub jwks_path: PathBuf,
    /// `<dir>/admin.jwt`.
    pub admin_token_path: PathBuf,
    /// Issuer every local token carries.
    pub issuer: String,
    /// Audience every local token carries.
    pub audience: String,
    /// Tenant of the admin token.
    pub tenant: String,
    /// Key id of the signing key.
    pub kid: String,
}

impl LocalCluster {
    /// Two shell lines (each newline-terminated) that point a shell at these credentials:
    /// `export LUMINA_JWT_JWKS_FILE=<jwks path>` and `export LUMINA_JWT=$(cat <token path>)`.
    /// The token itself is never printed, so the output is safe in terminals and logs.
    pub fn export_lines(&self) -> String {
        format!(
            "export LUMINA_JWT_JWKS_FILE={}\nexport LUMINA_JWT=$(cat {})\n",
            shell_quote(&self.jwks_path),
            shell_quote(&self.admin_token_path)
        )
    }
}

#[derive(Serialize, Deserialize)]
struct ClusterMeta {
    issuer: String,
    audience: String,
    tenant: String,
    kid: String,
}

/// Creates (or reuses) the local signing key under `dir` and (re)writes the JWKS, an admin
/// token valid for `admin_ttl`, and `cluster.json`. An existing key is never replaced, so
/// tokens minted earlier keep verifying; an unreadable one is an error, not overwritten.
pub fn init_local(
    dir: &Path,
    tenant: &str,
    issuer: &str,
    audience: &str,
    admin_ttl: Duration,
) -> Result<LocalCluster> {
    if !is_valid_tenant(tenant) {
        return Err(Error::Config(
            "tenant must be 1-128 characters of [A-Za-z0-9._@-], not starting with '.'".into(),
        ));
    }
    if issuer.is_empty() || audience.is_empty() {
        return Err(Error::Config(
            "issuer and audience must not be empty".into(),
        ));
    }
    if admin_ttl.is_zero() {
        return Err(Error::Config(
            "admin token lifetime must be positive".into(),
        ));
    }
    create_private_dir(dir)?;

    let key_path = dir.join(KEY_FILE);
    let pkcs8 = if key_path.exists() {
        tighten_mode(&key_path, 0o600)?;
        read_pkcs8_pem(&key_path)?
    } else {
        let pkcs8 = generate_ed25519_pkcs8()?;
        write_atomic(&key_path, pem_encode(&pkcs8).as_bytes(), 0o600)?;
        pkcs8
    };
    let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&pkcs8).map_err(|_| Error::Key {
        path: key_path.clone(),
        reason: "not an Ed25519 PKCS#8 key",
    })?;
    let public = pair.public_key().as_ref();
    let kid = ed25519_kid(public);

    let jwks = json!({ "keys": [ed25519_jwk(public, &kid)] });
    let jwks_path = dir.join(JWKS_FILE);
    write_atomic(&jwks_path, &to_json_bytes(&jwks)?, 0o644)?;

    let claims = token_claims(
        issuer,
        audience,
        "admin",
        tenant,
        &[SCOPE_READ, SCOPE_WRITE, SCOPE_ADMIN],
        admin_ttl,
    );
    let token = sign_ed25519_pkcs8(&pkcs8, &kid, &claims)?;
    let admin_token_path = dir.join(ADMIN_TOKEN_FILE);
    write_atomic(&admin_token_path, token.as_bytes(), 0o600)?;

    let meta = ClusterMeta {
        issuer: issuer.to_owned(),
        audience: audience.to_owned(),
        tenant: tenant.to_owned(),
        kid: kid.clone(),
    };
    write_atomic(&dir.join(CLUSTER_FILE), &to_json_bytes(&meta)?, 0o644)?;

    tracing::info!(dir = %dir.display(), %kid, tenant, "local cluster credentials written");
    Ok(LocalCluster {
        dir: dir.to_owned(),
        jwks_path,
        admin_token_path,
        issuer: issuer.to_owned(),
        audience: audience.to_owned(),
        tenant: tenant.to_owned(),
        kid,
    })
}

/// Signs a token for `sub`/`tenant` with the key [`init_local`] stored in `dir`, using the
/// issuer and audience recorded in its `cluster.json`.
pub fn mint(dir: &Path, sub: &str, tenant: &str, scopes: &[&str], ttl: Duration) -> Result<String> {
    if sub.is_empty() || !is_valid_tenant(tenant) {
        return Err(Error::Config("sub must be set and tenant valid".into()));
    }
    let meta_path = dir.join(CLUSTER_FILE);
    let meta_bytes = std::fs::read(&meta_path).map_err(|e| Error::io("read", &meta_path, e))?;
    let meta: ClusterMeta = serde_json::from_slice(&meta_bytes)
        .map_err(|e| Error::Config(format!("{} is not valid: {e}", meta_path.display())))?;
    let key_path = dir.join(KEY_FILE);
    let pkcs8 = read_pkcs8_pem(&key_path)?;
    let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&pkcs8).map_err(|_| Error::Key {
        path: key_path,
        reason: "not an Ed25519 PKCS#8 key",
    })?;
    // The kid is recomputed rather than trusted from cluster.json, so a stale metadata file
    // cannot make us mint tokens that name the wrong key.
    let kid = ed25519_kid(pair.public_key().as_ref());
    let claims = token_claims(&meta.issuer, &meta.audience, sub, tenant, scopes, ttl);
    sign_ed25519_pkcs8(&pkcs8, &kid, &claims)
}

/// The standard claim set this crate's verifier expects: `iss`, `aud`, `sub`, `tenant`,
/// `scope` (space-joined), `iat`, `nbf` and `exp` = now + `ttl`.
pub fn token_claims(
    issuer: &str,
    audience: &str,
    sub: &str,
    tenant: &str,
    scopes: &[&str],
    ttl: Duration,
) -> Value {
    let now = unix_now();
    let ttl = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    json!({
        "iss": issuer,
        "aud": audience,
        "sub": sub,
        "tenant": tenant,
        "scope": scopes.join(" "),
        "iat": now,
        "nbf": now,
        "exp": now.saturating_add(ttl),
    })
}

/// Signs `claims` as an EdDSA JWT with `kid` in the header. `pkcs8` is an Ed25519 PKCS#8
/// document (v1 or v2, as ring or `openssl genpkey` produce).
pub fn sign_ed25519_pkcs8(pkcs8: &[u8], kid: &str, claims: &Value) -> Result<String> {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some(kid.to_owned());
    let key = jsonwebtoken::EncodingKey::from_ed_der(pkcs8);
    jsonwebtoken::encode(&header, claims, &key).map_err(|_| Error::Sign("Ed25519 signing failed"))
}

/// A fresh Ed25519 key as a PKCS#8 v2 document.
pub fn generate_ed25519_pkcs8() -> Result<Vec<u8>> {
    Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
        .map(|doc| doc.as_ref().to_vec())
        .map_err(|_| Error::Sign("Ed25519 key generation failed"))
}

/// The public JWK for a 32-byte Ed25519 public key.
pub fn ed25519_jwk(public_key: &[u8], kid: &str) -> Value {
    json!({
        "kty": "OKP",
        "crv": "Ed25519",
        "x": URL_SAFE_NO_PAD.encode(public_key),
        "kid": kid,
        "alg": "EdDSA",
        "use": "sig",
    })
}

/// RFC 7638 JWK thumbprint (SHA-256, base64url) of an Ed25519 public key: members in
/// lexicographic order, no whitespace.
pub fn ed25519_kid(public_key: &[u8]) -> String {
    let canonical = format!(
        r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
        URL_SAFE_NO_PAD.encode(public_key)
    );
    URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        canonical.as_bytes(),
    ))
}

fn to_json_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut bytes =
        serde_json::to_vec_pretty(value).map_err(|e| Error::Config(format!("serialize: {e}")))?;
    bytes.push(b'\n');
    Ok(bytes)
}

fn pem_encode(der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = String::with_capacity(b64.len() + 80);
    out.push_str(PEM_BEGIN);
    out.push('\n');
    // RFC 7468: 64-character lines. base64 output is ASCII, so byte chunks are whole chars.
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(PEM_END);
    out.push('\n');
    out
}

fn read_pkcs8_pem(path: &Path) -> Result<Vec<u8>> {
    let bad = |reason| Error::Key {
        path: path.to_owned(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
    let start = text
        .find(PEM_BEGIN)
        .ok_or_else(|| bad("no PKCS#8 PEM block"))?;
    let rest = &text[start + PEM_BEGIN.len()..];
    let end = rest
        .find(PEM_END)
        .ok_or_else(|| bad("unterminated PEM block"))?;
    let b64: String = rest[..end].chars().filter(|c| !c.is_whitespace()).collect();
    STANDARD
        .decode(b64)
        .map_err(|_| bad("PEM body is not base64"))
}

/// Double-quoting would still expand `$`; single quotes are inert, so paths with anything
/// beyond a safe set are single-quoted (with `'` spelled `'\''`).
fn shell_quote(path: &Path) -> String {
    let s = path.to_string_lossy();
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn create_private_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    set_mode(dir, 0o700)
}

/// A key file someone made group/world-readable is narrowed again rather than refused:
/// refusing would strand a working cluster, and the fix is unambiguous.
fn tighten_mode(path: &Path, mode: u32) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let meta = std::fs::metadata(path).map_err(|e| Error::io("stat", path, e))?;
        if meta.permissions().mode() & 0o777 & !mode != 0 {
            tracing::warn!(path = %path.display(), "signing key was readable by others; mode reset to 0600");
            set_mode(path, mode)?;
        }
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| Error::io("set permissions on", path, e))?;
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

/// Writes via a temporary file created with `mode` from the start (a secret is never
/// briefly world-readable), then renames over `path`.
fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(mode);
        }
        let mut file = options
            .open(&tmp)
            .map_err(|e| Error::io("create", &tmp, e))?;
        // A leftover temp file from a crashed run keeps its old mode; reset it explicitly.
        set_mode(&tmp, mode)?;
        file.write_all(bytes)
            .map_err(|e| Error::io("write", &tmp, e))?;
        file.sync_all().map_err(|e| Error::io("sync", &tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io("rename", path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_leaves_plain_paths_alone() {
        assert_eq!(
            shell_quote(Path::new("/home/a/.lumina/x.json")),
            "/home/a/.lumina/x.json"
        );
        assert_eq!(shell_quote(Path::new("/tmp/my dir/a")), "'/tmp/my dir/a'");
        assert_eq!(shell_quote(Path::new("/tmp/it's")), r"'/tmp/it'\''s'");
        assert_eq!(shell_quote(Path::new("/tmp/$HOME")), "'/tmp/$HOME'");
    }

    #[test]
    fn pem_round_trips() {
        let der: Vec<u8> = (0..=200u8).collect();
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("k.pem");
        std::fs::write(&path, pem_encode(&der)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_pkcs8_pem(&path).ok(), Some(der));
    }

    #[test]
    fn kid_is_the_rfc7638_thumbprint() {
        // RFC 8037 appendix A.3: thumbprint of the example Ed25519 public key.
        let x = URL_SAFE_NO_PAD
            .decode("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            ed25519_kid(&x),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
    }
}
