//! `a2a.peers` (docs/a2a.md#the-peers-view): the remote A2A agents of the `a2a_peers`
//! setting, each with how calls to it are authenticated and whether its Agent Card can be
//! read now. Cards are read concurrently, each for at most [`CARD_TIMEOUT`], through the
//! runtime's own A2A client — the card cache, the public-address guard and the target
//! resolution `a2a_delegate` uses — so a peer listed reachable here is one delegation can
//! reach. A peer that cannot be read is listed with the reason; the call itself fails only
//! when the settings cannot be read. Tokens and keys never leave: only their kind.

use std::time::{Duration, Instant};

use lumina_a2a::A2aClient;
use lumina_config::{A2aPeer, Settings};
use lumina_protocol::methods::{
    A2aPeerInfo, A2aPeersParams, A2aPeersResult, CardSkill, CardSummary, PeerAuth, Reachability,
};
use lumina_protocol::ErrorObject;
use lumina_runtime::delegate::resolve_target;
use lumina_runtime::Runtime;

/// How long one peer's card may take. Short: the listing waits for the slowest peer.
pub const CARD_TIMEOUT: Duration = Duration::from_secs(4);

/// `a2a.peers` on `runtime`: its settings for the project, its A2A client.
pub async fn list(
    runtime: &Runtime,
    params: A2aPeersParams,
) -> Result<A2aPeersResult, ErrorObject> {
    let settings = runtime
        .listing_settings(params.session_id.as_deref(), params.project_root.as_deref())
        .await
        .map_err(|e| e.to_error_object())?;
    let client = runtime.a2a_client();
    let probes = settings
        .a2a_peers
        .iter()
        .map(|(name, peer)| probe(client, &settings, name, peer, params.refresh));
    // `a2a_peers` is a sorted map: the peers come back sorted by name.
    Ok(A2aPeersResult {
        peers: futures::future::join_all(probes).await,
    })
}

/// One peer: its auth kind, and its card read under the delegation's rules.
async fn probe(
    client: &A2aClient,
    settings: &Settings,
    name: &str,
    peer: &A2aPeer,
    refresh: bool,
) -> A2aPeerInfo {
    let shown = without_userinfo(&peer.url);
    let bearer = peer.token.is_some();
    let (auth, reachability) = match resolve_target(settings, name) {
        // Only unusable `peer` settings (a key that does not decode) get here: calls would
        // fail to sign.
        Err(err) => (
            PeerAuth::of(bearer, peer.sign),
            Reachability::Unreachable {
                reason: err.to_string(),
            },
        ),
        Ok(target) => {
            if refresh {
                client.forget_card(&target);
            }
            let started = Instant::now();
            let reachability = match tokio::time::timeout(CARD_TIMEOUT, client.card(&target)).await
            {
                Err(_) => Reachability::Unreachable {
                    reason: format!("no answer within {} s", CARD_TIMEOUT.as_secs()),
                },
                Ok(Err(err)) => Reachability::Unreachable {
                    reason: err.to_string().replace(&peer.url, &shown),
                },
                Ok(Ok((card, cached))) => match card.endpoint() {
                    Err(err) => Reachability::Unreachable {
                        reason: err.to_string(),
                    },
                    Ok(endpoint) => Reachability::Reachable {
                        latency_ms: u64::try_from(started.elapsed().as_millis())
                            .unwrap_or(u64::MAX),
                        cached,
                        card: CardSummary {
                            name: card.name.clone(),
                            description: card.description.clone(),
                            version: card.version.clone(),
                            protocol_version: endpoint.protocol_version,
                            streaming: endpoint.streaming,
                            skills: card
                                .skills
                                .iter()
                                .map(|s| CardSkill {
                                    id: s.id.clone(),
                                    name: s.name.clone(),
                                })
                                .collect(),
                        },
                    },
                },
            };
            (
                PeerAuth::of(target.bearer.is_some(), target.signer.is_some()),
                reachability,
            )
        }
    };
    A2aPeerInfo {
        name: name.to_owned(),
        url: shown,
        auth,
        reachability,
    }
}

/// `url` with a user and password in its authority replaced by `…` (a URL may carry
/// credentials; the listing shows where, not how).
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    match authority.rfind('@') {
        Some(at) => format!("{scheme}://…@{}{path}", &authority[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_hidden_and_the_rest_kept() {
        assert_eq!(
            without_userinfo("https://me:s3cret@agent.example:8443/a2a?x=1"),
            "https://…@agent.example:8443/a2a?x=1"
        );
        assert_eq!(
            without_userinfo("https://agent.example/a@b"),
            "https://agent.example/a@b"
        );
        assert_eq!(
            without_userinfo("http://127.0.0.1:9/"),
            "http://127.0.0.1:9/"
        );
    }
}
