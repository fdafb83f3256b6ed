//! An MCP server's tool as a `lumina_tools::Tool`: naming, result text, output cap.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lumina_tools::{Tool, ToolContext, ToolDescriptor, ToolOutput};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::client::{CallToolResult, ToolInfo};
use crate::manager::slot::ServerSlot;
use crate::Error;

/// Longest tool name model APIs accept.
pub const MAX_TOOL_NAME: usize = 64;

/// `mcp__<server>__<tool>`, characters outside `[A-Za-z0-9_-]` replaced by `_`; a name
/// longer than 64 characters is cut and ends in a hash of the original names.
pub fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("mcp__{}__{}", sanitize(server), sanitize(tool));
    if full.len() <= MAX_TOOL_NAME {
        full
    } else {
        hashed(&full, server, tool)
    }
}

/// [`tool_name`], or its hashed form when another tool already took it (sanitizing can
/// make two names equal). `None` when even that is taken.
pub(crate) fn unique_tool_name(
    server: &str,
    tool: &str,
    taken: &HashSet<String>,
) -> Option<String> {
    let name = tool_name(server, tool);
    if !taken.contains(&name) {
        return Some(name);
    }
    let alt = hashed(
        &format!("mcp__{}__{}", sanitize(server), sanitize(tool)),
        server,
        tool,
    );
    (!taken.contains(&alt)).then_some(alt)
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn hashed(full: &str, server: &str, tool: &str) -> String {
    let digest = hex::encode(Sha256::digest(format!("{server}\0{tool}").as_bytes()));
    let keep = MAX_TOOL_NAME - 9;
    // `full` is ASCII after sanitizing, so byte slicing is safe.
    let head = full.get(..keep.min(full.len())).unwrap_or(full);
    format!("{head}_{}", &digest[..8])
}

/// A tool result as the model reads it: text verbatim, media as a placeholder, resources
/// as their text or URI; `structuredContent` when there is no text block.
pub fn result_text(result: &CallToolResult) -> String {
    let mut parts = Vec::new();
    let mut has_text = false;
    for block in &result.content {
        let s = |k: &str| block.get(k).and_then(Value::as_str);
        match s("type") {
            Some("text") => {
                has_text = true;
                parts.push(s("text").unwrap_or_default().to_string());
            }
            Some(kind @ ("image" | "audio")) => parts.push(format!(
                "[{kind}: {}, {} bytes]",
                s("mimeType").unwrap_or("unknown type"),
                base64_len(s("data").unwrap_or_default())
            )),
            Some("resource") => {
                let res = block.get("resource");
                let field = |k: &str| res.and_then(|r| r.get(k)).and_then(Value::as_str);
                match field("text") {
                    Some(text) => {
                        has_text = true;
                        parts.push(text.to_string());
                    }
                    None => parts.push(format!("[resource {}]", field("uri").unwrap_or("?"))),
                }
            }
            Some("resource_link") => parts.push(s("uri").unwrap_or("?").to_string()),
            _ => parts.push(block.to_string()),
        }
    }
    if !has_text {
        if let Some(structured) = &result.structured_content {
            parts.push(structured.to_string());
        }
    }
    if parts.is_empty() {
        return "(no output)".into();
    }
    parts.join("\n")
}

/// Decoded size of base64 text.
fn base64_len(data: &str) -> usize {
    let len = data.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    let pad = data
        .trim_end()
        .bytes()
        .rev()
        .take_while(|&b| b == b'=')
        .count();
    (len / 4 * 3 + (len % 4).saturating_sub(1)).saturating_sub(pad)
}

/// One MCP tool, callable by the runtime.
pub struct McpTool {
    pub(crate) slot: Arc<ServerSlot>,
    pub(crate) info: ToolInfo,
    pub(crate) name: String,
    pub(crate) timeout: Duration,
}

impl McpTool {
    /// The server's own name for the tool.
    pub fn remote_name(&self) -> &str {
        &self.info.name
    }

    /// The configured server name.
    pub fn server(&self) -> &str {
        self.slot.name()
    }
}

#[async_trait]
impl Tool for McpTool {
    fn descriptor(&self) -> ToolDescriptor {
        let text = self
            .info
            .description
            .clone()
            .or_else(|| self.info.title.clone())
            .unwrap_or_else(|| self.info.name.clone());
        ToolDescriptor {
            name: self.name.clone(),
            description: format!("[MCP {}] {text}", self.slot.name()),
            input_schema: self.info.input_schema.clone(),
            read_only: self.info.read_only_hint,
            edits_files: false,
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> ToolOutput {
        let args = match args {
            Value::Object(_) => args,
            Value::Null => json!({}),
            other => {
                return ToolOutput::error(format!(
                    "{}: arguments must be a JSON object, got {}",
                    self.name,
                    kind(&other)
                ))
            }
        };
        let server = self.slot.name();
        let meta = json!({"server": server, "tool": self.info.name});
        let out = match self
            .slot
            .call_tool(&self.info.name, args, self.timeout, &ctx.cancel)
            .await
        {
            Ok(result) => cap(ctx, result_text(&result), result.is_error),
            Err(Error::Timeout { ms, .. }) => ToolOutput::error(format!(
                "MCP tool `{}` on server `{server}` timed out after {ms} ms (the server was asked to cancel it)",
                self.info.name
            )),
            Err(Error::Cancelled) => ToolOutput::error("interrupted"),
            Err(e) => ToolOutput::error(format!("MCP server `{server}`: {e}")),
        };
        let mut metadata = meta;
        if let (Value::Object(m), Value::Object(extra)) = (&mut metadata, out.metadata.clone()) {
            m.extend(extra);
        }
        out.with_metadata(metadata)
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Keeps the first `ctx.output_cap_bytes` for the model; the whole text goes to
/// `<results_dir>/<call_id>.log` when it can be written.
fn cap(ctx: &ToolContext, text: String, is_error: bool) -> ToolOutput {
    let make = |s: String| {
        if is_error {
            ToolOutput::error(s)
        } else {
            ToolOutput::ok(s)
        }
    };
    if text.len() <= ctx.output_cap_bytes {
        return make(text);
    }
    let mut cut = ctx.output_cap_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let path = ctx.results_dir.join(format!("{}.log", ctx.call_id));
    let saved = std::fs::create_dir_all(&ctx.results_dir)
        .and_then(|()| std::fs::write(&path, text.as_bytes()))
        .is_ok();
    let mut shown = text[..cut].to_string();
    shown.push_str(&format!(
        "\n[output truncated: {cut} of {} bytes shown{}]",
        text.len(),
        if saved {
            format!("; full output in {}", path.display())
        } else {
            String::new()
        }
    ));
    let mut meta = json!({"truncated": true});
    if saved {
        meta["full_output_path"] = Value::from(path.display().to_string());
    }
    make(shown).with_metadata(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized_bounded_and_unique() {
        assert_eq!(tool_name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(tool_name("srv", "a.b c"), "mcp__srv__a_b_c");
        let long = tool_name("server", &"x".repeat(100));
        assert_eq!(long.len(), MAX_TOOL_NAME);
        assert_ne!(long, tool_name("server", &"x".repeat(101)));
        let mut taken = HashSet::new();
        let a = unique_tool_name("s", "a.b", &taken);
        taken.extend(a.clone());
        let b = unique_tool_name("s", "a_b", &taken);
        assert_eq!(a.as_deref(), Some("mcp__s__a_b"));
        assert!(b
            .as_ref()
            .is_some_and(|b| b != "mcp__s__a_b" && b.len() <= MAX_TOOL_NAME));
    }

    #[test]
    fn long_output_is_capped_and_kept_in_full() -> std::io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let mut ctx = ToolContext::new(tmp.path(), tmp.path().join("results"), "s", "call-1");
        ctx.output_cap_bytes = 5;
        let out = cap(&ctx, "héllo world".into(), false);
        assert!(
            out.content
                .starts_with("héll\n[output truncated: 5 of 12 bytes shown"),
            "{}",
            out.content
        );
        assert_eq!(out.metadata["truncated"], true);
        let full = std::fs::read_to_string(tmp.path().join("results/call-1.log"))?;
        assert_eq!(full, "héllo world");
        assert_eq!(cap(&ctx, "short".into(), true), ToolOutput::error("short"));
        Ok(())
    }

    #[test]
    fn results_become_text() {
        let result = CallToolResult {
            content: vec![
                json!({"type": "text", "text": "hello"}),
                json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}),
                json!({"type": "resource", "resource": {"uri": "file:///a", "text": "body"}}),
                json!({"type": "resource", "resource": {"uri": "file:///b", "blob": "AA=="}}),
                json!({"type": "resource_link", "uri": "file:///c", "name": "c"}),
            ],
            structured_content: Some(json!({"x": 1})),
            is_error: false,
        };
        assert_eq!(
            result_text(&result),
            "hello\n[image: image/png, 3 bytes]\nbody\n[resource file:///b]\nfile:///c"
        );
        let structured = CallToolResult {
            content: vec![],
            structured_content: Some(json!({"x": 1})),
            is_error: false,
        };
        assert_eq!(result_text(&structured), r#"{"x":1}"#);
        assert_eq!(base64_len("AA=="), 1);
        assert_eq!(base64_len("AAA="), 2);
    }
}
