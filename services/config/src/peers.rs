//! The A2A peer settings (docs/a2a.md): `peer` — this deployment in the signed peer channel
//! (its node name, its signing key, the keys it verifies other nodes with, the time window
//! and the replay memory) — and `a2a_peers` — the remote A2A agents `a2a_delegate` and
//! remote team members may call, by name. Key material is [`Secret`]; `lumina-peer` turns
//! these settings into a signer and a verifier and checks the keys themselves.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Secret;

/// The scopes a signed call may claim.
pub const PEER_SCOPES: &[&str] = &["a2a:read", "a2a:write"];

/// `peer`: this deployment in the signed peer channel. Default: no node name, no keys (no
/// call is signed, no signed call is accepted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PeerSettings {
    /// This deployment's node name in the calls it signs. Default: none (calls are not
    /// signed).
    pub node: Option<String>,
    /// HMAC-SHA256 key every node of the fleet shares (at least 32 bytes). Default: none.
    pub shared_key: Option<Secret>,
    /// The master secret per-node keys are derived from with HKDF-SHA256 (at least 32
    /// bytes): the verifier derives the calling node's key from it; a node holding it
    /// derives its own. Default: none.
    pub derive_master: Option<Secret>,
    /// This node's own derived key (base64 of 32 bytes, as `lumina-backend a2a peer-derive`
    /// prints it), for a node that is not given the master. Default: none.
    pub derived_key: Option<Secret>,
    /// This node's Ed25519 private key (base64 of the 32-byte seed, as `lumina-backend a2a
    /// peer-keygen` prints it). Default: none.
    pub ed25519_private_key: Option<Secret>,
    /// How far a signature's timestamp may be from this clock, seconds. Default: 300.
    pub window_secs: u64,
    /// Nonces remembered against replay (each for twice the window); a signed call that
    /// would exceed it is refused. Default: 100000.
    pub nonce_capacity: usize,
    /// The nodes whose signed calls are accepted, by node name. Default: none.
    pub nodes: BTreeMap<String, PeerNode>,
}

impl Default for PeerSettings {
    fn default() -> Self {
        Self {
            node: None,
            shared_key: None,
            derive_master: None,
            derived_key: None,
            ed25519_private_key: None,
            window_secs: 300,
            nonce_capacity: 100_000,
            nodes: BTreeMap::new(),
        }
    }
}

/// A node whose signed calls are accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PeerNode {
    /// The node's Ed25519 public key (base64 of 32 bytes). When set, only Ed25519
    /// signatures of this node are accepted. Default: none.
    pub ed25519_public_key: Option<String>,
    /// The scopes its calls may claim (`a2a:read`: get, list, subscribe; `a2a:write`:
    /// also send and cancel). Default: both.
    pub scopes: Vec<String>,
    /// The tenant its calls run in, in the cluster profile (required there: a node
    /// without one is refused; the local profile has one tenant and ignores it). Default:
    /// none.
    pub tenant: Option<String>,
}

impl Default for PeerNode {
    fn default() -> Self {
        Self {
            ed25519_public_key: None,
            scopes: PEER_SCOPES.iter().map(|s| (*s).to_owned()).collect(),
            tenant: None,
        }
    }
}

/// One remote A2A agent of `a2a_peers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aPeer {
    /// The agent's base URL: its card is `<url>/.well-known/agent-card.json`.
    pub url: String,
    /// A bearer token sent with every call. Default: none.
    #[serde(default)]
    pub token: Option<Secret>,
    /// Whether calls carry this deployment's peer signature (`peer`). Default: true (when
    /// `peer` has a node name and a key).
    #[serde(default = "yes")]
    pub sign: bool,
    /// The peer's own node name (its `peer.node`): the audience its signatures are bound
    /// to. Default: the peer's name in `a2a_peers`.
    #[serde(default)]
    pub node: Option<String>,
}

impl A2aPeer {
    /// The node signed calls to this peer are meant for: `node`, else the peer's `name`.
    pub fn audience<'a>(&'a self, name: &'a str) -> &'a str {
        self.node.as_deref().unwrap_or(name)
    }
}

fn yes() -> bool {
    true
}

/// Node names and nonces: 1–128 of `A-Z a-z 0-9 . _ -`.
pub fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 128
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Why a `peer` or `a2a_peers` value does not fit: the field path and what is wrong, never
/// a value (values may be keys).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Problem(String);

impl From<String> for Problem {
    fn from(text: String) -> Self {
        Self(text)
    }
}

impl From<&str> for Problem {
    fn from(text: &str) -> Self {
        Self(text.to_owned())
    }
}

pub(crate) fn check_peer(value: &Value) -> Result<(), Problem> {
    let settings: PeerSettings = decode(value)?;
    if let Some(node) = &settings.node {
        if !is_token(node) {
            return Err("`node`: 1-128 characters of A-Z a-z 0-9 . _ -".into());
        }
    }
    if settings.window_secs == 0 {
        return Err("`window_secs`: at least 1".into());
    }
    for (name, node) in &settings.nodes {
        if !is_token(name) {
            return Err(Problem(format!(
                "`nodes.{name}`: a node name is 1-128 characters of A-Z a-z 0-9 . _ -"
            )));
        }
        if let Some(bad) = node
            .scopes
            .iter()
            .find(|s| !PEER_SCOPES.contains(&s.as_str()))
        {
            return Err(Problem(format!(
                "`nodes.{name}.scopes`: `{bad}` is not one of {}",
                PEER_SCOPES.join(", ")
            )));
        }
    }
    Ok(())
}

pub(crate) fn check_a2a_peers(value: &Value) -> Result<(), Problem> {
    let peers: BTreeMap<String, A2aPeer> = decode(value)?;
    for (name, peer) in &peers {
        if !is_token(name) {
            return Err(Problem(format!(
                "`{name}`: a peer name is 1-128 characters of A-Z a-z 0-9 . _ -"
            )));
        }
        if !(peer.url.starts_with("https://") || peer.url.starts_with("http://")) {
            return Err(Problem(format!("`{name}.url`: an http:// or https:// URL")));
        }
        if peer.node.as_deref().is_some_and(|node| !is_token(node)) {
            return Err(Problem(format!(
                "`{name}.node`: a node name is 1-128 characters of A-Z a-z 0-9 . _ -"
            )));
        }
    }
    Ok(())
}

/// Decodes `value`; the error names the field and keeps serde's message only when it
/// cannot carry a value (unknown and missing fields).
fn decode<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, Problem> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.inner().to_string();
        let what = if inner.starts_with("unknown field") || inner.starts_with("missing field") {
            inner
        } else {
            "the wrong type".to_owned()
        };
        if path == "." {
            Problem(what)
        } else {
            Problem(format!("`{path}`: {what}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_peers_node_is_its_audience() {
        let peer: A2aPeer = serde_json::from_value(json!({"url": "https://r.example"})).unwrap();
        assert_eq!(peer.audience("research"), "research");
        let peer: A2aPeer =
            serde_json::from_value(json!({"url": "https://r.example", "node": "west"})).unwrap();
        assert_eq!(peer.audience("research"), "west");
        let err = check_a2a_peers(&json!({"r": {"url": "https://r.example", "node": "a b"}}))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("`r.node`: "), "{err}");
    }

    #[test]
    fn errors_name_the_field_and_never_the_value() {
        let err = check_peer(&json!({"shared_key": 12345}))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "`shared_key`: the wrong type");
        let err = check_peer(&json!({"window_secs": "sekrit-value"}))
            .unwrap_err()
            .to_string();
        assert!(!err.contains("sekrit"), "{err}");
        let err = check_peer(&json!({"nodes": {"b": {"scopes": ["admin"]}}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("nodes.b.scopes"), "{err}");
        let err = check_peer(&json!({"nodes": {"b": {"key": "x"}}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `key`"), "{err}");
        let err = check_a2a_peers(&json!({"r": {"url": "ftp://x"}}))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "`r.url`: an http:// or https:// URL");
        let err = check_a2a_peers(&json!({"r": {"token": "t0p"}}))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("missing field `url`") && !err.contains("t0p"),
            "{err}"
        );
        assert_eq!(check_peer(&json!({})), Ok(()));
        let peer: PeerSettings = serde_json::from_value(json!({"nodes": {"b": {}}})).unwrap();
        assert_eq!(peer.nodes["b"].scopes, vec!["a2a:read", "a2a:write"]);
        assert_eq!(peer.window_secs, 300);
    }

    #[test]
    fn debug_redacts_keys() {
        let peer: PeerSettings =
            serde_json::from_value(json!({"shared_key": "k3y-material-0123456789abcdef0123"}))
                .unwrap();
        assert!(!format!("{peer:?}").contains("k3y"));
    }
}
