//! `edit_file{path, old_string, new_string, replace_all?}`: exact string replacement.

use std::path::PathBuf;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{args, fsutil};
use crate::{Tool, ToolContext, ToolDescriptor, ToolOutput};

pub(crate) const NAME: &str = "edit_file";

/// Replaces an exact, unique string in a file (or every occurrence with `replace_all`).
#[derive(Debug, Default, Clone, Copy)]
pub struct EditFile;

#[derive(Debug, Deserialize)]
struct Args {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the project root or absolute inside it."},
            "old_string": {"type": "string", "description": "Exact text to replace; must occur exactly once unless replace_all."},
            "new_string": {"type": "string", "description": "Replacement text."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": false
    })
}

struct Plan {
    path: PathBuf,
    shown: String,
    new_content: String,
    replacements: usize,
    diff: String,
}

async fn plan(ctx: &ToolContext, args: Value) -> Result<Plan, ToolOutput> {
    let args: Args = args::parse(NAME, &schema(), args)?;
    if args.old_string.is_empty() {
        return Err(ToolOutput::error(
            "old_string must not be empty; use write_file to create a file",
        ));
    }
    if args.old_string == args.new_string {
        return Err(ToolOutput::error(
            "old_string and new_string are identical; nothing to change",
        ));
    }
    let path = fsutil::resolve(ctx, &args.path)?;
    let shown = fsutil::display(ctx, &path);
    let bytes = tokio::fs::read(&path)
        .await
        .map_err(|e| fsutil::io_error("read", &shown, &e))?;
    // Editing a lossily decoded file would silently corrupt the bytes that were replaced.
    let old = String::from_utf8(bytes)
        .map_err(|_| ToolOutput::error(format!("{shown} is not valid UTF-8; cannot edit it")))?;

    let count = old.matches(args.old_string.as_str()).count();
    match count {
        0 => {
            return Err(ToolOutput::error(format!(
                "old_string not found in {shown}; read the file and copy the text exactly, \
                 including whitespace"
            )))
        }
        1 => {}
        n if !args.replace_all => {
            return Err(ToolOutput::error(format!(
                "old_string found {n} times in {shown}; include more surrounding context to \
                 make it unique, or set replace_all to true"
            )))
        }
        _ => {}
    }
    let new_content = if args.replace_all {
        old.replace(&args.old_string, &args.new_string)
    } else {
        old.replacen(&args.old_string, &args.new_string, 1)
    };
    let diff = fsutil::unified_diff(&shown, Some(&old), &new_content);
    Ok(Plan {
        path,
        shown,
        new_content,
        replacements: count,
        diff,
    })
}

#[async_trait]
impl Tool for EditFile {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: NAME.to_string(),
            description: "Edit a file by replacing an exact string. old_string must match the \
                          file exactly (including indentation) and occur once, unless \
                          replace_all is true. Read the file first."
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
    fsutil::atomic_write(&plan.path, plan.new_content.as_bytes())
        .await
        .map_err(|e| fsutil::io_error("write", &plan.shown, &e))?;
    let what = if plan.replacements == 1 {
        "1 replacement".to_string()
    } else {
        format!("{} replacements", plan.replacements)
    };
    Ok(
        ToolOutput::ok(format!("edited {} ({what})", plan.shown)).with_metadata(json!({
            "path": plan.shown,
            "replacements": plan.replacements,
            "diff": plan.diff,
        })),
    )
}
