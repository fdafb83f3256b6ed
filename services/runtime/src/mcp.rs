//! MCP servers in a run (SYSTEM.md §7): the project's and the user's servers
//! (`lumina_mcp::McpManager`) offer their tools as `mcp__<server>__<tool>`, which go through
//! hooks and the permission engine like any tool (not read-only → asked in `ask` mode).
//!
//! A project server (`<project>/.mcp.json`) runs only once trusted. At the start of a
//! top-level run each untrusted project server is put to the user as a permission request
//! for the pseudo-tool `mcp_trust` (arguments: the server and its raw, unexpanded command or
//! URL); allowing records the trust under the AppRoot (asked once per definition), denying
//! is remembered for the session. Headless runs cannot ask: they get a warning naming
//! `/mcp trust <name>`. Configuration problems become warnings too.

use std::sync::Arc;

use lumina_mcp::config::ServerSource;
use lumina_mcp::{ServerState, ServerStatus};
use lumina_protocol::{Decision, Event};
use lumina_tools::permission::args_hash;
use lumina_tools::Tool;
use serde_json::json;

use crate::run::RunContext;
use crate::Result;

/// The pseudo-tool of a trust question.
pub const TRUST_TOOL: &str = "mcp_trust";

/// Before a top-level run's first step: trust questions and configuration warnings.
pub(crate) async fn prepare(ctx: &RunContext) -> Result<()> {
    let Some(manager) = ctx.session.mcp() else {
        return Ok(());
    };
    let root = ctx.session.project_root();
    for problem in manager.config_errors(root).await {
        warn(ctx, "mcp_config", problem).await?;
    }
    let untrusted: Vec<ServerStatus> = manager
        .status(root)
        .await
        .into_iter()
        .filter(|s| s.state == ServerState::Untrusted && s.source == ServerSource::Project)
        .filter(|s| !ctx.session.lock().mcp_declined.contains(&s.name))
        .collect();
    for server in untrusted {
        if ctx.cancel.is_cancelled() {
            break;
        }
        ask_trust(ctx, &server).await?;
    }
    Ok(())
}

/// The MCP tools a step offers (connecting servers not connected yet).
pub(crate) async fn refresh_tools(ctx: &RunContext) {
    let Some(manager) = ctx.session.mcp() else {
        return;
    };
    let tools = manager.tools(ctx.session.project_root()).await;
    ctx.session.lock().mcp_tools = tools;
}

/// The MCP tool of that name, as last listed.
pub(crate) fn tool(ctx: &RunContext, name: &str) -> Option<Arc<dyn Tool>> {
    ctx.session
        .lock()
        .mcp_tools
        .iter()
        .find(|t| t.descriptor().name == name)
        .cloned()
}

/// The MCP tools as last listed.
pub(crate) fn tools(ctx: &RunContext) -> Vec<Arc<dyn Tool>> {
    ctx.session.lock().mcp_tools.clone()
}

async fn ask_trust(ctx: &RunContext, server: &ServerStatus) -> Result<()> {
    let name = server.name.clone();
    if ctx.headless {
        let message = format!(
            "project MCP server `{name}` (.mcp.json) is not trusted, so its tools are not offered; \
             trust it once with `/mcp trust {name}` in lumina"
        );
        return warn(ctx, "mcp_untrusted", message).await;
    }
    let arguments = json!({ "server": name, "target": server.target });
    let request_id = uuid::Uuid::new_v4().to_string();
    let answer = ctx.session.register_permission(&request_id);
    ctx.append(vec![Event::PermissionRequested {
        run_id: ctx.run_id.clone(),
        request_id: request_id.clone(),
        call_id: format!("mcp-trust-{name}"),
        tool: TRUST_TOOL.into(),
        args_hash: args_hash(TRUST_TOOL, &arguments),
        arguments,
        preview: Some(format!(
            "Trust the project MCP server `{name}`? It runs: {}",
            server.target
        )),
    }])
    .await?;
    let answer = tokio::select! {
        a = answer => a.ok(),
        _ = ctx.cancel.cancelled() => None,
    };
    ctx.session.forget_permission(&request_id);
    let (decision, by, reason) = match answer {
        None => (
            Decision::Deny,
            "interrupt",
            Some("the run was interrupted".to_string()),
        ),
        Some((decision, reason)) => (decision, "user", reason),
    };
    let mut trust_failed = None;
    if decision == Decision::Deny {
        ctx.session.lock().mcp_declined.insert(name.clone());
    } else if let Some(manager) = ctx.session.mcp() {
        if let Err(err) = manager.trust(ctx.session.project_root(), &name) {
            trust_failed = Some(format!("could not record trust in `{name}`: {err}"));
        }
    }
    ctx.append(vec![Event::PermissionResolved {
        run_id: ctx.run_id.clone(),
        request_id,
        decision,
        by: by.into(),
        reason,
    }])
    .await?;
    if let Some(message) = trust_failed {
        warn(ctx, "mcp_trust_failed", message).await?;
    }
    Ok(())
}

async fn warn(ctx: &RunContext, code: &str, message: String) -> Result<()> {
    ctx.append(vec![Event::Warning {
        code: code.into(),
        message,
        run_id: Some(ctx.run_id.clone()),
    }])
    .await?;
    Ok(())
}
