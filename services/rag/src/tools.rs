//! The tools: `rag_ingest{paths}` and `rag_search{query, k?}` as registry
//! [`Tool`]s over a shared [`Rag`] (the backend registers them, docs/rag.md#tools).
//!
//! Permissions: both are read-only for the permission engine (`ask` mode runs them without
//! asking; deny rules apply by tool name). `rag_ingest` reads files inside the project only
//! (paths are confined like `read_file`'s) and writes nothing but the project's index in
//! Lumina's own storage — the same footing as `memory_remember`.

use std::sync::Arc;

use async_trait::async_trait;
use lumina_tools::builtin::parse_args;
use lumina_tools::{Tool, ToolContext, ToolDescriptor, ToolOutput};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{IngestReport, Rag, SearchResult, DEFAULT_K, MAX_K};

/// `rag_ingest`.
pub const INGEST_TOOL: &str = "rag_ingest";
/// `rag_search`.
pub const SEARCH_TOOL: &str = "rag_search";

/// Skipped files listed in an ingestion's output, at most (all are in the metadata).
const SHOWN_SKIPPED: usize = 20;

/// `rag_ingest{paths}`.
#[derive(Clone)]
pub struct RagIngest(pub Arc<Rag>);

/// `rag_search{query, k?}`.
#[derive(Clone)]
pub struct RagSearch(pub Arc<Rag>);

/// Both tools over one [`Rag`].
pub fn tools(rag: Arc<Rag>) -> [Arc<dyn Tool>; 2] {
    [
        Arc::new(RagIngest(Arc::clone(&rag))),
        Arc::new(RagSearch(rag)),
    ]
}

#[derive(Debug, Deserialize)]
struct IngestArgs {
    paths: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct SearchArgs {
    query: String,
    k: Option<u64>,
}

fn ingest_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "paths": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Files or directories, relative to the project root or absolute inside it; \".\" is the whole project."
            }
        },
        "required": ["paths"],
        "additionalProperties": false
    })
}

fn search_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for, in words."},
            "k": {"type": "integer", "minimum": 1, "description": format!("Passages to return (default {DEFAULT_K}, at most {MAX_K}).")}
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for RagIngest {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: INGEST_TOOL.into(),
            description: format!(
                "Index project documents for rag_search: files or directories (walked, \
                 .gitignore respected, hidden entries skipped) of types .{}. Unchanged files \
                 are skipped by content hash; changed ones are re-indexed; deleted ones \
                 removed. Run it again after documents change.",
                crate::extract::EXTENSIONS.join(" .")
            ),
            input_schema: ingest_schema(),
            read_only: true,
            edits_files: false,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let args: IngestArgs = match parse_args(INGEST_TOOL, &ingest_schema(), args) {
            Ok(a) => a,
            Err(out) => return out,
        };
        match self.0.ingest(&ctx.project_root, &args.paths).await {
            Ok(report) => {
                let metadata = serde_json::to_value(&report).unwrap_or(Value::Null);
                ToolOutput::ok(render_ingest(&report)).with_metadata(metadata)
            }
            Err(err) => ToolOutput::error(format!("rag_ingest failed: {err}")),
        }
    }
}

fn render_ingest(r: &IngestReport) -> String {
    let mut out = format!(
        "Indexed {} document(s): {} added, {} updated, {} unchanged, {} removed; {} chunk(s) written.",
        r.files_seen,
        r.added.len(),
        r.updated.len(),
        r.unchanged,
        r.removed.len(),
        r.chunks_written
    );
    if r.vectors_written > 0 {
        out.push_str(&format!(" {} chunk(s) embedded.", r.vectors_written));
    }
    if let Some(err) = &r.embedding_error {
        out.push_str(&format!(
            " Embeddings failed ({err}); full-text search still works."
        ));
    }
    if r.truncated {
        out.push_str(" Too many files: only the first ones were looked at; ingest subdirectories separately.");
    }
    if !r.skipped.is_empty() {
        out.push_str(&format!("\nSkipped {}:", r.skipped.len()));
        for s in r.skipped.iter().take(SHOWN_SKIPPED) {
            out.push_str(&format!("\n- {}: {}", s.path, s.reason));
        }
        if r.skipped.len() > SHOWN_SKIPPED {
            out.push_str(&format!(
                "\n- … and {} more",
                r.skipped.len() - SHOWN_SKIPPED
            ));
        }
    }
    out
}

#[async_trait]
impl Tool for RagSearch {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            name: SEARCH_TOOL.into(),
            description: "Search the project's indexed documents (see rag_ingest) and return \
                the best passages, each with a citation [path#chunk-N] and its line span. Cite \
                passages you use by their citation."
                .into(),
            input_schema: search_schema(),
            read_only: true,
            edits_files: false,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let args: SearchArgs = match parse_args(SEARCH_TOOL, &search_schema(), args) {
            Ok(a) => a,
            Err(out) => return out,
        };
        let k = args.k.unwrap_or(DEFAULT_K as u64);
        if k > MAX_K as u64 {
            return ToolOutput::error(format!(
                "invalid arguments for {SEARCH_TOOL}: field `k` must be at most {MAX_K}, got {k}"
            ));
        }
        let k = usize::try_from(k).unwrap_or(MAX_K);
        match self.0.search(&ctx.project_root, &args.query, k).await {
            Ok(result) if result.files == 0 => ToolOutput::ok(
                "No documents are indexed for this project yet: call rag_ingest first (e.g. {\"paths\": [\"docs\"]}).",
            ),
            Ok(result) => {
                let metadata = json!({
                    "hits": result.hits.iter().map(|h| json!({
                        "citation": h.citation, "path": h.path, "chunk": h.chunk,
                        "start": h.start, "end": h.end,
                        "line_start": h.line_start, "line_end": h.line_end,
                        "format": h.format, "score": h.score,
                        "text_rank": h.text_rank, "dense_rank": h.dense_rank,
                    })).collect::<Vec<_>>(),
                    "dense_model": result.dense_model,
                    "dense_error": result.dense_error,
                });
                ToolOutput::ok(render_search(&args.query, &result, ctx.output_cap_bytes))
                    .with_metadata(metadata)
            }
            Err(err) => ToolOutput::error(format!("rag_search failed: {err}")),
        }
    }
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn render_search(query: &str, result: &SearchResult, cap: usize) -> String {
    if result.hits.is_empty() {
        return format!(
            "No passage matches \"{query}\" in the {} indexed document(s).",
            result.files
        );
    }
    let retrievers = match (&result.dense_model, &result.dense_error) {
        (Some(model), None) => format!("full text + embeddings ({model})"),
        (Some(_), Some(err)) => format!("full text only: embeddings failed ({err})"),
        (None, _) => "full text".to_string(),
    };
    let mut out = format!(
        "{} passage(s) for \"{query}\" ({retrievers}). Cite them as [path#chunk-N].\n",
        result.hits.len()
    );
    // Room for each passage's text so the whole fits the output cap.
    let per_hit = cap.saturating_sub(out.len() + 200 * result.hits.len()) / result.hits.len();
    for h in &result.hits {
        let span = if h.format == "text" {
            "of the file"
        } else {
            "of its extracted text"
        };
        let text = cut(&h.text, per_hit.max(200));
        out.push_str(&format!(
            "\n{} lines {}-{} (bytes {}-{} {span})\n{}{}\n",
            h.citation,
            h.line_start,
            h.line_end,
            h.start,
            h.end,
            text,
            if text.len() < h.text.len() {
                " … [cut]"
            } else {
                ""
            }
        ));
    }
    out
}
