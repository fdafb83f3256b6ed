//! `mcp.status` and `mcp.trust`: the session's MCP servers as `/mcp` shows them, and trusting
//! a project server. Both run on the session's owner (the MCP processes live there).

use lumina_mcp::client::TransportKind;
use lumina_mcp::config::ServerSource;
use lumina_mcp::{ServerState, ServerStatus};
use lumina_protocol::methods::{McpServerStatus, McpStatusResult};
use lumina_protocol::{ErrorCode, ErrorObject};
use lumina_runtime::Session;

/// The servers of the session's project and of the user; config problems are listed as
/// failed entries so `/mcp` shows them too.
pub async fn status(session: &Session) -> McpStatusResult {
    let Some(manager) = session.mcp() else {
        return McpStatusResult::default();
    };
    let root = session.project_root();
    let mut servers: Vec<McpServerStatus> = manager
        .status(root)
        .await
        .into_iter()
        .map(server_status)
        .collect();
    for problem in manager.config_errors(root).await {
        servers.push(McpServerStatus {
            name: "(config)".into(),
            source: "config".into(),
            transport: String::new(),
            state: "failed".into(),
            detail: Some(problem),
            protocol_version: None,
            tools: Vec::new(),
        });
    }
    McpStatusResult { servers }
}

/// Trusts a project server of the session's project.
pub fn trust(session: &Session, server: &str) -> Result<(), ErrorObject> {
    let manager = session
        .mcp()
        .ok_or_else(|| ErrorObject::new(ErrorCode::NotFound, "this backend has no MCP support"))?;
    manager
        .trust(session.project_root(), server)
        .map_err(|e| match e {
            lumina_mcp::Error::UnknownServer(_) => ErrorObject::new(
                ErrorCode::NotFound,
                format!("no project MCP server named `{server}` in .mcp.json"),
            ),
            other => ErrorObject::new(ErrorCode::Internal, format!("cannot record trust: {other}")),
        })
}

fn server_status(s: ServerStatus) -> McpServerStatus {
    let (state, detail) = match s.state {
        ServerState::Connecting => ("connecting", None),
        ServerState::Connected => ("connected", None),
        ServerState::Failed(reason) => ("failed", Some(reason)),
        ServerState::Untrusted => (
            "untrusted",
            Some(format!(
                "runs {}; trust it with /mcp trust {}",
                s.target, s.name
            )),
        ),
        ServerState::Disabled => ("disabled", None),
    };
    McpServerStatus {
        source: match s.source {
            ServerSource::User => "user",
            ServerSource::Project => "project",
        }
        .into(),
        transport: match s.transport {
            TransportKind::Stdio => "stdio",
            TransportKind::Http => "http",
            TransportKind::Sse => "sse",
        }
        .into(),
        state: state.into(),
        detail,
        protocol_version: s.protocol_version,
        tools: s.tools,
        name: s.name,
    }
}
