//! The stateless revision (2026-07-28) over HTTP: no session, `_meta` per request, the
//! header/body consistency rules and their status codes.

use lumina_mcp_server::http::HttpOptions;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::*;

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    })
}

fn modern(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    name: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut request = post(client, url, None)
        .header("mcp-protocol-version", STATELESS)
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    request
}

async fn answer(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    assert!(
        response.headers().get("mcp-session-id").is_none(),
        "no sessions in 2026-07-28"
    );
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn discover_and_call_without_a_session() {
    let server = Server::start(HttpOptions::default()).await;
    let client = client();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}});
    let (status, reply) = answer(
        modern(&client, &server.url, "server/discover", None)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        reply["result"],
        json!({
            "resultType": "complete",
            "supportedVersions": [STATELESS, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
            "capabilities": {"tools": {"listChanged": false}, "logging": {}},
            "instructions": "test instructions",
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "0.0.1"}}
        })
    );

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hello"}, "_meta": meta()}});
    let (status, reply) = answer(
        modern(&client, &server.url, "tools/call", Some("echo"))
            .json(&call)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(reply["result"]["resultType"], "complete");
    assert_eq!(reply["result"]["content"][0]["text"], "hello");

    // The base64 sentinel form of Mcp-Name is decoded before comparing.
    let (status, _) = answer(
        modern(
            &client,
            &server.url,
            "tools/call",
            Some("=?base64?ZWNobw==?="),
        )
        .json(&call)
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    server.stop().await;
}

#[tokio::test]
async fn header_rules_and_status_codes() {
    let server = Server::start(HttpOptions::default()).await;
    let client = client();
    let url = &server.url;
    let list =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}});

    // MCP-Protocol-Version must equal _meta.
    let (status, reply) = answer(
        post(&client, url, None)
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-method", "tools/list")
            .json(&list)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, reply["error"]["code"].clone()),
        (400, json!(-32020))
    );

    // Mcp-Method must be there and agree.
    let (status, reply) = answer(
        modern(&client, url, "tools/call", None)
            .json(&list)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, reply["error"]["code"].clone()),
        (400, json!(-32020))
    );

    // Mcp-Name must agree with params.name.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "_meta": meta()}});
    let (status, reply) = answer(
        modern(&client, url, "tools/call", Some("other"))
            .json(&call)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, reply["error"]["code"].clone()),
        (400, json!(-32020))
    );

    // An unsupported revision: 400 + -32022 with the versions to use.
    let future = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}});
    let (status, reply) = answer(
        post(&client, url, None)
            .header("mcp-protocol-version", "2099-01-01")
            .header("mcp-method", "tools/list")
            .json(&future)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, reply["error"]["code"].clone()),
        (400, json!(-32022))
    );
    assert_eq!(reply["error"]["data"]["supported"][0], STATELESS);

    // Unknown (and removed) methods: 404 + -32601.
    for method in ["nope/nothing", "ping"] {
        let body =
            json!({"jsonrpc": "2.0", "id": 4, "method": method, "params": {"_meta": meta()}});
        let (status, reply) = answer(
            modern(&client, url, method, None)
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            (status, reply["error"]["code"].clone()),
            (404, json!(-32601)),
            "{method}"
        );
    }

    // No GET stream and no DELETE in this revision.
    let response = client
        .get(url.as_str())
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", STATELESS)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    server.stop().await;
}

#[tokio::test]
async fn progress_and_logs_use_a_request_scoped_stream() {
    let server = Server::start(HttpOptions::default()).await;
    let client = client();
    let mut meta = meta();
    meta["progressToken"] = json!("p1");
    meta["io.modelcontextprotocol/logLevel"] = json!("warning");
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "streamed"}, "_meta": meta}});
    let response = modern(&client, &server.url, "tools/call", Some("echo"))
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut sse = SseReader::new(response);
    let (id, progress) = sse.next_message().await.unwrap();
    assert_eq!(id, None, "stateless streams carry no event ids");
    assert_eq!(progress["method"], "notifications/progress");
    assert_eq!(progress["params"]["progressToken"], "p1");
    let (_, reply) = sse.next_message().await.unwrap();
    assert_eq!(reply["result"]["content"][0]["text"], "streamed");
    assert!(sse.next().await.is_none());
    server.stop().await;
}
