//! MCP servers in a run (docs/design.md#mcp): the project's and the user's servers
//! (`lumina_mcp::McpManager`) offer their tools as `mcp__<server>__<tool>`, which go
//! through hooks and the permission engine like any tool (not read-only → asked in `ask`
//! mode).
//!
//! A project server (`<project>/.mcp.json`) runs only once trusted. At the start of a
//! top-level run each untrusted project server is put to the user (`crate::trust`) as the
//! pseudo-tool `mcp_trust` (arguments: the server and its raw, unexpanded command or URL);
//! allowing records the trust under the AppRoot (asked once per definition). Headless runs
//! get a warning naming `/mcp trust <name>`. Configuration problems become warnings too.
//! A server waiting for a person to sign in (OAuth) is waited for: `crate::mcp_sign_in`.

use std::sync::Arc;

use lumina_mcp::config::ServerSource;
use lumina_mcp::{ServerState, ServerStatus};
use lumina_tools::Tool;
use serde_json::json;

use crate::run::RunContext;
use crate::trust::{self, Question};
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
        ctx.warn("mcp_config", problem).await?;
    }
    let untrusted: Vec<ServerStatus> = manager
        .status(root)
        .await
        .into_iter()
        .filter(|s| s.state == ServerState::Untrusted && s.source == ServerSource::Project)
        .collect();
    for server in untrusted {
        if ctx.cancel.is_cancelled() {
            break;
        }
        ask_trust(ctx, &server).await?;
    }
    Ok(())
}

/// The MCP tools a step offers (connecting servers not connected yet). A server that
/// waits for a person to sign in is waited for first (`crate::mcp_sign_in`), then listed
/// again.
pub(crate) async fn refresh_tools(ctx: &RunContext) -> Result<()> {
    let Some(manager) = ctx.session.mcp() else {
        return Ok(());
    };
    let root = ctx.session.project_root();
    let mut tools = manager.tools(root).await;
    if crate::mcp_sign_in::wait_for_sign_ins(ctx, manager).await? {
        tools = manager.tools(root).await;
    }
    ctx.session.lock().mcp_tools = tools;
    Ok(())
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
    let question = Question {
        tool: TRUST_TOOL,
        key: format!("mcp-{name}"),
        arguments: json!({ "server": name, "target": server.target }),
        preview: format!(
            "Trust the project MCP server `{name}`? It runs: {}",
            server.target
        ),
        headless: (
            "mcp_untrusted",
            format!(
                "project MCP server `{name}` (.mcp.json) is not trusted, so its tools are not \
                 offered; trust it once with `/mcp trust {name}` in lumina"
            ),
        ),
    };
    if trust::ask(ctx, question).await? {
        if let Some(manager) = ctx.session.mcp() {
            if let Err(err) = manager.trust(ctx.session.project_root(), &name) {
                let message = format!("could not record trust in `{name}`: {err}");
                ctx.warn("mcp_trust_failed", message).await?;
            }
        }
    }
    Ok(())
}
