//! `read_file{path, offset?, limit?}`: a window of a text file with `cat -n` line numbers.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use super::{args, fsutil};
use crate::{Tool, ToolContext, ToolDescriptor, ToolOutput};

pub(crate) const NAME: &str = "read_file";
/// Lines returned when the call gives no `limit`.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Characters kept of one line; minified files would otherwise flood the context.
pub const MAX_LINE_CHARS: usize = 2000;

/// Reads a text file (or a window of it) with line numbers.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadFile;

#[derive(Debug, Deserialize)]
struct Args {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the project root or absolute inside it."},
            "offset": {"type": "integer", "minimum": 1, "description": "1-based line to start from (default 1)."},
            "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines (default 2000)."}
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for ReadFile {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: NAME.to_string(),
            description: format!(
                "Read a text file from the project. Output is numbered like `cat -n`. Reads up \
                 to {DEFAULT_LIMIT} lines from `offset` (1-based); use offset/limit to page \
                 through long files. Lines longer than {MAX_LINE_CHARS} characters are cut. \
                 Binary files are refused."
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
    let path = fsutil::resolve(ctx, &args.path)?;
    let shown = fsutil::display(ctx, &path);
    let offset = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).max(1);

    let meta = tokio::fs::metadata(&path)
        .await
        .map_err(|e| fsutil::io_error("read", &shown, &e))?;
    if meta.is_dir() {
        return Err(ToolOutput::error(format!(
            "{shown} is a directory; use list_dir to see its entries"
        )));
    }
    let file = tokio::fs::File::open(&path)
        .await
        .map_err(|e| fsutil::io_error("read", &shown, &e))?;

    let mut reader = BufReader::new(file);
    let mut sniff = Vec::with_capacity(fsutil::BINARY_SNIFF_BYTES);
    (&mut reader)
        .take(fsutil::BINARY_SNIFF_BYTES as u64)
        .read_to_end(&mut sniff)
        .await
        .map_err(|e| fsutil::io_error("read", &shown, &e))?;
    if fsutil::looks_binary(&sniff) {
        return Err(ToolOutput::error(format!(
            "{shown} looks like a binary file ({} bytes); read_file only shows text",
            meta.len()
        )));
    }
    if meta.len() == 0 {
        return Ok(
            ToolOutput::ok(format!("{shown} is empty")).with_metadata(json!({
                "path": shown, "start_line": 0, "end_line": 0, "truncated": false
            })),
        );
    }

    // The sniffed bytes were consumed; chain them back in front of the rest of the file.
    let mut reader = BufReader::new(std::io::Cursor::new(sniff).chain(reader));
    let mut out = String::new();
    let mut line_no: u64 = 0;
    let mut last_shown: u64 = 0;
    let mut raw = Vec::new();
    let mut more = false;
    let mut capped_by_bytes = false;
    loop {
        raw.clear();
        let n = reader
            .read_until(b'\n', &mut raw)
            .await
            .map_err(|e| fsutil::io_error("read", &shown, &e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if line_no < offset {
            continue;
        }
        if line_no >= offset + limit {
            more = true;
            break;
        }
        let text = String::from_utf8_lossy(&raw);
        let text = text.trim_end_matches(['\n', '\r']);
        let numbered = format!("{line_no:>6}\t{}\n", fsutil::cap_line(text, MAX_LINE_CHARS));
        if !out.is_empty() && out.len() + numbered.len() > ctx.output_cap_bytes {
            more = true;
            capped_by_bytes = true;
            break;
        }
        out.push_str(&numbered);
        last_shown = line_no;
    }

    if last_shown == 0 {
        return Err(ToolOutput::error(format!(
            "offset {offset} is past the end of {shown} ({line_no} lines)"
        )));
    }
    if more {
        let why = if capped_by_bytes {
            " (output size limit)"
        } else {
            ""
        };
        out.push_str(&format!(
            "[showing lines {offset}-{last_shown}{why}; the file continues: read again with offset={}]\n",
            last_shown + 1
        ));
    }
    Ok(ToolOutput::ok(out).with_metadata(json!({
        "path": shown,
        "start_line": offset,
        "end_line": last_shown,
        "truncated": more,
    })))
}
