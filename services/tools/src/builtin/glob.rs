//! `glob{pattern}`: files under the project root whose relative path matches a glob.

use async_trait::async_trait;
use globset::GlobBuilder;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{args, fsutil, walk};
use crate::{paths, Tool, ToolContext, ToolDescriptor, ToolOutput};

pub(crate) const NAME: &str = "glob";
/// Paths returned at most.
pub const MAX_RESULTS: usize = 1000;

/// Finds files by glob (`src/**/*.rs`), honouring `.gitignore`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Glob;

#[derive(Debug, Deserialize)]
struct Args {
    pattern: String,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob relative to the project root, e.g. `**/*.rs` or `src/*.ts`. `*` does not cross `/`; `**` does."}
        },
        "required": ["pattern"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for Glob {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: NAME.to_string(),
            description: format!(
                "Find files in the project whose path (relative to the project root) matches a \
                 glob such as `**/*.rs`. Respects .gitignore. Returns sorted paths, at most \
                 {MAX_RESULTS}."
            ),
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
    let root =
        paths::canonical_root(&ctx.project_root).map_err(|e| ToolOutput::error(e.to_string()))?;
    // Accept patterns written as absolute paths inside the root, or with a leading `./`.
    let root_prefix = format!("{}/", root.display());
    let pattern = args.pattern.trim();
    let pattern = pattern.strip_prefix(&root_prefix).unwrap_or(pattern);
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    if pattern.starts_with('/') || pattern.split('/').any(|part| part == "..") {
        return Err(ToolOutput::error(format!(
            "glob patterns are relative to the project root: {}",
            args.pattern
        )));
    }
    let matcher = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| ToolOutput::error(format!("invalid glob pattern: {e}")))?
        .compile_matcher();

    let cancel = ctx.cancel.clone();
    let walk_root = root.clone();
    let found = tokio::task::spawn_blocking(move || {
        let mut found = Vec::new();
        for entry in walk::walker(&walk_root).flatten() {
            if cancel.is_cancelled() {
                return None;
            }
            if !entry
                .file_type()
                .is_some_and(|t| t.is_file() || t.is_symlink())
            {
                continue;
            }
            if let Ok(rel) = entry.path().strip_prefix(&walk_root) {
                if matcher.is_match(rel) {
                    found.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        Some(found)
    })
    .await
    .map_err(|e| ToolOutput::error(format!("glob failed: {e}")))?;
    let Some(mut found) = found else {
        return Err(ToolOutput::error("glob was interrupted"));
    };

    found.sort();
    let total = found.len();
    if total == 0 {
        return Ok(ToolOutput::ok(format!("no files match {}", args.pattern))
            .with_metadata(json!({"count": 0, "truncated": false})));
    }
    let truncated = total > MAX_RESULTS;
    found.truncate(MAX_RESULTS);
    let mut out = found.join("\n");
    out.push('\n');
    if truncated {
        out.push_str(&format!(
            "[truncated: showing the first {MAX_RESULTS} of {total} matches; use a narrower pattern]\n"
        ));
    }
    Ok(ToolOutput::ok(out).with_metadata(json!({"count": total, "truncated": truncated})))
}
