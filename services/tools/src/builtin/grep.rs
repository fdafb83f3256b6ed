//! `grep{pattern, path?, glob?}`: regex search over project files, `path:line:text` output.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{args, fsutil, walk};
use crate::{paths, Tool, ToolContext, ToolDescriptor, ToolOutput};

pub(crate) const NAME: &str = "grep";
/// Matching lines returned at most.
pub const MAX_MATCHES: usize = 500;
/// Characters kept of a matching line.
pub const MAX_MATCH_LINE_CHARS: usize = 500;
/// Larger files are skipped (generated data, logs): they would dominate time and output.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Searches file contents with a regular expression, honouring `.gitignore`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Grep;

#[derive(Debug, Deserialize)]
struct Args {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression (Rust regex syntax; `(?i)` for case-insensitive)."},
            "path": {"type": "string", "description": "File or directory to search (default: the project root)."},
            "glob": {"type": "string", "description": "Only search files matching this glob; without a `/` it matches file names (`*.rs`), otherwise paths relative to the project root."}
        },
        "required": ["pattern"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for Grep {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: NAME.to_string(),
            description: format!(
                "Search file contents in the project with a regular expression. Output lines \
                 are `path:line:text`. Respects .gitignore, skips binary files, returns at most \
                 {MAX_MATCHES} matches."
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

/// How a `glob` filter applies: to the file name when it has no `/`, else to the path.
struct FileFilter {
    matcher: GlobMatcher,
    by_name: bool,
}

impl FileFilter {
    fn accepts(&self, rel: &Path) -> bool {
        if self.by_name {
            rel.file_name().is_some_and(|n| self.matcher.is_match(n))
        } else {
            self.matcher.is_match(rel)
        }
    }
}

struct Search {
    root: PathBuf,
    start: PathBuf,
    regex: Regex,
    filter: Option<FileFilter>,
    cap_bytes: usize,
    cancel: CancellationToken,
}

#[derive(Default)]
struct Found {
    lines: Vec<String>,
    bytes: usize,
    files: usize,
    skipped_large: usize,
    truncated: bool,
    interrupted: bool,
}

async fn run(ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolOutput> {
    let args: Args = args::parse(NAME, &schema(), args)?;
    let regex = RegexBuilder::new(&args.pattern)
        .size_limit(10 * 1024 * 1024)
        .build()
        .map_err(|e| ToolOutput::error(format!("invalid regex: {e}")))?;
    let filter = match &args.glob {
        None => None,
        Some(glob) => {
            let glob = glob.strip_prefix("./").unwrap_or(glob);
            let matcher = GlobBuilder::new(glob)
                .literal_separator(true)
                .build()
                .map_err(|e| ToolOutput::error(format!("invalid glob: {e}")))?
                .compile_matcher();
            Some(FileFilter {
                matcher,
                by_name: !glob.contains('/'),
            })
        }
    };
    let root =
        paths::canonical_root(&ctx.project_root).map_err(|e| ToolOutput::error(e.to_string()))?;
    let start = fsutil::resolve(ctx, args.path.as_deref().unwrap_or("."))?;
    let shown_start = fsutil::display(ctx, &start);
    if !start.exists() {
        return Err(ToolOutput::error(format!(
            "{shown_start}: no such file or directory"
        )));
    }

    let search = Search {
        root,
        start,
        regex,
        filter,
        cap_bytes: ctx.output_cap_bytes,
        cancel: ctx.cancel.clone(),
    };
    let found = tokio::task::spawn_blocking(move || search.run())
        .await
        .map_err(|e| ToolOutput::error(format!("grep failed: {e}")))?;
    if found.interrupted {
        return Err(ToolOutput::error("grep was interrupted"));
    }

    let count = found.lines.len();
    let mut out = if count == 0 {
        format!("no matches for `{}` in {shown_start}\n", args.pattern)
    } else {
        let mut s = found.lines.join("\n");
        s.push('\n');
        s
    };
    if found.truncated {
        out.push_str(&format!(
            "[truncated: showing the first {count} matches; narrow the pattern, path or glob]\n"
        ));
    }
    if found.skipped_large > 0 {
        out.push_str(&format!(
            "[skipped {} files larger than {MAX_FILE_BYTES} bytes]\n",
            found.skipped_large
        ));
    }
    Ok(ToolOutput::ok(out).with_metadata(json!({
        "matches": count,
        "files": found.files,
        "truncated": found.truncated,
    })))
}

impl Search {
    fn run(self) -> Found {
        let mut found = Found::default();
        if self.start.is_file() {
            // An explicitly named file is searched even if it is ignored or filtered out.
            self.search_file(&self.start, &mut found);
            return found;
        }
        for entry in walk::walker(&self.start).flatten() {
            if self.cancel.is_cancelled() {
                found.interrupted = true;
                break;
            }
            if found.truncated {
                break;
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.path();
            let accepted = match (&self.filter, path.strip_prefix(&self.root)) {
                (Some(filter), Ok(rel)) => filter.accepts(rel),
                (Some(_), Err(_)) => false,
                (None, _) => true,
            };
            if accepted {
                self.search_file(path, &mut found);
            }
        }
        found
    }

    fn search_file(&self, path: &Path, found: &mut Found) {
        match std::fs::metadata(path) {
            Ok(meta) if meta.len() > MAX_FILE_BYTES => {
                found.skipped_large += 1;
                return;
            }
            Ok(_) => {}
            Err(_) => return,
        }
        // Unreadable files (permissions, races) are skipped like ripgrep does.
        let Ok(bytes) = std::fs::read(path) else {
            return;
        };
        if fsutil::looks_binary(&bytes) {
            return;
        }
        let rel = match path.strip_prefix(&self.root) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        };
        let mut matched = false;
        // A final newline ends the last line; it does not start an empty one.
        let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        for (i, raw) in body.split(|b| *b == b'\n').enumerate() {
            let text = String::from_utf8_lossy(raw);
            let text = text.trim_end_matches('\r');
            if !self.regex.is_match(text) {
                continue;
            }
            let line = format!(
                "{rel}:{}:{}",
                i + 1,
                fsutil::cap_line(text, MAX_MATCH_LINE_CHARS)
            );
            if found.lines.len() >= MAX_MATCHES || found.bytes + line.len() + 1 > self.cap_bytes {
                found.truncated = true;
                break;
            }
            found.bytes += line.len() + 1;
            found.lines.push(line);
            matched = true;
        }
        if matched {
            found.files += 1;
        }
    }
}
