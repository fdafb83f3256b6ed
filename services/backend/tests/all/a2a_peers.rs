//! `a2a.peers` between in-process backends (the two-backend set-up of `crate::delegate`,
//! loopback agents allowed as in every test): backend A knows three peers — backend B, a
//! real A2A server; a closed loopback port; a port that accepts and never answers. B is
//! listed reachable with its card (name, version, protocol, streaming, skills) and how A
//! calls it (signed), the others unreachable with their reasons (refused connection; no
//! answer within the probe's time), all in one call that does not wait for them one after
//! the other. The second listing takes B's card from the cache, `refresh` reads it again.
//! No token or key is in the answer; a project's own `a2a_peers` is ignored (a project may
//! not choose where data goes), an unknown session is `not_found`.

use std::time::{Duration, Instant};

use lumina_protocol::methods::{
    A2aPeerInfo, A2aPeersParams, CardSkill, CardSummary, PeerAuth, Reachability,
};
use lumina_protocol::{ErrorCode, Method, Scope, WS_PATH};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::*;

const TOKEN: &str = "peer-bearer-t0ken-never-shown-0123456789";

fn http_base(ws_url: &str) -> String {
    ws_url.replace("ws://", "http://").replace(WS_PATH, "")
}

fn card_of(peer: &A2aPeerInfo) -> (&CardSummary, bool) {
    match &peer.reachability {
        Reachability::Reachable { card, cached, .. } => (card, *cached),
        other => panic!("{} is not reachable: {other:?}", peer.name),
    }
}

fn reason_of(peer: &A2aPeerInfo) -> &str {
    match &peer.reachability {
        Reachability::Unreachable { reason } => reason,
        other => panic!("{} is reachable: {other:?}", peer.name),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn peers_are_listed_with_their_cards_or_why_they_cannot_be_reached() {
    assert_eq!(Method::A2aPeers.scope(), Scope::Read);
    let keys = lumina_peer::generate_ed25519().unwrap();
    let remote = Harness::start("anthropic", vec![]).await;
    // A port nothing listens on, and one that takes connections and never answers.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();

    let me = json!({"node": "caller", "ed25519_private_key": keys.private_seed.expose()});
    let peers = json!({
        "remote": {"url": http_base(&remote.url)},
        "closed": {"url": format!("http://127.0.0.1:{closed}"), "token": TOKEN, "sign": false},
        "silent": {"url": format!("http://127.0.0.1:{silent_port}"), "token": TOKEN},
    });
    let local = Harness::start_with(
        "anthropic",
        vec![],
        &[
            ("LUMINA_PEER", &me.to_string()),
            ("LUMINA_A2A_PEERS", &peers.to_string()),
        ],
    )
    .await;
    let (client, _notes) = local.client().await;

    let started = Instant::now();
    let raw: Value = client
        .call("a2a.peers", A2aPeersParams::default())
        .await
        .unwrap();
    let elapsed = started.elapsed();
    let text = raw.to_string();
    for secret in [TOKEN, keys.private_seed.expose()] {
        assert!(!text.contains(secret), "a credential in the answer: {text}");
    }
    let listed: Vec<A2aPeerInfo> = serde_json::from_value(raw["peers"].clone()).unwrap();
    let names: Vec<&str> = listed.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["closed", "remote", "silent"]);
    let (closed_peer, remote_peer, silent_peer) = (&listed[0], &listed[1], &listed[2]);

    // B: reachable, with what its card says, signed (A has a node name and a key).
    assert_eq!(remote_peer.url, http_base(&remote.url));
    assert_eq!(remote_peer.auth, PeerAuth::Signed);
    let (card, cached) = card_of(remote_peer);
    assert!(!cached);
    assert_eq!(
        card,
        &CardSummary {
            name: "Lumina".into(),
            description: lumina_backend::a2a::card_document(&http_base(&remote.url), None)
                .card
                .description,
            version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: "1.0".into(),
            streaming: true,
            skills: vec![CardSkill {
                id: "agent-run".into(),
                name: "Agent run".into(),
            }],
        }
    );
    assert_eq!(raw["peers"][1]["state"], "reachable");
    assert!(raw["peers"][1]["latency_ms"].is_u64(), "{raw}");

    // The closed port: refused at once, named with its URL; a bearer token, unsigned.
    assert_eq!(closed_peer.auth, PeerAuth::Bearer);
    let reason = reason_of(closed_peer);
    assert!(
        reason.starts_with(&format!(
            "cannot reach http://127.0.0.1:{closed}/.well-known/agent-card.json"
        )),
        "{reason}"
    );
    assert_eq!(raw["peers"][0]["state"], "unreachable");

    // The silent port: the probe gives up; the listing did not wait for it twice.
    assert_eq!(silent_peer.auth, PeerAuth::BearerAndSigned);
    assert_eq!(reason_of(silent_peer), "no answer within 4 s");
    assert!(elapsed < Duration::from_secs(12), "{elapsed:?}");

    // Again: B's card from the cache; with `refresh`, read again.
    let again = client
        .calls()
        .a2a_peers(&A2aPeersParams::default())
        .await
        .unwrap();
    assert!(card_of(&again.peers[1]).1, "{again:?}");
    let refreshed = client
        .calls()
        .a2a_peers(&A2aPeersParams {
            refresh: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!card_of(&refreshed.peers[1]).1, "{refreshed:?}");
    drop(silent);

    // A session's project cannot add peers: its layer's `a2a_peers` is dropped.
    let session = local.session(&client).await;
    let config = local.project.join(".Lumina/CONFIG");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("defaults.json"),
        json!({"a2a_peers": {"exfil": {"url": "https://exfil.example"}}}).to_string(),
    )
    .unwrap();
    let with_session = client
        .calls()
        .a2a_peers(&A2aPeersParams {
            session_id: Some(session.id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let names: Vec<&str> = with_session.peers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["closed", "remote", "silent"]);
    let err = client
        .calls()
        .a2a_peers(&A2aPeersParams {
            session_id: Some("no-such-session".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.server_error().unwrap().code, ErrorCode::NotFound);

    local.stop().await;
    remote.stop().await;
}

#[tokio::test]
async fn no_peers_is_an_empty_list() {
    let local = Harness::start("anthropic", vec![]).await;
    let (client, _notes) = local.client().await;
    let listed = client
        .calls()
        .a2a_peers(&A2aPeersParams::default())
        .await
        .unwrap();
    assert_eq!(listed.peers, vec![]);
    local.stop().await;
}
