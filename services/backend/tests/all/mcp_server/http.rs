//! `mcp-server --http`: bearer forwarding (401 without or with a wrong bearer), the
//! configured credential's bearer, and the conformance suite's protocol scenarios.

use std::collections::HashMap;
use std::time::Duration;

use lumina_testkit::McpPeers;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Child;

use super::{mcp_server, token_file};
use crate::support::*;

/// A minimal HTTP/1.1 exchange (JSON answers only: `Accept: application/json`).
async fn http(
    addr: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, HashMap<String, String>, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut request = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut raw))
        .await
        .expect("no HTTP answer within 30 s")
        .unwrap();
    let raw = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, body.to_string())
}

async fn spawn_http(h: &Harness, extra: &[&str]) -> (Child, String) {
    let mut args = vec!["--http", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut child = mcp_server(h, &args).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(30), stdout.next_line())
        .await
        .unwrap()
        .unwrap()
        .expect("mcp-server printed no address");
    (child, addr)
}

fn init_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

#[tokio::test]
async fn http_without_a_configured_credential_requires_the_bearer() {
    let h = Harness::start("anthropic", vec![]).await;
    let (_child, addr) = spawn_http(&h, &[]).await;

    let (status, headers, body) = http(&addr, "POST", &[], Some(init_body())).await;
    assert_eq!(
        (status, headers["www-authenticate"].as_str()),
        (401, "Bearer")
    );
    assert!(!body.contains(&h.token));
    let wrong = "Bearer not-the-token";
    let (status, headers, _) = http(
        &addr,
        "POST",
        &[("Authorization", wrong)],
        Some(init_body()),
    )
    .await;
    assert_eq!(
        (status, headers["www-authenticate"].as_str()),
        (401, "Bearer")
    );

    let right = format!("Bearer {}", h.token);
    let auth = [("Authorization", right.as_str())];
    let (status, headers, body) = http(&addr, "POST", &auth, Some(init_body())).await;
    assert_eq!(status, 200, "{body}");
    let session = headers["mcp-session-id"].clone();
    let with_session = [
        ("Authorization", right.as_str()),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(http(&addr, "POST", &with_session, Some(note)).await.0, 202);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "lumina_session_start", "arguments": {"project_root": h.project, "title": "over http"}}});
    let (status, _, body) = http(&addr, "POST", &with_session, Some(call)).await;
    assert_eq!(status, 200, "{body}");
    let reply: Value = serde_json::from_str(&body).unwrap();
    let session_id = reply["result"]["structuredContent"]["session_id"]
        .as_str()
        .unwrap();
    // The session exists in the backend, created with the forwarded bearer.
    let (client, _notes) = h.client().await;
    assert_eq!(
        client.session_info(session_id).await.unwrap().session.title,
        "over http"
    );

    // The session does not outlive a wrong bearer either.
    let bad_session = [
        ("Authorization", wrong),
        ("Mcp-Session-Id", session.as_str()),
    ];
    let (status, _, _) = http(
        &addr,
        "POST",
        &bad_session,
        Some(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})),
    )
    .await;
    assert_eq!(status, 401);
    h.stop().await;
}

#[tokio::test]
async fn http_with_a_configured_credential_requires_that_same_bearer() {
    let h = Harness::start("anthropic", vec![]).await;
    let tokens = token_file(&h);
    let (_child, addr) = spawn_http(&h, &["--token-file", tokens.to_str().unwrap()]).await;
    let (status, headers, _) = http(&addr, "POST", &[], Some(init_body())).await;
    assert_eq!(
        (status, headers["www-authenticate"].as_str()),
        (401, "Bearer")
    );
    let wrong = [("Authorization", "Bearer x")];
    assert_eq!(http(&addr, "POST", &wrong, Some(init_body())).await.0, 401);
    let right = format!("Bearer {}", h.token);
    let (status, _, body) = http(
        &addr,
        "POST",
        &[("Authorization", right.as_str())],
        Some(init_body()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    h.stop().await;
}

#[tokio::test]
async fn conformance_protocol_scenarios_pass() {
    let peers = McpPeers::locate().unwrap();
    let h = Harness::start("anthropic", vec![]).await;
    let tokens = token_file(&h);
    // The suite cannot send a bearer: this server accepts requests without one.
    let (_child, addr) =
        spawn_http(&h, &["--token-file", tokens.to_str().unwrap(), "--no-auth"]).await;
    let url = format!("http://{addr}/mcp");
    let output_dir = h.tmp.path().join("conformance");
    std::fs::create_dir_all(&output_dir).unwrap();
    for scenario in [
        "server-initialize",
        "ping",
        "tools-list",
        "logging-set-level",
        "dns-rebinding-protection",
    ] {
        // Off the runtime: the backend the scenarios reach runs in this process.
        let (peers, url, dir) = (peers.clone(), url.clone(), output_dir.clone());
        let output = tokio::task::spawn_blocking(move || {
            peers.conformance(&["server", "--url", &url, "--scenario", scenario], &dir)
        })
        .await
        .unwrap()
        .unwrap();
        assert!(
            output.status.success(),
            "scenario {scenario} failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    h.stop().await;
}

/// The whole server suite (`--suite all`: every scenario, fixture tools, resources and
/// prompts included) through this command's transports and protocol code, with the
/// suite's fixtures in place of Lumina's tools.
#[tokio::test]
async fn the_full_conformance_server_suite_passes_with_the_fixtures() {
    let peers = McpPeers::locate().unwrap();
    let h = Harness::start("anthropic", vec![]).await;
    let (_child, addr) = spawn_http(&h, &["--conformance-fixtures", "--no-auth"]).await;
    let url = format!("http://{addr}/mcp");
    let output_dir = h.tmp.path().join("conformance-all");
    std::fs::create_dir_all(&output_dir).unwrap();
    let output = tokio::task::spawn_blocking(move || {
        peers.conformance(&["server", "--url", &url, "--suite", "all"], &output_dir)
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(" 0 failed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    h.stop().await;
}
