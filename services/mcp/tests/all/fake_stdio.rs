//! Scripted stdio servers (`sh -c`): malformed output, crashes, era detection.

use anyhow::Result;
use lumina_mcp::client::{ClientSession, ConnectOptions, Endpoint, ProtocolPref};
use lumina_mcp::{version, Error};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::Duration;

fn sh(script: &str) -> Endpoint {
    Endpoint::Stdio {
        command: "sh".into(),
        args: vec!["-c".into(), script.into()],
        env: Vec::new(),
        cwd: None,
    }
}

fn handshake_only() -> ConnectOptions {
    ConnectOptions {
        protocol: ProtocolPref::Handshake,
        ..ConnectOptions::default()
    }
}

const INIT_REPLY: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"0"}}}"#;

#[tokio::test(flavor = "multi_thread")]
async fn garbage_lines_are_skipped_not_fatal() -> Result<()> {
    let script = format!(
        r#"read -r l
echo 'this is not json'
echo '{{"jsonrpc":"2.0"}}'
echo '[1,2]'
echo '{{"jsonrpc":"1.0","id":1,"result":{{}}}}'
echo '{INIT_REPLY}'
read -r l
read -r l
echo '{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{{"name":"t"}},{{"description":"no name"}}]}}}}'
read -r l
echo 'garbage again {{'
echo '{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"ok"}}]}}}}'
cat >/dev/null"#
    );
    let session = ClientSession::connect(&sh(&script), &handshake_only()).await?;
    let tools = session.list_tools().await?;
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].input_schema, json!({"type": "object"}));
    let result = session
        .call_tool("t", json!({}), Duration::from_secs(30), None)
        .await?;
    assert_eq!(lumina_mcp::result_text(&result), "ok");
    session.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_dies_fails_the_request_with_its_last_words() -> Result<()> {
    let script = "read -r l; echo 'not json'; echo 'fatal: boom' >&2; exit 3";
    let err = ClientSession::connect(&sh(script), &handshake_only())
        .await
        .err()
        .expect("an error");
    let msg = err.to_string();
    assert!(matches!(err, Error::Closed(_)), "{err:?}");
    assert!(
        msg.contains("status 3") && msg.contains("fatal: boom"),
        "{msg}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn unsupported_versions_are_refused_by_name() -> Result<()> {
    let script = r#"read -r l; echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1999-01-01","capabilities":{}}}'; cat >/dev/null"#;
    let err = ClientSession::connect(&sh(script), &handshake_only())
        .await
        .err()
        .expect("an error");
    assert!(
        matches!(&err, Error::UnsupportedVersion(v) if v == "1999-01-01"),
        "{err:?}"
    );
    assert!(err.to_string().contains("1999-01-01"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_falls_back_to_initialize_on_method_not_found() -> Result<()> {
    let script = r#"read -r l
case "$l" in *'"server/discover"'*) ;; *) exit 7;; esac
echo '{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}'
read -r l
case "$l" in *'"initialize"'*) ;; *) exit 8;; esac
echo '{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}'
cat >/dev/null"#;
    let session = ClientSession::connect(&sh(script), &ConnectOptions::default()).await?;
    assert_eq!(session.protocol_version(), version::V2025_06_18);
    assert!(!session.info().stateless);
    session.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_stdio_server_gets_meta_on_every_request() -> Result<()> {
    // Exits with a distinct status (so the request fails) when a check does not hold.
    let script = r#"read -r l
case "$l" in *'"server/discover"'*) ;; *) echo "no discover" >&2; exit 7;; esac
echo '{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"modern","version":"1"}}}}'
read -r l
case "$l" in *'"tools/call"'*) ;; *) echo "no call" >&2; exit 8;; esac
case "$l" in *'"io.modelcontextprotocol/protocolVersion":"2026-07-28"'*) ;; *) echo "no version meta" >&2; exit 9;; esac
case "$l" in *'"io.modelcontextprotocol/clientInfo"'*) ;; *) echo "no client info" >&2; exit 10;; esac
case "$l" in *'"io.modelcontextprotocol/clientCapabilities"'*) ;; *) echo "no caps" >&2; exit 11;; esac
echo '{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","content":[{"type":"text","text":"stateless ok"}]}}'
cat >/dev/null"#;
    let session = ClientSession::connect(&sh(script), &ConnectOptions::default()).await?;
    assert!(session.info().stateless);
    assert_eq!(session.protocol_version(), version::STATELESS);
    assert_eq!(session.info().server_info["name"], "modern");
    let result = session
        .call_tool("x", json!({}), Duration::from_secs(30), None)
        .await?;
    assert_eq!(lumina_mcp::result_text(&result), "stateless ok");
    session.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timed_out_call_is_cancelled_on_the_server() -> Result<()> {
    // Never answers the first call; answers the second only after seeing its cancellation.
    let script = format!(
        r#"read -r l
echo '{INIT_REPLY}'
read -r l
read -r l
read -r l
case "$l" in *'"notifications/cancelled"'*) ;; *) echo "no cancel" >&2; exit 5;; esac
case "$l" in *'"requestId":2'*) ;; *) echo "wrong id" >&2; exit 6;; esac
read -r l
echo '{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"after cancel"}}]}}}}'
cat >/dev/null"#
    );
    let session = ClientSession::connect(&sh(&script), &handshake_only()).await?;
    let first = session
        .call_tool("slow", json!({}), Duration::from_millis(200), None)
        .await;
    assert!(
        matches!(first, Err(Error::Timeout { ms: 200, .. })),
        "{first:?}"
    );
    let second = session
        .call_tool("slow", json!({}), Duration::from_secs(30), None)
        .await?;
    assert_eq!(lumina_mcp::result_text(&second), "after cancel");
    session.close().await;
    Ok(())
}
