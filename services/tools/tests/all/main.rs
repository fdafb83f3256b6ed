//! Integration tests of lumina-tools: every built-in tool called through the registry
//! against a real temporary project directory, and the permission engine with the real
//! descriptors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod browser;
mod browser_proxy;
mod files;
mod registry;
mod search;
mod shell;
mod shell_confined;
mod todo;
mod web;

use std::path::PathBuf;

use lumina_tools::{builtin_registry, ToolContext, ToolOutput};
use serde_json::Value;
use tempfile::TempDir;

/// A project root (`<tmp>/project`), a results dir (`<tmp>/results`) and a context.
pub struct Project {
    pub dir: TempDir,
    pub root: PathBuf,
    pub ctx: ToolContext,
}

pub fn project() -> Project {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("project");
    std::fs::create_dir_all(&root).unwrap();
    let ctx = ToolContext::new(&root, base.join("results").join("s1"), "s1", "call-1");
    Project { dir, root, ctx }
}

impl Project {
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap()
    }

    /// A directory next to the project root, outside it.
    pub fn outside(&self) -> PathBuf {
        let path = self.root.parent().unwrap().join("outside");
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    pub async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        call_with(&self.ctx, tool, args).await
    }

    pub async fn preview(&self, tool: &str, args: &Value) -> Option<String> {
        builtin_registry()
            .get(tool)
            .unwrap()
            .preview(&self.ctx, args)
            .await
    }
}

pub async fn call_with(ctx: &ToolContext, tool: &str, args: Value) -> ToolOutput {
    builtin_registry().get(tool).unwrap().call(ctx, args).await
}

/// Asserts an error output and returns its text.
pub fn error_text(out: &ToolOutput) -> &str {
    assert!(out.is_error, "expected an error, got {out:?}");
    &out.content
}

/// Asserts a successful output and returns its text.
pub fn ok_text(out: &ToolOutput) -> &str {
    assert!(!out.is_error, "expected success, got {out:?}");
    &out.content
}
