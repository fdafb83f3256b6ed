//! Streamable HTTP (handshake revisions): the session lifecycle, header checks, DNS-rebinding
//! protection, the auth hook, SSE streams with a server→client request, resumption.

use std::sync::Arc;

use async_trait::async_trait;
use lumina_mcp_server::http::{AuthRejection, HeaderMap, HttpAuth, HttpOptions};
use lumina_mcp_server::AuthValue;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::*;

fn list_tools(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
}

#[tokio::test]
async fn session_lifecycle_and_header_rules() {
    let server = Server::start(HttpOptions::default()).await;
    let client = client();
    let url = &server.url;

    // No session yet: 400, and so is an id we never issued.
    let response = post(&client, url, None)
        .json(&list_tools(1))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let response = post(&client, url, Some("not-a-session"))
        .json(&list_tools(1))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);

    let session = open_session(&client, url).await;
    let response = post(&client, url, Some(&session))
        .json(&list_tools(2))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["tools"].as_array().unwrap().len(), 4);

    // An unknown MCP-Protocol-Version is refused.
    let response = post(&client, url, None)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "1999-01-01")
        .json(&list_tools(3))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);

    // Unsupported methods and malformed bodies.
    let response = client.put(url.as_str()).send().await.unwrap();
    assert_eq!(response.status(), 405);
    let response = post(&client, url, Some(&session))
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32700);

    // DELETE ends the session; afterwards it is 404 (re-initialize).
    let response = client
        .delete(url.as_str())
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let response = post(&client, url, Some(&session))
        .json(&list_tools(4))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    server.stop().await;
}

#[tokio::test]
async fn dns_rebinding_protection() {
    let server = Server::start(HttpOptions::default()).await;
    let client = client();
    let evil = post(&client, &server.url, None)
        .header("origin", "http://evil.example.com")
        .json(&initialize_body(1))
        .send()
        .await
        .unwrap();
    assert_eq!(evil.status(), 403);
    let port = server
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let good = post(&client, &server.url, None)
        .header("origin", format!("http://localhost:{port}"))
        .json(&initialize_body(1))
        .send()
        .await
        .unwrap();
    assert_eq!(good.status(), 200);
    let rebound = post(&client, &server.url, None)
        .header("host", "evil.example.com")
        .json(&initialize_body(1))
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    server.stop().await;
}

struct FixedToken;

#[async_trait]
impl HttpAuth for FixedToken {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Option<AuthValue>, AuthRejection> {
        match headers.get("authorization").and_then(|v| v.to_str().ok()) {
            Some("Bearer right") => Ok(Some(Arc::new("alice".to_string()))),
            _ => Err(AuthRejection::Unauthorized),
        }
    }
}

#[tokio::test]
async fn the_auth_hook_guards_every_request() {
    let options = HttpOptions {
        auth: Some(Arc::new(FixedToken)),
        ..HttpOptions::default()
    };
    let server = Server::start(options).await;
    let client = client();
    for bearer in [None, Some("Bearer wrong")] {
        let mut request = post(&client, &server.url, None).json(&initialize_body(1));
        if let Some(bearer) = bearer {
            request = request.header("authorization", bearer);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401);
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
    }
    let response = post(&client, &server.url, None)
        .header("authorization", "Bearer right")
        .json(&initialize_body(1))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    server.stop().await;
}

#[tokio::test]
async fn elicitation_round_trip_over_the_post_stream() {
    let server = Server::start(HttpOptions::default()).await;
    let client = client();
    let session = open_session(&client, &server.url).await;
    let call =
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "ask"}});
    let response = post(&client, &server.url, Some(&session))
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut sse = SseReader::new(response);
    // Priming event: an id and no data.
    let (priming_id, data) = sse.next().await.unwrap();
    assert!(priming_id.is_some());
    assert_eq!(data, "");

    let (_, request) = sse.next_message().await.unwrap();
    assert_eq!(request["method"], "elicitation/create");
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}});
    let response = post(&client, &server.url, Some(&session))
        .json(&answer)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);

    let (_, reply) = sse.next_message().await.unwrap();
    assert_eq!(reply["id"], 5);
    assert_eq!(
        reply["result"]["content"][0]["text"],
        r#"answer: {"action":"decline"}"#
    );
    assert!(
        sse.next().await.is_none(),
        "the stream ends after the response"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_lost_stream_resumes_with_last_event_id() {
    let server = Server::start(HttpOptions::default()).await;
    let client = client();
    let session = open_session(&client, &server.url).await;
    let call =
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "ask"}});
    let response = post(&client, &server.url, Some(&session))
        .json(&call)
        .send()
        .await
        .unwrap();
    let mut sse = SseReader::new(response);
    let (priming_id, _) = sse.next().await.unwrap();
    let (request_id, request) = sse.next_message().await.unwrap();
    drop(sse); // the connection is lost; the request goes on

    // Resume from the priming event: the elicitation request is delivered again.
    let resumed = client
        .get(server.url.as_str())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("last-event-id", priming_id.unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let mut sse = SseReader::new(resumed);
    let (replayed_id, replayed) = sse.next_message().await.unwrap();
    assert_eq!((replayed_id, &replayed), (request_id, &request));

    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "cancel"}});
    let response = post(&client, &server.url, Some(&session))
        .json(&answer)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let (_, reply) = sse.next_message().await.unwrap();
    assert_eq!(reply["id"], 6);

    // The standalone GET stream opens with a priming event.
    let get = client
        .get(server.url.as_str())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    let mut standalone = SseReader::new(get);
    let (id, data) = standalone.next().await.unwrap();
    assert!(id.unwrap().starts_with("0-"));
    assert_eq!(data, "");
    server.stop().await;
}
