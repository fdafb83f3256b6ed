//! MCP servers in agent runs: the reference server `@modelcontextprotocol/server-everything`
//! (real, from npm) over stdio as a project server (trust asked once, through the
//! permission dialog) and over Streamable HTTP as a user server; read-only tools run without
//! asking, the others ask; `mcp.status` lists servers, states and tools.

use lumina_client::Notifications;
use lumina_protocol::{Decision, Event};
use lumina_testkit::{McpPeers, Turn};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::*;

/// Answers the next permission request, which must be for `tool`; returns its event.
async fn answer(
    client: &lumina_client::Client,
    notes: &mut Notifications,
    session_id: &str,
    tool: &str,
    decision: Decision,
) -> Event {
    let frame = next_event(notes, "permission.requested").await;
    let Event::PermissionRequested {
        request_id,
        tool: asked,
        ..
    } = &frame.event
    else {
        unreachable!()
    };
    assert_eq!(asked, tool);
    client
        .permission_respond(session_id, request_id, decision, None)
        .await
        .unwrap();
    frame.event
}

fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn project_stdio_server_is_trusted_once_and_its_tools_run_under_permissions() {
    let peers = McpPeers::locate().unwrap();
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("mcp__everything__echo", json!({"message": "hi from mcp"})),
            Turn::tool_call("mcp__everything__toggle-simulated-logging", json!({})),
            Turn::text("done"),
            Turn::tool_call("mcp__everything__get-sum", json!({"a": 2, "b": 40})),
            Turn::text("sum done"),
        ],
    )
    .await;
    let (command, args) = peers.everything_stdio();
    std::fs::write(
        h.path(".mcp.json"),
        json!({"mcpServers": {"everything": {"command": command, "args": args}}}).to_string(),
    )
    .unwrap();
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;

    // Before trust: listed, untrusted, no tools.
    let status = client.mcp_status(&session.id).await.unwrap();
    assert_eq!(status.servers.len(), 1);
    assert_eq!(status.servers[0].state, "untrusted");
    assert_eq!(status.servers[0].source, "project");
    assert!(status.servers[0].tools.is_empty());

    let run = client
        .session_submit(&submit(
            &session.id,
            "use the mcp tools",
            json!({"permission_mode": "ask"}),
        ))
        .await
        .unwrap();
    let trust = answer(
        &client,
        &mut notes,
        &session.id,
        "mcp_trust",
        Decision::AllowOnce,
    )
    .await;
    let Event::PermissionRequested {
        arguments, preview, ..
    } = trust
    else {
        unreachable!()
    };
    assert_eq!(arguments["server"], "everything");
    assert!(preview.unwrap().contains("dist/index.js stdio"));
    // `echo` is read-only: it runs without asking. The toggle is not: the dialog asks.
    answer(
        &client,
        &mut notes,
        &session.id,
        "mcp__everything__toggle-simulated-logging",
        Decision::AllowOnce,
    )
    .await;
    until_run_end(&mut notes, &run.run_id).await;

    let frames = client
        .session_events(&session.id, 0, None)
        .await
        .unwrap()
        .events;
    let outputs = tool_outputs(&frames);
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    assert_eq!(outputs[0].0, "mcp__everything__echo");
    assert!(
        !outputs[0].1 && outputs[0].2.contains("hi from mcp"),
        "{outputs:?}"
    );
    assert_eq!(outputs[1].0, "mcp__everything__toggle-simulated-logging");
    assert!(!outputs[1].1, "{outputs:?}");
    let first_request = &h.model.requests()[0];
    let offered = offered_tools(&first_request.body);
    assert!(
        offered.contains(&"mcp__everything__echo".to_string()),
        "{offered:?}"
    );
    assert!(offered.contains(&"read_file".to_string()));

    let status = client.mcp_status(&session.id).await.unwrap();
    assert_eq!(status.servers[0].state, "connected");
    assert!(status.servers[0]
        .tools
        .contains(&"mcp__everything__get-sum".to_string()));

    // Trust is recorded once: a new session of the project is not asked again.
    let other = h.session(&client).await;
    let (client2, mut notes2) = h.client().await;
    client2.session_resume(&other.id, 0).await.unwrap();
    let run = client2
        .session_submit(&submit(&other.id, "sum", json!({"permission_mode": "ask"})))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes2, &run.run_id).await);
    assert!(
        !kinds(&frames).contains(&"permission.requested"),
        "{:?}",
        kinds(&frames)
    );
    let outputs = tool_outputs(&frames);
    assert_eq!(outputs.len(), 1);
    assert!(outputs[0].2.contains("42"), "{outputs:?}");
    h.stop().await;
}

#[tokio::test]
async fn user_http_server_works_and_headless_runs_are_told_about_untrusted_servers() {
    let peers = McpPeers::locate().unwrap();
    let server = peers.everything_http("streamableHttp").unwrap();
    let h = Harness::start(
        "openai",
        vec![
            Turn::tool_call("mcp__web__get-sum", json!({"a": 20, "b": 22})),
            Turn::text("done"),
        ],
    )
    .await;
    let app_config = h.tmp.path().join("app").join("config");
    std::fs::create_dir_all(&app_config).unwrap();
    std::fs::write(
        app_config.join("mcp.json"),
        json!({"mcpServers": {"web": {"url": server.mcp_url()}}}).to_string(),
    )
    .unwrap();
    // A project server nobody trusted: a headless run cannot ask, so it warns.
    std::fs::write(
        h.path(".mcp.json"),
        json!({"mcpServers": {"local": {"command": "/bin/false"}}}).to_string(),
    )
    .unwrap();
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let mut params = submit(&session.id, "add", json!({"permission_mode": "ask"}));
    params.headless = true;
    let run = client.session_submit(&params).await.unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    let outputs = tool_outputs(&frames);
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    assert!(!outputs[0].1 && outputs[0].2.contains("42"), "{outputs:?}");
    let warning = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::Warning { code, message, .. } if code == "mcp_untrusted" => {
                Some(message.clone())
            }
            _ => None,
        })
        .expect("a warning about the untrusted project server");
    assert!(warning.contains("/mcp trust local"), "{warning}");

    let status = client.mcp_status(&session.id).await.unwrap();
    let web = status.servers.iter().find(|s| s.name == "web").unwrap();
    assert_eq!(
        (web.source.as_str(), web.transport.as_str()),
        ("user", "http")
    );
    assert_eq!(web.state, "connected");
    // Trusting by method; an unknown server is a clear error.
    client.mcp_trust(&session.id, "local").await.unwrap();
    let err = client.mcp_trust(&session.id, "nope").await.unwrap_err();
    assert!(err
        .to_string()
        .contains("no project MCP server named `nope`"));
    h.stop().await;
}
