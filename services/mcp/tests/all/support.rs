//! Test helpers: temp AppRoots and projects, config definitions of the reference server
//! (`@modelcontextprotocol/server-everything`, located by [`McpPeers`]) and manager polling.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use lumina_config::AppRoot;
use lumina_mcp::{ManagerOptions, McpManager, ServerState, ServerStatus};
use lumina_testkit::McpPeers;
use lumina_tools::{Tool, ToolContext};
use serde_json::Value;

/// A temp AppRoot and project directory.
pub struct Env {
    pub _tmp: tempfile::TempDir,
    pub app_root: AppRoot,
    pub project: PathBuf,
}

impl Env {
    pub fn new() -> Result<Self> {
        let tmp = tempfile::tempdir()?;
        let app_root = AppRoot::new(tmp.path().join("home"));
        app_root.ensure_dirs().map_err(|e| anyhow::anyhow!("{e}"))?;
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&project)?;
        Ok(Self {
            _tmp: tmp,
            app_root,
            project,
        })
    }

    pub fn write_user_config(&self, json: &Value) -> Result<()> {
        write(
            &self.app_root.config_dir().join("mcp.json"),
            &json.to_string(),
        )
    }

    pub fn write_project_config(&self, json: &Value) -> Result<()> {
        write(&self.project.join(".mcp.json"), &json.to_string())
    }

    pub fn manager(&self) -> McpManager {
        McpManager::new(ManagerOptions::new(self.app_root.clone()))
    }

    pub fn ctx(&self) -> ToolContext {
        ToolContext::new(&self.project, self.project.join(".results"), "s1", "c1")
    }
}

pub fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)?;
    Ok(())
}

/// A stdio definition of server-everything (`extra_args` after its own arguments).
pub fn everything_stdio(extra_args: &[&str], env: Value) -> Result<Value> {
    let (command, mut args) = McpPeers::locate()?.everything_stdio();
    args.extend(extra_args.iter().map(|a| a.to_string()));
    Ok(serde_json::json!({
        "command": command,
        "args": args,
        "env": env,
    }))
}

pub fn find_tool(
    tools: &[std::sync::Arc<dyn Tool>],
    name: &str,
) -> Result<std::sync::Arc<dyn Tool>> {
    tools
        .iter()
        .find(|t| t.descriptor().name == name)
        .cloned()
        .with_context(|| {
            let names: Vec<_> = tools.iter().map(|t| t.descriptor().name).collect();
            format!("no tool {name} in {names:?}")
        })
}

pub async fn status_of(manager: &McpManager, project: &Path, name: &str) -> Result<ServerStatus> {
    manager
        .status(project)
        .await
        .into_iter()
        .find(|s| s.name == name)
        .with_context(|| format!("no server {name} in the status"))
}

/// Polls the status until `pred` holds (a state change we caused; generous deadline).
pub async fn wait_for_state(
    manager: &McpManager,
    project: &Path,
    name: &str,
    pred: impl Fn(&ServerState) -> bool,
) -> Result<ServerStatus> {
    for _ in 0..400 {
        let status = status_of(manager, project, name).await?;
        if pred(&status.state) {
            return Ok(status);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("server {name} never reached the expected state")
}
