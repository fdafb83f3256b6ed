//! The reference server over Streamable HTTP and over the legacy HTTP+SSE transport.

use anyhow::Result;
use lumina_mcp::client::{ClientSession, ConnectOptions, Endpoint, HttpMode, TransportKind};
use lumina_mcp::{version, Error};
use lumina_testkit::McpPeers;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::Duration;

fn http(url: String, mode: HttpMode) -> Result<Endpoint> {
    Ok(Endpoint::Http {
        url: url::Url::parse(&url)?,
        headers: vec![("X-Test".into(), "1".into())],
        mode,
        oauth: None,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn streamable_http_session() -> Result<()> {
    let server = McpPeers::locate()?.everything_http("streamableHttp")?;
    let endpoint = http(server.mcp_url(), HttpMode::Auto)?;
    let session = ClientSession::connect(&endpoint, &ConnectOptions::default()).await?;
    assert_eq!(session.info().transport, TransportKind::Http);
    assert_eq!(session.protocol_version(), version::LATEST_HANDSHAKE);
    assert!(!session.info().stateless);
    session.ping().await?;
    let tools = session.list_tools().await?;
    assert!(tools.iter().any(|t| t.name == "get-sum"));
    let sum = session
        .call_tool(
            "get-sum",
            json!({"a": 1, "b": 2}),
            Duration::from_secs(30),
            None,
        )
        .await?;
    assert_eq!(lumina_mcp::result_text(&sum), "The sum of 1 and 2 is 3.");

    let long = session
        .call_tool(
            "trigger-long-running-operation",
            json!({"duration": 30, "steps": 2}),
            Duration::from_millis(500),
            None,
        )
        .await;
    assert!(matches!(long, Err(Error::Timeout { .. })), "{long:?}");
    let echo = session
        .call_tool(
            "echo",
            json!({"message": "still here"}),
            Duration::from_secs(30),
            None,
        )
        .await?;
    assert_eq!(lumina_mcp::result_text(&echo), "Echo: still here");
    session.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_sse_by_fallback_and_by_type() -> Result<()> {
    let server = McpPeers::locate()?.everything_http("sse")?;
    for mode in [HttpMode::Auto, HttpMode::LegacySse] {
        let endpoint = http(server.sse_url(), mode)?;
        let session = ClientSession::connect(&endpoint, &ConnectOptions::default()).await?;
        assert_eq!(session.info().transport, TransportKind::Sse, "{mode:?}");
        let echo = session
            .call_tool(
                "echo",
                json!({"message": "old"}),
                Duration::from_secs(30),
                None,
            )
            .await?;
        assert_eq!(lumina_mcp::result_text(&echo), "Echo: old");
        session.close().await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn streamable_only_does_not_fall_back() -> Result<()> {
    let server = McpPeers::locate()?.everything_http("sse")?;
    let endpoint = http(server.sse_url(), HttpMode::Streamable)?;
    let err = ClientSession::connect(&endpoint, &ConnectOptions::default())
        .await
        .err()
        .expect("an error");
    assert!(
        matches!(err, Error::HttpStatus { status: 404, .. }),
        "{err:?}"
    );
    Ok(())
}
