//! JWKS loading, key selection and the refresh-on-unknown-`kid` cache.
//!
//! Each usable JWK becomes a [`VerifyingKey`] bound to exactly one algorithm, derived from its
//! `kty`/`crv` and checked against its optional `alg`. That binding is what makes algorithm
//! confusion impossible: a token is only ever verified with the algorithm its key was
//! published for. Symmetric (`oct`) keys are never loaded at all.
//!
//! Refresh policy: a token whose `kid` is not cached triggers one reload, but at most one per
//! `refresh_min_interval` however many tokens ask, so random `kid`s cannot turn the verifier
//! into a traffic amplifier against the IdP. Concurrent callers wait on one reload.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::signature::{
    RsaPublicKeyComponents, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, ED25519,
    RSA_PKCS1_2048_8192_SHA256,
};
use serde::Deserialize;
use tokio::time::Instant;

use crate::error::{loggable, AuthError, Error, JwksProblem, Result};

/// A JWKS larger than this is refused: real ones are a few KiB.
const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// RSA keys below 2048 bits are refused at load (ring would refuse them at verify anyway).
const MIN_RSA_MODULUS_BYTES: usize = 256;

/// Where the JSON Web Key Set comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A local file, re-read on refresh (`cluster init-local`, mounted secrets).
    File(PathBuf),
    /// An `https://` URL (plain `http://` only for loopback hosts), re-fetched on refresh.
    Url(String),
}

impl JwksSource {
    /// A description safe for logs: a URL loses its userinfo, query and fragment.
    pub fn describe(&self) -> String {
        match self {
            JwksSource::File(path) => path.display().to_string(),
            JwksSource::Url(url) => redact_url(url),
        }
    }
}

/// Counters for diagnostics and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JwksStats {
    /// Successful loads, including the one at start.
    pub loads: u64,
    /// Failed load attempts (the previous keys stayed in use).
    pub failures: u64,
    /// Usable keys currently cached.
    pub keys: usize,
}

/// The JOSE algorithms we accept. Anything else never reaches key lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alg {
    Rs256,
    Es256,
    EdDsa,
}

impl Alg {
    /// Exact, case-sensitive match on the header's `alg` (RFC 7515 names are case-sensitive).
    pub fn from_header(alg: &str) -> Option<Alg> {
        match alg {
            "RS256" => Some(Alg::Rs256),
            "ES256" => Some(Alg::Es256),
            "EdDSA" => Some(Alg::EdDsa),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
            Alg::EdDsa => "EdDSA",
        }
    }
}

/// The public key material, in the form ring verifies with.
enum KeyMaterial {
    /// Big-endian modulus and exponent.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// Uncompressed SEC1 point (`0x04 || x || y`).
    P256(Vec<u8>),
    /// The 32-byte public key.
    Ed25519(Vec<u8>),
}

/// A public key usable for exactly one algorithm.
pub(crate) struct VerifyingKey {
    pub kid: Option<String>,
    pub alg: Alg,
    material: KeyMaterial,
}

impl VerifyingKey {
    pub fn kid_for_log(&self) -> String {
        self.kid
            .as_deref()
            .map_or_else(|| "<none>".to_owned(), loggable)
    }

    /// Checks `signature` over `message` with this key under `alg`. The algorithm/key pairing
    /// is matched here too, not only by the caller, so no combination can verify with a
    /// primitive the key was not published for; RSA moduli outside 2048-8192 bits are
    /// refused by ring as well.
    pub fn verify(&self, alg: Alg, message: &[u8], signature: &[u8]) -> Result<(), AuthError> {
        let verified = match (alg, &self.material) {
            (Alg::Rs256, KeyMaterial::Rsa { n, e }) => RsaPublicKeyComponents { n, e }
                .verify(&RSA_PKCS1_2048_8192_SHA256, message, signature)
                .is_ok(),
            (Alg::Es256, KeyMaterial::P256(point)) => {
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                    .verify(message, signature)
                    .is_ok()
            }
            (Alg::EdDsa, KeyMaterial::Ed25519(x)) => UnparsedPublicKey::new(&ED25519, x)
                .verify(message, signature)
                .is_ok(),
            _ => {
                return Err(AuthError::KeyAlgorithmMismatch {
                    kid: self.kid_for_log(),
                    alg: alg.as_str(),
                })
            }
        };
        if verified {
            Ok(())
        } else {
            Err(AuthError::BadSignature)
        }
    }
}

/// The fields of a JWK we look at; everything else is ignored.
#[derive(Deserialize)]
struct RawJwk {
    kty: String,
    kid: Option<String>,
    alg: Option<String>,
    #[serde(rename = "use")]
    use_: Option<String>,
    key_ops: Option<Vec<String>>,
    crv: Option<String>,
    n: Option<String>,
    e: Option<String>,
    x: Option<String>,
    y: Option<String>,
    d: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct RawJwkSet {
    keys: Vec<serde_json::Value>,
}

/// The usable keys of one JWKS document.
#[derive(Default)]
pub(crate) struct KeySet {
    keys: Vec<Arc<VerifyingKey>>,
}

pub(crate) enum Lookup {
    Found(Arc<VerifyingKey>),
    NotFound,
    KidRequired(usize),
}

impl KeySet {
    /// Parses a JWKS, skipping (and logging) entries we cannot or must not use, so one
    /// exotic key published by an IdP does not take the others down with it.
    pub fn parse(bytes: &[u8]) -> Result<KeySet, JwksProblem> {
        let raw: RawJwkSet = serde_json::from_slice(bytes).map_err(JwksProblem::NotJwks)?;
        let mut keys: Vec<Arc<VerifyingKey>> = Vec::with_capacity(raw.keys.len());
        for (index, value) in raw.keys.into_iter().enumerate() {
            let parsed = serde_json::from_value::<RawJwk>(value)
                .map_err(|_| JwksProblem::NotJwk)
                .and_then(convert);
            match parsed {
                Ok(key) => {
                    if keys.iter().any(|k| k.kid.is_some() && k.kid == key.kid) {
                        tracing::warn!(index, kid = %key.kid_for_log(), "jwks: duplicate kid, keeping the first");
                    } else {
                        keys.push(Arc::new(key));
                    }
                }
                Err(reason) => tracing::warn!(index, %reason, "jwks: skipping key"),
            }
        }
        Ok(KeySet { keys })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// `kid` selects by id; without one, a set of exactly one key is unambiguous.
    pub fn lookup(&self, kid: Option<&str>) -> Lookup {
        let found = match kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            None if self.keys.len() > 1 => return Lookup::KidRequired(self.keys.len()),
            None => self.keys.first(),
        };
        found.map_or(Lookup::NotFound, |k| Lookup::Found(Arc::clone(k)))
    }
}

fn convert(jwk: RawJwk) -> Result<VerifyingKey, JwksProblem> {
    if jwk.d.is_some() {
        // Still usable for verification, but someone published a private key.
        tracing::warn!(kid = ?jwk.kid.as_deref().map(loggable), "jwks: entry contains private key material; rotate it");
    }
    if let Some(u) = jwk.use_.as_deref() {
        if u != "sig" {
            return Err(JwksProblem::UseNotSig(loggable(u)));
        }
    }
    if let Some(ops) = &jwk.key_ops {
        if !ops.iter().any(|op| op == "verify") {
            return Err(JwksProblem::KeyOpsNoVerify);
        }
    }
    let (alg, material) = match (jwk.kty.as_str(), jwk.crv.as_deref()) {
        ("RSA", _) => {
            let n = b64_field(jwk.n.as_deref(), "n")?;
            let e = b64_field(jwk.e.as_deref(), "e")?;
            let significant = n.iter().skip_while(|b| **b == 0).count();
            if significant < MIN_RSA_MODULUS_BYTES {
                return Err(JwksProblem::RsaTooShort);
            }
            (Alg::Rs256, KeyMaterial::Rsa { n, e })
        }
        ("EC", Some("P-256")) => {
            let x = b64_field(jwk.x.as_deref(), "x")?;
            let y = b64_field(jwk.y.as_deref(), "y")?;
            if x.len() != 32 || y.len() != 32 {
                return Err(JwksProblem::P256Coordinates);
            }
            // ring takes the uncompressed SEC1 point and checks it is on the curve.
            let mut point = Vec::with_capacity(65);
            point.push(0x04);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            (Alg::Es256, KeyMaterial::P256(point))
        }
        ("OKP", Some("Ed25519")) => {
            let x = b64_field(jwk.x.as_deref(), "x")?;
            if x.len() != 32 {
                return Err(JwksProblem::Ed25519Length);
            }
            (Alg::EdDsa, KeyMaterial::Ed25519(x))
        }
        (kty, crv) => {
            return Err(JwksProblem::Unsupported {
                kty: loggable(kty),
                crv: crv.map_or_else(|| "-".to_owned(), loggable),
            })
        }
    };
    if let Some(declared) = jwk.alg.as_deref() {
        if declared != alg.as_str() {
            return Err(JwksProblem::AlgMismatch {
                declared: loggable(declared),
                alg: alg.as_str(),
            });
        }
    }
    Ok(VerifyingKey {
        kid: jwk.kid,
        alg,
        material,
    })
}

fn b64_field(value: Option<&str>, name: &'static str) -> Result<Vec<u8>, JwksProblem> {
    let value = value.ok_or(JwksProblem::MissingField(name))?;
    URL_SAFE_NO_PAD
        .decode(value)
        .map_err(|_| JwksProblem::NotBase64(name))
}

struct Snapshot {
    keys: KeySet,
    /// Bumped on every successful load so waiters can tell someone else refreshed.
    generation: u64,
}

/// The cached key set plus the refresh machinery.
pub(crate) struct KeyCache {
    source: JwksSource,
    http: Option<reqwest::Client>,
    min_interval: Duration,
    current: RwLock<Arc<Snapshot>>,
    /// Time of the last on-demand reload attempt; the mutex also serializes reloads.
    last_refresh: tokio::sync::Mutex<Option<Instant>>,
    loads: AtomicU64,
    failures: AtomicU64,
}

impl KeyCache {
    /// Loads the key set once; an unreachable or empty JWKS is a start-up error (fail closed).
    pub async fn load(
        source: JwksSource,
        min_interval: Duration,
        fetch_timeout: Duration,
    ) -> Result<KeyCache> {
        let http = match &source {
            JwksSource::File(_) => None,
            JwksSource::Url(url) => Some(http_client(url, fetch_timeout)?),
        };
        let cache = KeyCache {
            source,
            http,
            min_interval,
            current: RwLock::new(Arc::new(Snapshot {
                keys: KeySet::default(),
                generation: 0,
            })),
            last_refresh: tokio::sync::Mutex::new(None),
            loads: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        };
        cache.reload().await?;
        Ok(cache)
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        // A poisoned lock still holds a complete Arc (the swap is one assignment).
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn stats(&self) -> JwksStats {
        JwksStats {
            loads: self.loads.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            keys: self.snapshot().keys.len(),
        }
    }

    /// Finds the key for `kid`, refreshing once (rate-limited) when it is not cached.
    pub async fn resolve(&self, kid: Option<&str>) -> Result<Arc<VerifyingKey>, AuthError> {
        let snapshot = self.snapshot();
        match snapshot.keys.lookup(kid) {
            Lookup::Found(key) => return Ok(key),
            Lookup::KidRequired(n) => return Err(AuthError::KidRequired(n)),
            Lookup::NotFound => {}
        }
        self.refresh_on_miss(snapshot.generation).await;
        match self.snapshot().keys.lookup(kid) {
            Lookup::Found(key) => Ok(key),
            Lookup::KidRequired(n) => Err(AuthError::KidRequired(n)),
            Lookup::NotFound => Err(AuthError::UnknownKey(
                kid.map_or_else(|| "<none>".to_owned(), loggable),
            )),
        }
    }

    async fn refresh_on_miss(&self, seen_generation: u64) {
        let mut last = self.last_refresh.lock().await;
        if self.snapshot().generation != seen_generation {
            // Another caller reloaded while we waited for the lock: share its result.
            return;
        }
        if let Some(at) = *last {
            if at.elapsed() < self.min_interval {
                tracing::debug!("jwks refresh skipped: rate-limited");
                return;
            }
        }
        *last = Some(Instant::now());
        if let Err(error) = self.reload().await {
            tracing::warn!(%error, "jwks refresh failed; keeping cached keys");
        }
    }

    /// Reloads now, ignoring the rate limit (operator action or a periodic task).
    pub async fn force_refresh(&self) -> Result<usize> {
        let mut last = self.last_refresh.lock().await;
        *last = Some(Instant::now());
        self.reload().await
    }

    async fn reload(&self) -> Result<usize> {
        let outcome = self.fetch_and_parse().await;
        let keys = match outcome {
            Ok(keys) => keys,
            Err(reason) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                return Err(Error::Jwks {
                    origin: self.source.describe(),
                    reason,
                });
            }
        };
        let count = keys.len();
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        let generation = current.generation + 1;
        *current = Arc::new(Snapshot { keys, generation });
        drop(current);
        self.loads.fetch_add(1, Ordering::Relaxed);
        tracing::info!(source = %self.source.describe(), keys = count, "jwks loaded");
        Ok(count)
    }

    async fn fetch_and_parse(&self) -> Result<KeySet, JwksProblem> {
        let bytes = match (&self.source, &self.http) {
            (JwksSource::File(path), _) => read_file(path).await?,
            (JwksSource::Url(url), Some(client)) => fetch_url(client, url).await?,
            (JwksSource::Url(_), None) => return Err(JwksProblem::NoHttpClient),
        };
        let keys = KeySet::parse(&bytes)?;
        // An empty set is far more likely a broken deploy than a wish to reject everyone.
        if keys.len() == 0 {
            return Err(JwksProblem::NoUsableKey);
        }
        Ok(keys)
    }
}

async fn read_file(path: &std::path::Path) -> Result<Vec<u8>, JwksProblem> {
    let bytes = tokio::fs::read(path).await.map_err(JwksProblem::Read)?;
    if bytes.len() > MAX_JWKS_BYTES {
        return Err(JwksProblem::TooLarge(MAX_JWKS_BYTES));
    }
    Ok(bytes)
}

async fn fetch_url(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, JwksProblem> {
    // `without_url` because the URL may carry credentials in its query.
    let mut response = client
        .get(url)
        .header(
            reqwest::header::ACCEPT,
            "application/json, application/jwk-set+json",
        )
        .send()
        .await
        .map_err(|e| JwksProblem::Request(e.without_url()))?;
    if !response.status().is_success() {
        return Err(JwksProblem::Status(response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| JwksProblem::Body(e.without_url()))?
    {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(JwksProblem::TooLarge(MAX_JWKS_BYTES));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Signing keys fetched over plaintext could be swapped by anyone on the path, so `http://`
/// is accepted only for loopback (tests, a sidecar IdP).
fn http_client(url: &str, timeout: Duration) -> Result<reqwest::Client> {
    let bad = |reason: &str| Error::Config(format!("jwks url {}: {reason}", redact_url(url)));
    let parsed = reqwest::Url::parse(url).map_err(|_| bad("not a valid URL"))?;
    match parsed.scheme() {
        "https" => {}
        "http" if is_loopback(&parsed) => {}
        "http" => {
            return Err(bad(
                "http:// is only allowed for loopback hosts; use https://",
            ))
        }
        _ => return Err(bad("scheme must be https")),
    }
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        // Discovery documents publish the final jwks_uri; following redirects would only
        // widen where keys can come from (and could downgrade to http).
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| bad(&format!("http client: {}", e.without_url())))
}

fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            // Both setters only fail for cannot-be-a-base URLs, which have no userinfo.
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "<unparseable url>".to_owned(),
    }
}
