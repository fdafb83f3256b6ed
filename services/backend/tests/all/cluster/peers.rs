//! `a2a.peers` in the cluster profile: every instance answers it (route `any`) for a JWT
//! with only the read scope, with the same list. The instances' A2A client is the
//! production one — no loopback switch reaches `cluster serve` — so a live A2A agent on
//! loopback (an in-process backend whose card the test reads itself) is listed unreachable
//! with the address guard's reason, over https and over http, exactly as delegation to it
//! would be refused. No token in the answer; a token without the read scope is refused.

use lumina_protocol::methods::{A2aPeersParams, SessionCreateParams};
use lumina_protocol::ErrorCode;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::support::*;

const TOKEN: &str = "cluster-peer-t0ken-never-shown-9876543210";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_instance_lists_the_peers_under_the_address_guard() {
    let agent = crate::support::Harness::start("anthropic", vec![]).await;
    let base = agent
        .url
        .replace("ws://", "http://")
        .replace(lumina_protocol::WS_PATH, "");
    let card = reqwest::get(format!("{base}/.well-known/agent-card.json"))
        .await
        .unwrap();
    assert_eq!(card.status().as_u16(), 200, "the agent is up");
    let own = base.trim_start_matches("http://127.0.0.1:").to_owned();
    let peers = json!({
        "self-https": {"url": format!("https://127.0.0.1:{own}"), "token": TOKEN},
        "self-http": {"url": base, "sign": false},
    });
    let cluster = Cluster::start_with_env(
        2,
        vec![],
        vec![("LUMINA_A2A_PEERS".into(), peers.to_string())],
    )
    .await;
    let reader = cluster.token("reader", TENANT, &["lumina:session:read"]);

    let mut answers = Vec::new();
    for i in 0..2 {
        let (client, _notes) = cluster.client(i, &reader).await;
        let raw: Value = client
            .call("a2a.peers", A2aPeersParams::default())
            .await
            .unwrap();
        assert!(!raw.to_string().contains(TOKEN), "{raw}");
        answers.push(raw);
        // The token is a reader's: it cannot create a session.
        let err = client
            .session_create(&SessionCreateParams {
                project_root: Some(cluster.project.display().to_string()),
                title: None,
            })
            .await
            .unwrap_err();
        assert_eq!(err.server_error().unwrap().code, ErrorCode::Forbidden);
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(
        answers[0],
        json!({"peers": [
            {"name": "self-http", "url": format!("http://127.0.0.1:{own}"), "auth": "none",
             "state": "unreachable",
             "reason": "the address is refused: scheme http (only https)"},
            {"name": "self-https", "url": format!("https://127.0.0.1:{own}"), "auth": "bearer",
             "state": "unreachable",
             "reason": "the address is refused: 127.0.0.1 is a loopback address"},
        ]})
    );

    // Without the read scope: refused.
    let writer = cluster.token("writer", TENANT, &["lumina:session:write"]);
    let (client, _notes) = cluster.client(0, &writer).await;
    let err = client
        .calls()
        .a2a_peers(&A2aPeersParams::default())
        .await
        .unwrap_err();
    assert_eq!(err.server_error().unwrap().code, ErrorCode::Forbidden);
    agent.stop().await;
}
