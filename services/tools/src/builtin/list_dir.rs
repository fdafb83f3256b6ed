//! `list_dir{path}`: the entries of one directory, sorted, directories marked with `/`.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{args, fsutil};
use crate::{Tool, ToolContext, ToolDescriptor, ToolOutput};

pub(crate) const NAME: &str = "list_dir";
/// Entries shown at most; the rest is summarized.
pub const MAX_ENTRIES: usize = 1000;

/// Lists one directory (hidden entries included, `.gitignore` not applied: this is `ls -A`).
#[derive(Debug, Default, Clone, Copy)]
pub struct ListDir;

#[derive(Debug, Deserialize)]
struct Args {
    path: String,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Directory path, relative to the project root (\".\" for the root) or absolute inside it."}
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for ListDir {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: NAME.to_string(),
            description: "List the entries of a directory in the project, sorted by name. \
                          Directories end with `/`; symlinks show their target."
                .to_string(),
            input_schema: schema(),
            read_only: true,
            edits_files: false,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        fsutil::flatten(run(ctx, args).await)
    }
}

async fn run(ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolOutput> {
    let args: Args = args::parse(NAME, &schema(), args)?;
    let path = fsutil::resolve(ctx, &args.path)?;
    let shown = fsutil::display(ctx, &path);
    let mut dir = tokio::fs::read_dir(&path)
        .await
        .map_err(|e| fsutil::io_error("list", &shown, &e))?;

    let mut entries = Vec::new();
    loop {
        let entry = match dir.next_entry().await {
            Ok(Some(entry)) => entry,
            Ok(None) => break,
            Err(e) => return Err(fsutil::io_error("list", &shown, &e)),
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        let file_type = match entry.file_type().await {
            Ok(t) => t,
            Err(_) => {
                entries.push((name.clone(), name));
                continue;
            }
        };
        let line = if file_type.is_symlink() {
            let target = tokio::fs::read_link(entry.path())
                .await
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".to_string());
            // Follow the link only to decide the marker; the target may be outside the root
            // and is never listed.
            let is_dir = tokio::fs::metadata(entry.path())
                .await
                .map(|m| m.is_dir())
                .unwrap_or(false);
            let slash = if is_dir { "/" } else { "" };
            format!("{name}{slash} -> {target}")
        } else if file_type.is_dir() {
            format!("{name}/")
        } else {
            name.clone()
        };
        entries.push((name, line));
    }
    entries.sort();
    let mut entries: Vec<String> = entries.into_iter().map(|(_, line)| line).collect();

    let total = entries.len();
    if total == 0 {
        return Ok(ToolOutput::ok(format!("{shown} is empty"))
            .with_metadata(json!({"path": shown, "count": 0, "truncated": false})));
    }
    let truncated = total > MAX_ENTRIES;
    entries.truncate(MAX_ENTRIES);
    let mut out = entries.join("\n");
    out.push('\n');
    if truncated {
        out.push_str(&format!(
            "[truncated: showing {MAX_ENTRIES} of {total} entries; use glob to narrow down]\n"
        ));
    }
    Ok(ToolOutput::ok(out).with_metadata(json!({
        "path": shown,
        "count": total,
        "truncated": truncated,
    })))
}
