//! Bad input at the envelope: malformed JSON-RPC, wrong content type, oversized bodies,
//! unsupported versions, unknown methods, bad params. Nothing panics; the server goes on.

use serde_json::{json, Value};

use crate::support::{message, state, unique, Server};

async fn raw(server: &Server, body: Vec<u8>, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = server.http.post(&server.url).body(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

const JSON: (&str, &str) = ("Content-Type", "application/json");
const V1: (&str, &str) = ("A2A-Version", "1.0");

#[tokio::test]
async fn malformed_requests_get_parse_and_invalid_request_errors() {
    let server = Server::start().await;
    let (status, body) = raw(
        &server,
        b"{\"jsonrpc\": \"2.0\", \"id\": 1,".to_vec(),
        &[JSON, V1],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["error"]["code"], -32700);
    assert_eq!(body["id"], Value::Null);

    for (bad, why) in [
        (
            json!([{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]),
            "batch",
        ),
        (json!({"id": 1, "method": "GetTask"}), "no jsonrpc"),
        (
            json!({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}),
            "wrong jsonrpc",
        ),
        (json!({"jsonrpc": "2.0", "method": "GetTask"}), "no id"),
        (
            json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetTask"}),
            "object id",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": 5}),
            "method not a string",
        ),
        (json!("just a string"), "not an object"),
    ] {
        let (_, body) = raw(&server, serde_json::to_vec(&bad).unwrap(), &[JSON, V1]).await;
        assert_eq!(body["error"]["code"], -32600, "{why}: {body}");
    }
    // The id is echoed when it could be read.
    let (_, body) = raw(
        &server,
        br#"{"jsonrpc":"1.0","id":"x9","method":"GetTask"}"#.to_vec(),
        &[JSON, V1],
    )
    .await;
    assert_eq!(body["id"], "x9");

    // The server still works.
    let result = server
        .ok(
            "SendMessage",
            json!({"message": message(&unique("tck-complete-task"))}),
        )
        .await;
    assert_eq!(state(&result["task"]), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn unknown_methods_and_bad_params() {
    let server = Server::start().await;
    assert_eq!(server.err("NoSuchMethod", json!({})).await, -32601);
    // A v0.3 name under A2A-Version: 1.0 is unknown.
    assert_eq!(server.err("message/send", json!({})).await, -32601);
    assert_eq!(server.err("GetTask", json!({})).await, -32602,);
    assert_eq!(server.err("GetTask", json!({"id": 5})).await, -32602);
    assert_eq!(
        server
            .err("SendMessage", json!({"message": {"messageId": "m"}}))
            .await,
        -32602
    );
    let bad_role =
        json!({"message": {"messageId": "m", "role": "ROLE_ROBOT", "parts": [{"text": "x"}]}});
    assert_eq!(server.err("SendMessage", bad_role).await, -32602);
    let no_parts = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}});
    assert_eq!(server.err("SendMessage", no_parts).await, -32602);
    let (_, body) = raw(
        &server,
        br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}"#.to_vec(),
        &[JSON, V1],
    )
    .await;
    assert_eq!(body["error"]["code"], -32602);
}

#[tokio::test]
async fn wrong_content_type_is_content_type_not_supported() {
    let server = Server::start().await;
    let body = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}),
    )
    .unwrap();
    let (status, response) =
        raw(&server, body.clone(), &[("Content-Type", "text/plain"), V1]).await;
    assert_eq!(status, 200);
    assert_eq!(response["error"]["code"], -32005);
    assert_eq!(
        response["error"]["data"][0]["reason"],
        "CONTENT_TYPE_NOT_SUPPORTED"
    );
    let (_, response) = raw(&server, body, &[V1]).await;
    assert_eq!(response["error"]["code"], -32005, "no content type at all");
}

#[tokio::test]
async fn a_body_over_10_mib_is_refused() {
    let server = Server::start().await;
    let text = "x".repeat(10 * 1024 * 1024 + 1);
    let body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]}}})).unwrap();
    let (status, response) = raw(&server, body, &[JSON, V1]).await;
    assert_eq!(status, 413);
    assert_eq!(response["error"]["code"], -32600);
    // Just under the limit is fine.
    let text = "x".repeat(9 * 1024 * 1024);
    let m = json!({"messageId": unique("tck-complete-task"), "role": "ROLE_USER", "parts": [{"text": text}]});
    let result = server
        .ok(
            "SendMessage",
            json!({"message": m, "configuration": {"historyLength": 0}}),
        )
        .await;
    assert_eq!(state(&result["task"]), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn an_unsupported_version_is_version_not_supported() {
    let server = Server::start().await;
    let response = server
        .call_with(
            "SendMessage",
            json!({"message": message("m")}),
            &[("A2A-Version", "99.0")],
        )
        .await;
    assert_eq!(response["error"]["code"], -32009);
    let info = &response["error"]["data"][0];
    assert_eq!(info["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
    assert_eq!(info["reason"], "VERSION_NOT_SUPPORTED");
    assert_eq!(info["domain"], "a2a-protocol.org");
}

#[test]
fn the_method_table_resolves_both_generations() {
    use lumina_a2a::jsonrpc::{Method, Version};
    for method in Method::ALL {
        assert_eq!(
            Method::resolve(method.v1_name(), Version::V1),
            Some((*method, Version::V1))
        );
        assert_eq!(
            Method::resolve(method.v1_name(), Version::V03),
            Some((*method, Version::V1))
        );
        if let Some(old) = method.v03_name() {
            assert_eq!(
                Method::resolve(old, Version::V03),
                Some((*method, Version::V03))
            );
            assert_eq!(Method::resolve(old, Version::V1), None);
        }
    }
    assert_eq!(Method::ALL.len(), 11);
}

#[test]
fn every_error_code_has_a_row_in_the_docs() {
    use lumina_a2a::Error;
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/a2a.md")).unwrap();
    let every = [
        Error::Parse(String::new()),
        Error::InvalidRequest(String::new()),
        Error::MethodNotFound(String::new()),
        Error::InvalidParams(String::new()),
        Error::Internal(String::new()),
        Error::TaskNotFound(String::new()),
        Error::TaskNotCancelable(String::new()),
        Error::PushNotificationNotSupported,
        Error::UnsupportedOperation(String::new()),
        Error::ContentTypeNotSupported(String::new()),
        Error::InvalidAgentResponse(String::new()),
        Error::ExtendedAgentCardNotConfigured,
        Error::ExtensionSupportRequired(String::new()),
        Error::VersionNotSupported(String::new()),
    ];
    for error in every {
        let row = format!(
            "| {} | {} |",
            error.code(),
            error
                .reason()
                .map(|r| format!("`{r}`"))
                .unwrap_or("—".into())
        );
        assert!(doc.contains(&row), "docs/a2a.md has no row `{row}`");
    }
}
