//! The signed peer channel between Lumina deployments (docs/a2a.md#the-signed-peer-channel),
//! done once: the [`Signer`] that puts a signature on an outbound call and the [`Verifier`]
//! that checks one share the canonical string ([`Claims::canonical`]), the header codec
//! ([`Signed::headers`] / [`Signed::from_headers`]) and the key derivation
//! ([`derive_key`]), so the two sides cannot drift.
//!
//! A signature covers `node\nts\nnonce\nscope\naudience`: who signs, when (Unix seconds), a
//! random nonce, what the call may do (`a2a:read`, `a2a:write`) and the node it is meant
//! for (the receiving deployment's `peer.node`), so a call presented to another deployment
//! that trusts the same signer is refused there. Keys, strongest first:
//! Ed25519 (the node's private key; verifiers hold its public key), HMAC-SHA256 with a
//! per-node key derived by HKDF-SHA256 from a master secret, HMAC-SHA256 with a key the
//! fleet shares. A signer uses the strongest key it has; a verifier accepts from a node
//! only the strongest kind it can check for that node, so a weaker signature is a
//! downgrade and refused. A timestamp outside the window and a nonce already seen (the
//! bounded [`NonceMemory`]) are refused too. Every refusal is the one opaque [`Refused`];
//! the reason is logged (never a key or a signature).
//!
//! Keys come only from the settings (`peer`, [`lumina_config::PeerSettings`]) as
//! [`lumina_config::Secret`]s.

mod keys;
mod nonce;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use lumina_config::{is_token, PeerSettings, PEER_SCOPES};
use ring::hmac;
use ring::signature::{Ed25519KeyPair, KeyPair as _, UnparsedPublicKey, ED25519};

pub use keys::{derive_key, derive_key_base64, generate_ed25519, Ed25519Pair};
pub use nonce::NonceMemory;

/// The signing node's name.
pub const HEADER_NODE: &str = "lumina-peer-node";
/// Unix seconds of the signature.
pub const HEADER_TS: &str = "lumina-peer-ts";
/// A random token, 16–128 characters of `A-Z a-z 0-9 . _ -`, used once.
pub const HEADER_NONCE: &str = "lumina-peer-nonce";
/// What the call may do: `a2a:read` or `a2a:write`.
pub const HEADER_SCOPE: &str = "lumina-peer-scope";
/// The node the call is meant for.
pub const HEADER_AUDIENCE: &str = "lumina-peer-audience";
/// The key kind: `ed25519`, `hmac-derived` or `hmac-shared`.
pub const HEADER_ALG: &str = "lumina-peer-alg";
/// The signature over the canonical string, base64url without padding.
pub const HEADER_SIGNATURE: &str = "lumina-peer-signature";

/// Scope of read calls (get, list, subscribe).
pub const SCOPE_READ: &str = "a2a:read";
/// Scope of calls that change something (send, cancel).
pub const SCOPE_WRITE: &str = "a2a:write";

/// Errors in the peer settings (at start-up). They name the field, never its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("peer settings: `{field}` {problem}")]
    Key {
        field: String,
        problem: &'static str,
    },
    #[error("no system randomness for a peer nonce")]
    Random,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A signed call is refused. Deliberately without detail: the reason is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("peer signature refused")]
pub struct Refused;

/// The kinds of key, weakest first (so `Ord` is the preference).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyKind {
    Shared,
    Derived,
    Ed25519,
}

impl KeyKind {
    /// The `Lumina-Peer-Alg` value.
    pub fn wire_name(self) -> &'static str {
        match self {
            Self::Shared => "hmac-shared",
            Self::Derived => "hmac-derived",
            Self::Ed25519 => "ed25519",
        }
    }

    fn from_wire(name: &str) -> Option<Self> {
        [Self::Shared, Self::Derived, Self::Ed25519]
            .into_iter()
            .find(|k| k.wire_name() == name)
    }
}

/// What a signature covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub node: String,
    pub ts: i64,
    pub nonce: String,
    pub scope: String,
    /// The node the call is meant for: the receiver's `peer.node`.
    pub audience: String,
}

impl Claims {
    /// `node\nts\nnonce\nscope\naudience`: the one canonical string both sides sign. No
    /// field can hold a newline (they are checked tokens and digits), so it is unambiguous.
    pub fn canonical(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}\n{}",
            self.node, self.ts, self.nonce, self.scope, self.audience
        )
    }
}

/// A signature with its claims, as carried in the headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub claims: Claims,
    pub kind: KeyKind,
    pub signature: Vec<u8>,
}

/// Why a signed call was refused (logged, never answered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    Malformed,
    UnknownNode,
    NoKey,
    Downgrade,
    Window,
    Signature,
    Scope,
    Audience,
    Replay,
    Full,
}

impl Why {
    fn as_str(self) -> &'static str {
        match self {
            Self::Malformed => "malformed headers",
            Self::UnknownNode => "unknown node",
            Self::NoKey => "no key for the node",
            Self::Downgrade => "weaker key kind than configured for the node",
            Self::Window => "timestamp outside the window",
            Self::Signature => "bad signature",
            Self::Scope => "scope not granted to the node",
            Self::Audience => "signed for another node (or this node has no name)",
            Self::Replay => "nonce already used",
            Self::Full => "nonce memory full",
        }
    }
}

impl Signed {
    /// The seven headers (lower-case names) carrying this signature.
    pub fn headers(&self) -> [(&'static str, String); 7] {
        [
            (HEADER_NODE, self.claims.node.clone()),
            (HEADER_TS, self.claims.ts.to_string()),
            (HEADER_NONCE, self.claims.nonce.clone()),
            (HEADER_SCOPE, self.claims.scope.clone()),
            (HEADER_AUDIENCE, self.claims.audience.clone()),
            (HEADER_ALG, self.kind.wire_name().to_owned()),
            (HEADER_SIGNATURE, URL_SAFE_NO_PAD.encode(&self.signature)),
        ]
    }

    /// Reads a signature from headers (`get` answers a header by lower-case name, `None`
    /// when absent or repeated). Anything not exactly well-formed is refused.
    fn from_headers<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Result<Self, Why> {
        let field = |name: &str| get(name).map(str::trim).ok_or(Why::Malformed);
        let node = field(HEADER_NODE)?;
        let ts = field(HEADER_TS)?;
        let nonce = field(HEADER_NONCE)?;
        let scope = field(HEADER_SCOPE)?;
        let audience = field(HEADER_AUDIENCE)?;
        let kind = KeyKind::from_wire(field(HEADER_ALG)?).ok_or(Why::Malformed)?;
        let signature = URL_SAFE_NO_PAD
            .decode(field(HEADER_SIGNATURE)?)
            .map_err(|_| Why::Malformed)?;
        let digits = !ts.is_empty() && ts.len() <= 12 && ts.bytes().all(|b| b.is_ascii_digit());
        let ts: i64 = match digits {
            true => ts.parse().map_err(|_| Why::Malformed)?,
            false => return Err(Why::Malformed),
        };
        let wanted_len = match kind {
            KeyKind::Ed25519 => 64,
            KeyKind::Derived | KeyKind::Shared => 32,
        };
        if !is_token(node)
            || !is_token(audience)
            || !is_token(nonce)
            || nonce.len() < 16
            || !PEER_SCOPES.contains(&scope)
            || signature.len() != wanted_len
        {
            return Err(Why::Malformed);
        }
        Ok(Self {
            claims: Claims {
                node: node.to_owned(),
                ts,
                nonce: nonce.to_owned(),
                scope: scope.to_owned(),
                audience: audience.to_owned(),
            },
            kind,
            signature,
        })
    }
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

enum SigningKey {
    Ed25519(Ed25519KeyPair),
    Hmac(KeyKind, hmac::Key),
}

/// Signs this deployment's outbound calls with its strongest key.
pub struct Signer {
    node: String,
    key: SigningKey,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("node", &self.node)
            .field("kind", &self.kind())
            .finish()
    }
}

impl Signer {
    /// The signer the settings describe: `None` without a node name or without a key.
    /// Preference: `ed25519_private_key` > `derived_key` (or the key derived from
    /// `derive_master`) > `shared_key`.
    pub fn from_settings(settings: &PeerSettings) -> Result<Option<Self>> {
        let Some(node) = settings.node.clone() else {
            return Ok(None);
        };
        let key = if let Some(seed) = &settings.ed25519_private_key {
            SigningKey::Ed25519(keys::ed25519_pair(seed, "peer.ed25519_private_key")?)
        } else if let Some(derived) = &settings.derived_key {
            let bytes = keys::decode32(derived.expose(), "peer.derived_key")?;
            SigningKey::Hmac(KeyKind::Derived, hmac_key(&bytes))
        } else if let Some(master) = &settings.derive_master {
            let master = keys::secret_bytes(master, "peer.derive_master")?;
            SigningKey::Hmac(KeyKind::Derived, hmac_key(&derive_key(master, &node)))
        } else if let Some(shared) = &settings.shared_key {
            let shared = keys::secret_bytes(shared, "peer.shared_key")?;
            SigningKey::Hmac(KeyKind::Shared, hmac_key(shared))
        } else {
            return Ok(None);
        };
        Ok(Some(Self { node, key }))
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    pub fn kind(&self) -> KeyKind {
        match &self.key {
            SigningKey::Ed25519(_) => KeyKind::Ed25519,
            SigningKey::Hmac(kind, _) => *kind,
        }
    }

    /// A fresh signature for one call with `scope` to the node `audience` (the receiver's
    /// `peer.node`), at `now` (Unix seconds).
    pub fn sign_at(&self, scope: &str, audience: &str, now: i64) -> Result<Signed> {
        let mut nonce = [0u8; 16];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
            .map_err(|_| Error::Random)?;
        let claims = Claims {
            node: self.node.clone(),
            ts: now,
            nonce: hex::encode(nonce),
            scope: scope.to_owned(),
            audience: audience.to_owned(),
        };
        Ok(self.sign_claims(claims))
    }

    /// A fresh signature for one call with `scope` to `audience`, now.
    pub fn sign(&self, scope: &str, audience: &str) -> Result<Signed> {
        self.sign_at(scope, audience, now_secs())
    }

    fn sign_claims(&self, claims: Claims) -> Signed {
        let message = claims.canonical();
        let signature = match &self.key {
            SigningKey::Ed25519(pair) => pair.sign(message.as_bytes()).as_ref().to_vec(),
            SigningKey::Hmac(_, key) => hmac::sign(key, message.as_bytes()).as_ref().to_vec(),
        };
        Signed {
            claims,
            kind: self.kind(),
            signature,
        }
    }
}

fn hmac_key(bytes: &[u8]) -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, bytes)
}

struct Node {
    ed25519: Option<Vec<u8>>,
    scopes: Vec<String>,
}

/// A call whose signature was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub node: String,
    pub scope: String,
    pub kind: KeyKind,
}

/// Checks the signatures of inbound calls from the nodes the settings list.
pub struct Verifier {
    /// This node's name (`peer.node`): the audience a signature must name. Without one
    /// every signature is refused.
    own: Option<String>,
    shared: Option<hmac::Key>,
    master: Option<Vec<u8>>,
    nodes: HashMap<String, Node>,
    window: i64,
    nonces: Mutex<NonceMemory>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut nodes: Vec<&String> = self.nodes.keys().collect();
        nodes.sort();
        f.debug_struct("Verifier")
            .field("nodes", &nodes)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    pub fn from_settings(settings: &PeerSettings) -> Result<Self> {
        let shared = match &settings.shared_key {
            Some(s) => Some(hmac_key(keys::secret_bytes(s, "peer.shared_key")?)),
            None => None,
        };
        let master = match &settings.derive_master {
            Some(s) => Some(keys::secret_bytes(s, "peer.derive_master")?.to_vec()),
            None => None,
        };
        let mut nodes = HashMap::new();
        for (name, node) in &settings.nodes {
            let ed25519 = match &node.ed25519_public_key {
                Some(key) => Some(
                    keys::decode32(key, &format!("peer.nodes.{name}.ed25519_public_key"))?.to_vec(),
                ),
                None => None,
            };
            nodes.insert(
                name.clone(),
                Node {
                    ed25519,
                    scopes: node.scopes.clone(),
                },
            );
        }
        Ok(Self {
            own: settings.node.clone(),
            shared,
            master,
            nodes,
            window: i64::try_from(settings.window_secs.max(1)).unwrap_or(i64::MAX),
            nonces: Mutex::new(NonceMemory::new(settings.nonce_capacity)),
        })
    }

    /// Whether any node may call (otherwise every signed call is refused).
    pub fn accepts_any(&self) -> bool {
        !self.nodes.is_empty()
    }

    /// Checks the signature in the headers now. `get` answers a header by lower-case name
    /// (`None` when absent or repeated).
    pub fn verify<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> Result<Verified, Refused> {
        self.verify_at(get, now_secs())
    }

    /// [`Self::verify`] at `now` (Unix seconds).
    pub fn verify_at<'a>(
        &self,
        get: impl Fn(&str) -> Option<&'a str>,
        now: i64,
    ) -> Result<Verified, Refused> {
        let mut node = None;
        let result = Signed::from_headers(get).and_then(|signed| {
            node = Some(signed.claims.node.clone());
            let verified = self.check(&signed, now)?;
            // Only signatures that verified reach the memory, so strangers cannot fill it.
            let mut nonces = self.nonces.lock().map_err(|_| Why::Full)?;
            nonces.remember(
                &signed.claims.node,
                &signed.claims.nonce,
                now,
                2 * self.window,
            )?;
            Ok(verified)
        });
        result.map_err(|why| refused(node.as_deref(), why))
    }

    /// Checks everything but replay: the caller remembers the nonce elsewhere (the cluster
    /// shares one memory in Redis) and must refuse a call whose nonce it has seen —
    /// [`Unspent::spend`] with the answer of its memory.
    pub fn verify_unspent<'a>(
        &self,
        get: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Unspent, Refused> {
        self.verify_unspent_at(get, now_secs())
    }

    /// [`Self::verify_unspent`] at `now` (Unix seconds).
    pub fn verify_unspent_at<'a>(
        &self,
        get: impl Fn(&str) -> Option<&'a str>,
        now: i64,
    ) -> Result<Unspent, Refused> {
        let mut node = None;
        let result = Signed::from_headers(get).and_then(|signed| {
            node = Some(signed.claims.node.clone());
            let verified = self.check(&signed, now)?;
            Ok(Unspent {
                verified,
                nonce: signed.claims.nonce.clone(),
                ttl_secs: 2 * self.window,
            })
        });
        result.map_err(|why| refused(node.as_deref(), why))
    }

    fn check(&self, signed: &Signed, now: i64) -> Result<Verified, Why> {
        let claims = &signed.claims;
        let node = self.nodes.get(&claims.node).ok_or(Why::UnknownNode)?;
        let expected = if node.ed25519.is_some() {
            KeyKind::Ed25519
        } else if self.master.is_some() {
            KeyKind::Derived
        } else if self.shared.is_some() {
            KeyKind::Shared
        } else {
            return Err(Why::NoKey);
        };
        if signed.kind != expected {
            return Err(Why::Downgrade);
        }
        if (now - claims.ts).abs() > self.window {
            return Err(Why::Window);
        }
        let message = claims.canonical();
        let good = match (expected, &node.ed25519, &self.master, &self.shared) {
            (KeyKind::Ed25519, Some(public), _, _) => UnparsedPublicKey::new(&ED25519, public)
                .verify(message.as_bytes(), &signed.signature)
                .is_ok(),
            (KeyKind::Derived, _, Some(master), _) => hmac::verify(
                &hmac_key(&derive_key(master, &claims.node)),
                message.as_bytes(),
                &signed.signature,
            )
            .is_ok(),
            (KeyKind::Shared, _, _, Some(shared)) => {
                hmac::verify(shared, message.as_bytes(), &signed.signature).is_ok()
            }
            _ => false,
        };
        if !good {
            return Err(Why::Signature);
        }
        if !node.scopes.contains(&claims.scope) {
            return Err(Why::Scope);
        }
        if self.own.as_deref() != Some(claims.audience.as_str()) {
            return Err(Why::Audience);
        }
        Ok(Verified {
            node: claims.node.clone(),
            scope: claims.scope.clone(),
            kind: expected,
        })
    }
}

fn refused(node: Option<&str>, why: Why) -> Refused {
    tracing::warn!(
        node = node.unwrap_or("-"),
        reason = why.as_str(),
        "peer signature refused"
    );
    Refused
}

/// A call whose signature verified but whose nonce is not yet remembered: the caller's
/// shared memory decides (see [`Verifier::verify_unspent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unspent {
    verified: Verified,
    nonce: String,
    ttl_secs: i64,
}

impl Unspent {
    /// The memory key of this call's nonce: `<node>:<nonce>` (both are tokens of
    /// `A-Z a-z 0-9 . _ -`, so the colon is unambiguous).
    pub fn nonce_key(&self) -> String {
        format!("{}:{}", self.verified.node, self.nonce)
    }

    /// How long the nonce must be remembered, seconds (twice the window: by then its
    /// timestamp is outside the window anyway).
    pub fn ttl_secs(&self) -> i64 {
        self.ttl_secs
    }

    /// The verified call when the memory took the nonce as new (`fresh`), else the one
    /// opaque refusal (a replay; or the memory could not answer: fail closed).
    pub fn spend(self, fresh: bool) -> Result<Verified, Refused> {
        if fresh {
            Ok(self.verified)
        } else {
            Err(refused(Some(&self.verified.node), Why::Replay))
        }
    }
}

/// The public key of an Ed25519 key pair, for logs and `peer keygen`.
pub(crate) fn public_of(pair: &Ed25519KeyPair) -> Vec<u8> {
    pair.public_key().as_ref().to_vec()
}

#[cfg(test)]
mod tests;
