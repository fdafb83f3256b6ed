//! The reference server (`server-everything`) over stdio, through the manager.

use anyhow::Result;
use lumina_mcp::client::{ClientSession, ConnectOptions, Endpoint, TransportKind};
use lumina_mcp::config::ServerSource;
use lumina_mcp::{version, Error, ManagerOptions, McpManager, ServerState};
use lumina_testkit::McpPeers;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::Duration;

use crate::support::{self, Env};

const SECRET: &str = "s3cret-value-7781";

#[tokio::test(flavor = "multi_thread")]
async fn tools_calls_env_expansion_and_raw_status() -> Result<()> {
    std::env::set_var("LUMINA_MCP_TEST_SECRET", SECRET);
    let env = Env::new()?;
    env.write_user_config(
        &json!({"mcpServers": {"everything": support::everything_stdio(
        &["--label=${LUMINA_MCP_TEST_SECRET}"],
        json!({
            "LUMINA_FROM_CONFIG": "${LUMINA_MCP_TEST_SECRET}",
            "LUMINA_DEFAULTED": "${LUMINA_MCP_UNSET_FOR_TEST:-fallback}",
        }),
    )?}}),
    )?;
    let manager = env.manager();
    let tools = manager.tools(&env.project).await;

    let echo = support::find_tool(&tools, "mcp__everything__echo")?;
    let d = echo.descriptor();
    assert!(d.read_only, "echo is annotated readOnlyHint");
    assert!(!d.edits_files);
    assert!(
        d.description.starts_with("[MCP everything] "),
        "{}",
        d.description
    );
    assert_eq!(d.input_schema["properties"]["message"]["type"], "string");

    let ctx = env.ctx();
    let out = echo.call(&ctx, json!({"message": "hi"})).await;
    assert_eq!((out.content.as_str(), out.is_error), ("Echo: hi", false));
    let sum = support::find_tool(&tools, "mcp__everything__get-sum")?;
    let out = sum.call(&ctx, json!({"a": 2, "b": 3})).await;
    assert_eq!(out.content, "The sum of 2 and 3 is 5.");

    let bad = echo.call(&ctx, json!([1])).await;
    assert!(
        bad.is_error && bad.content.contains("must be a JSON object"),
        "{}",
        bad.content
    );

    let get_env = support::find_tool(&tools, "mcp__everything__get-env")?;
    let out = get_env.call(&ctx, json!({})).await;
    assert!(
        out.content
            .contains(&format!("\"LUMINA_FROM_CONFIG\": \"{SECRET}\"")),
        "env not passed"
    );
    assert!(out.content.contains("\"LUMINA_DEFAULTED\": \"fallback\""));

    let status = support::status_of(&manager, &env.project, "everything").await?;
    assert_eq!(status.state, ServerState::Connected);
    assert_eq!(
        (status.source, status.transport),
        (ServerSource::User, TransportKind::Stdio)
    );
    assert!(status
        .protocol_version
        .as_deref()
        .is_some_and(version::is_handshake));
    assert!(status.tools.iter().any(|t| t == "mcp__everything__echo"));
    assert!(
        status.target.contains("--label=${LUMINA_MCP_TEST_SECRET}"),
        "{}",
        status.target
    );
    let listing = format!("{:?}", manager.status(&env.project).await);
    assert!(
        !listing.contains(SECRET),
        "the status must not show expanded values"
    );
    manager.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_server_restarts_on_the_next_call() -> Result<()> {
    let env = Env::new()?;
    env.write_user_config(
        &json!({"mcpServers": {"everything": support::everything_stdio(&[], json!({}))?}}),
    )?;
    let manager = env.manager();
    let tools = manager.tools(&env.project).await;
    let echo = support::find_tool(&tools, "mcp__everything__echo")?;
    let pid = manager
        .server_pid(&env.project, "everything")
        .expect("a pid");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()?;
    assert!(killed.success());
    let status = support::wait_for_state(&manager, &env.project, "everything", |s| {
        !matches!(s, ServerState::Connected)
    })
    .await?;
    assert!(
        matches!(&status.state, ServerState::Failed(r) if r.contains("signal")),
        "{status:?}"
    );

    let out = echo.call(&env.ctx(), json!({"message": "again"})).await;
    assert_eq!((out.content.as_str(), out.is_error), ("Echo: again", false));
    let new_pid = manager
        .server_pid(&env.project, "everything")
        .expect("a pid");
    assert_ne!(pid, new_pid);
    manager.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_past_its_timeout_is_an_error_and_the_session_survives() -> Result<()> {
    let env = Env::new()?;
    env.write_user_config(
        &json!({"mcpServers": {"everything": support::everything_stdio(&[], json!({}))?}}),
    )?;
    let manager = McpManager::new(ManagerOptions {
        mcp_tool_timeout_ms: 500,
        ..ManagerOptions::new(env.app_root.clone())
    });
    let tools = manager.tools(&env.project).await;
    let long = support::find_tool(&tools, "mcp__everything__trigger-long-running-operation")?;
    let pid = manager.server_pid(&env.project, "everything");
    let out = long
        .call(&env.ctx(), json!({"duration": 30, "steps": 2}))
        .await;
    assert!(
        out.is_error && out.content.contains("timed out after 500 ms"),
        "{}",
        out.content
    );
    let status = support::status_of(&manager, &env.project, "everything").await?;
    assert_eq!(status.state, ServerState::Connected);
    assert_eq!(
        manager.server_pid(&env.project, "everything"),
        pid,
        "no restart"
    );
    manager.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn client_session_over_stdio() -> Result<()> {
    let (command, args) = McpPeers::locate()?.everything_stdio();
    let endpoint = Endpoint::Stdio {
        command,
        args,
        env: Vec::new(),
        cwd: None,
    };
    let session = ClientSession::connect(&endpoint, &ConnectOptions::default()).await?;
    assert!(!session.info().stateless);
    assert_eq!(session.protocol_version(), version::LATEST_HANDSHAKE);
    session.ping().await?;
    let tools = session.list_tools().await?;
    let echo = tools.iter().find(|t| t.name == "echo").expect("echo");
    assert!(echo.read_only_hint);

    let long = session
        .call_tool(
            "trigger-long-running-operation",
            json!({"duration": 30, "steps": 2}),
            Duration::from_millis(500),
            None,
        )
        .await;
    assert!(
        matches!(long, Err(Error::Timeout { ms: 500, .. })),
        "{long:?}"
    );
    let cancel = tokio_util::sync::CancellationToken::new();
    cancel.cancel();
    let cancelled = session
        .call_tool(
            "trigger-long-running-operation",
            json!({"duration": 30}),
            Duration::from_secs(60),
            Some(&cancel),
        )
        .await;
    assert!(matches!(cancelled, Err(Error::Cancelled)), "{cancelled:?}");
    let ok = session
        .call_tool(
            "echo",
            json!({"message": "x"}),
            Duration::from_secs(30),
            None,
        )
        .await?;
    assert_eq!(lumina_mcp::result_text(&ok), "Echo: x");
    session.close().await;
    assert!(session.closed_reason().is_some());
    assert!(session.ping().await.is_err());
    Ok(())
}
