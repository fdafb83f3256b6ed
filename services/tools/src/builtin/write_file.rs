//! `write_file{path, content}`: create or replace a file atomically, reporting a diff.

use std::path::PathBuf;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{args, fsutil};
use crate::{Tool, ToolContext, ToolDescriptor, ToolOutput};

pub(crate) const NAME: &str = "write_file";

/// Creates or overwrites a file (parent directories included).
#[derive(Debug, Default, Clone, Copy)]
pub struct WriteFile;

#[derive(Debug, Deserialize)]
struct Args {
    path: String,
    content: String,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the project root or absolute inside it."},
            "content": {"type": "string", "description": "The complete new content of the file."}
        },
        "required": ["path", "content"],
        "additionalProperties": false
    })
}

/// What a write would do, computed identically for the preview and the call.
struct Plan {
    path: PathBuf,
    shown: String,
    content: String,
    created: bool,
    diff: String,
}

async fn plan(ctx: &ToolContext, args: Value) -> Result<Plan, ToolOutput> {
    let args: Args = args::parse(NAME, &schema(), args)?;
    let path = fsutil::resolve(ctx, &args.path)?;
    let shown = fsutil::display(ctx, &path);
    let old = match tokio::fs::metadata(&path).await {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolOutput::error(format!("{shown} is a directory")));
        }
        Ok(_) => {
            let bytes = tokio::fs::read(&path)
                .await
                .map_err(|e| fsutil::io_error("read", &shown, &e))?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        Err(_) => None,
    };
    let diff = fsutil::unified_diff(&shown, old.as_deref(), &args.content);
    Ok(Plan {
        path,
        shown,
        content: args.content,
        created: old.is_none(),
        diff,
    })
}

#[async_trait]
impl Tool for WriteFile {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: NAME.to_string(),
            description: "Write a file in the project, replacing it if it exists and creating \
                          missing parent directories. Give the complete content. Prefer \
                          edit_file for small changes to an existing file."
                .to_string(),
            input_schema: schema(),
            read_only: false,
            edits_files: true,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        fsutil::flatten(run(ctx, args).await)
    }

    async fn preview(&self, ctx: &ToolContext, args: &Value) -> Option<String> {
        plan(ctx, args.clone()).await.ok().map(|p| p.diff)
    }
}

async fn run(ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolOutput> {
    let plan = plan(ctx, args).await?;
    if let Some(parent) = plan.path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| fsutil::io_error("create the directories for", &plan.shown, &e))?;
    }
    fsutil::atomic_write(&plan.path, plan.content.as_bytes())
        .await
        .map_err(|e| fsutil::io_error("write", &plan.shown, &e))?;
    let verb = if plan.created { "created" } else { "updated" };
    let lines = plan.content.lines().count();
    Ok(ToolOutput::ok(format!(
        "{verb} {} ({} bytes, {lines} lines)",
        plan.shown,
        plan.content.len()
    ))
    .with_metadata(json!({
        "path": plan.shown,
        "created": plan.created,
        "bytes": plan.content.len(),
        "diff": plan.diff,
    })))
}
