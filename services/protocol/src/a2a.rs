//! `a2a.peers`: the remote A2A agents this deployment may delegate to (the `a2a_peers`
//! setting), each with how calls to it are authenticated and whether its Agent Card could be
//! read (docs/protocol.md, "A2A peers"; docs/a2a.md). Never a token or a key: only their
//! kind.

use serde::{Deserialize, Serialize};

/// `a2a.peers` params: with a session, its project's settings apply; without one, those of
/// `project_root` (as `skill.list`); with neither, the user's and the deployment's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct A2aPeersParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The project directory, used only without `session_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_root: Option<String>,
    /// Read every card again instead of taking a fresh one from the card cache.
    #[serde(default, skip_serializing_if = "is_false")]
    pub refresh: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `a2a.peers` result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct A2aPeersResult {
    /// Sorted by name.
    pub peers: Vec<A2aPeerInfo>,
}

/// One configured peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct A2aPeerInfo {
    /// Its name in `a2a_peers` (what `a2a_delegate{agent}` names).
    pub name: String,
    /// Its base URL (user and password, if the URL has them, replaced by `…`).
    pub url: String,
    /// How calls to it are authenticated.
    pub auth: PeerAuth,
    /// `state`: `reachable` (with `latency_ms`, `cached`, `card`) or `unreachable` (with
    /// `reason`).
    #[serde(flatten)]
    pub reachability: Reachability,
}

/// How calls to a peer are authenticated: its bearer token, this deployment's peer
/// signature (`peer`), both or neither. Only the kind, never the credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeerAuth {
    None,
    Bearer,
    Signed,
    BearerAndSigned,
}

impl PeerAuth {
    pub fn of(bearer: bool, signed: bool) -> Self {
        match (bearer, signed) {
            (false, false) => PeerAuth::None,
            (true, false) => PeerAuth::Bearer,
            (false, true) => PeerAuth::Signed,
            (true, true) => PeerAuth::BearerAndSigned,
        }
    }
}

/// Whether the peer's card could be read, under the same address guard delegation uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Reachability {
    Reachable {
        /// How long reading the card took (a cached card: the cache lookup).
        latency_ms: u64,
        /// The card came from the card cache without a request.
        cached: bool,
        card: CardSummary,
    },
    Unreachable {
        /// Why: refused by the address guard, no answer in time, an HTTP error, a card
        /// that is not one or offers no A2A 1.0 JSON-RPC interface, unusable peer settings.
        reason: String,
    },
}

/// What a peer's Agent Card says about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardSummary {
    pub name: String,
    pub description: String,
    /// The agent's own version.
    pub version: String,
    /// The A2A protocol version of the JSON-RPC interface delegation uses.
    pub protocol_version: String,
    pub streaming: bool,
    pub skills: Vec<CardSkill>,
}

/// One skill of a card.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardSkill {
    pub id: String,
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_peer_is_flat_on_the_wire_and_round_trips() {
        let peers = A2aPeersResult {
            peers: vec![
                A2aPeerInfo {
                    name: "research".into(),
                    url: "https://r.example".into(),
                    auth: PeerAuth::of(true, true),
                    reachability: Reachability::Reachable {
                        latency_ms: 12,
                        cached: false,
                        card: CardSummary {
                            name: "R".into(),
                            protocol_version: "1.0".into(),
                            streaming: true,
                            skills: vec![CardSkill {
                                id: "s".into(),
                                name: "S".into(),
                            }],
                            ..Default::default()
                        },
                    },
                },
                A2aPeerInfo {
                    name: "down".into(),
                    url: "https://d.example".into(),
                    auth: PeerAuth::of(false, false),
                    reachability: Reachability::Unreachable {
                        reason: "cannot reach".into(),
                    },
                },
            ],
        };
        let wire = serde_json::to_value(&peers).unwrap();
        assert_eq!(
            wire,
            json!({"peers": [
                {"name": "research", "url": "https://r.example", "auth": "bearer-and-signed",
                 "state": "reachable", "latency_ms": 12, "cached": false,
                 "card": {"name": "R", "description": "", "version": "", "protocol_version": "1.0",
                          "streaming": true, "skills": [{"id": "s", "name": "S"}]}},
                {"name": "down", "url": "https://d.example", "auth": "none",
                 "state": "unreachable", "reason": "cannot reach"},
            ]})
        );
        let back: A2aPeersResult = serde_json::from_value(wire).unwrap();
        assert_eq!(back, peers);
        assert_eq!(
            serde_json::to_value(A2aPeersParams::default()).unwrap(),
            json!({})
        );
    }
}
