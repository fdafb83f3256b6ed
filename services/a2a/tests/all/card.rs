//! The Agent Card: generated from the executor's catalog, cache validators, the loopback
//! warning, and every listed skill dispatches.

use std::net::SocketAddr;

use lumina_a2a::{CardDocument, CardOptions};
use serde_json::{json, Value};

use crate::support::{message, state, unique, Server};

fn options(url: &str, listen: &str) -> CardOptions {
    CardOptions {
        name: "n".into(),
        description: "d".into(),
        version: "1".into(),
        url: url.into(),
        listen: Some(listen.parse::<SocketAddr>().unwrap()),
        url_setting: "LUMINA_A2A_PUBLIC_URL".into(),
        input_modes: vec!["text/plain".into()],
        output_modes: vec!["text/plain".into()],
        push_notifications: false,
        bearer_auth: true,
        streaming: true,
    }
}

#[tokio::test]
async fn card_is_served_with_cache_validators() {
    let server = Server::start().await;
    let url = format!("{}.well-known/agent-card.json", server.url);
    let response = server.http.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let etag = response.headers()["etag"].to_str().unwrap().to_owned();
    assert!(response.headers()["cache-control"]
        .to_str()
        .unwrap()
        .contains("max-age="));
    assert!(response.headers().contains_key("last-modified"));
    let card: Value = response.json().await.unwrap();
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert_eq!(card["supportedInterfaces"][0]["url"], server.url.as_str());
    assert_eq!(
        card["capabilities"],
        json!({"streaming": true, "pushNotifications": true, "extendedAgentCard": false})
    );
    assert_eq!(card["skills"][0]["id"], "tck");
    assert!(
        card.get("warnings").is_none(),
        "no warning on a loopback listener"
    );

    let again = server
        .http
        .get(&url)
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
}

#[test]
fn listening_on_every_interface_but_advertising_loopback_warns() {
    let doc = CardDocument::build(
        &options("http://127.0.0.1:8080/a2a", "0.0.0.0:8080"),
        vec![],
    );
    assert_eq!(doc.card.warnings.len(), 1);
    assert!(
        doc.card.warnings[0].contains("LUMINA_A2A_PUBLIC_URL"),
        "{:?}",
        doc.card.warnings
    );
    let public = CardDocument::build(
        &options("https://agents.example.com/a2a", "0.0.0.0:8080"),
        vec![],
    );
    assert!(public.card.warnings.is_empty());
    let local = CardDocument::build(
        &options("http://localhost:8080/a2a", "127.0.0.1:8080"),
        vec![],
    );
    assert!(local.card.warnings.is_empty());
    // Bearer auth is declared.
    assert_eq!(
        doc.card.security_schemes["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
}

#[test]
fn media_types_match_exactly_or_by_wildcard() {
    let mut o = options("http://127.0.0.1/", "127.0.0.1:1");
    o.input_modes = vec!["text/plain".into(), "image/*".into()];
    let doc = CardDocument::build(&o, vec![]);
    assert!(doc.accepts("text/plain; charset=utf-8"));
    assert!(doc.accepts("image/png"));
    assert!(!doc.accepts("application/json"));
    assert!(!doc.accepts("imagex/png"));
}

#[tokio::test]
async fn every_skill_on_the_card_dispatches() {
    let server = Server::start().await;
    let card: Value = server
        .http
        .get(format!("{}.well-known/agent-card.json", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let skills = card["skills"].as_array().unwrap();
    assert!(!skills.is_empty());
    for skill in skills {
        let mut m = message(&unique("tck-complete-task"));
        m["metadata"] = json!({"skill": skill["id"]});
        let result = server.ok("SendMessage", json!({"message": m})).await;
        assert_eq!(
            state(&result["task"]),
            "TASK_STATE_COMPLETED",
            "skill {skill}"
        );
    }
}
