//! Anthropic Messages API: request body and stream parser
//! (docs/specs/model-streaming.md#anthropic-messages).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::sse::SseEvent;
use crate::stream::{parse_arguments, parse_json, str_field, u64_field, Assembled, Progress};
use crate::{
    http, ChatRequest, ContentBlock, Message, ModelError, ModelOptions, Role, StopReason,
    StreamDelta, TokenUsage, ToolCall,
};

pub(crate) const API_VERSION: &str = "2023-06-01";

/// The JSON body of `POST /v1/messages`.
pub(crate) fn request_body(model: &str, options: &ModelOptions, req: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(options.max_output_tokens));
    body.insert("stream".into(), json!(true));
    if !req.system.is_empty() {
        body.insert("system".into(), json!(req.system));
    }
    body.insert("messages".into(), Value::Array(messages(&req.messages)));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// Tool results must travel in a user message and come before any text in it; empty text
/// blocks are rejected by the API, so they are dropped (and messages left empty with them).
fn messages(history: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    for m in history {
        let (results, others): (Vec<&ContentBlock>, Vec<&ContentBlock>) = m
            .content
            .iter()
            .filter(|b| !matches!(b, ContentBlock::Text { text } if text.is_empty()))
            .partition(|b| matches!(b, ContentBlock::ToolResult { .. }));
        let groups = match m.role {
            Role::User => {
                vec![(
                    "user",
                    results.into_iter().chain(others).collect::<Vec<_>>(),
                )]
            }
            Role::Assistant => vec![("assistant", others), ("user", results)],
        };
        for (role, blocks) in groups {
            if !blocks.is_empty() {
                let content: Vec<Value> = blocks.into_iter().map(block).collect();
                out.push(json!({"role": role, "content": content}));
            }
        }
    }
    out
}

fn block(b: &ContentBlock) -> Value {
    match b {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let mut v =
                json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
            if *is_error {
                v["is_error"] = json!(true);
            }
            v
        }
    }
}

#[derive(Debug)]
struct PendingToolUse {
    id: String,
    name: String,
    json: String,
}

/// Accumulates one streamed message.
#[derive(Debug, Default)]
pub(crate) struct StreamParser {
    text: String,
    /// Open `tool_use` blocks by content index; other block kinds need no state.
    open_tools: BTreeMap<u64, PendingToolUse>,
    /// Finished tool calls by content index, so the order matches the final `content[]`.
    tool_calls: BTreeMap<u64, ToolCall>,
    usage: TokenUsage,
    stop_reason: Option<String>,
    model: Option<String>,
    produced: bool,
}

impl StreamParser {
    pub fn produced(&self) -> bool {
        self.produced
    }

    pub fn on_event(
        &mut self,
        ev: &SseEvent,
        emit: &mut dyn FnMut(StreamDelta),
    ) -> Result<Progress, ModelError> {
        // Pings and event types added after this code was written need no parsing.
        const KNOWN: [&str; 7] = [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
            "error",
        ];
        if let Some(name) = &ev.event {
            if !KNOWN.contains(&name.as_str()) {
                return Ok(Progress::More);
            }
        }
        let v = parse_json(ev)?;
        let name = match &ev.event {
            Some(name) => name.as_str(),
            None => str_field(&v, "type").unwrap_or(""),
        };
        match name {
            "message_start" => {
                let msg = v.get("message").unwrap_or(&Value::Null);
                if let Some(model) = str_field(msg, "model") {
                    self.model = Some(model.to_string());
                }
                if let Some(u) = msg.get("usage") {
                    apply_usage(&mut self.usage, u);
                }
            }
            "content_block_start" => self.block_start(&v, emit),
            "content_block_delta" => self.block_delta(&v, emit)?,
            "content_block_stop" => {
                if let Some(index) = u64_field(&v, "index") {
                    self.close_block(index);
                }
            }
            "message_delta" => {
                if let Some(reason) = v.get("delta").and_then(|d| str_field(d, "stop_reason")) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(u) = v.get("usage") {
                    apply_usage(&mut self.usage, u);
                }
            }
            "message_stop" => return Ok(Progress::Done),
            "error" => return Err(http::stream_error(&v)),
            _ => {}
        }
        Ok(Progress::More)
    }

    fn block_start(&mut self, v: &Value, emit: &mut dyn FnMut(StreamDelta)) {
        let index = u64_field(v, "index").unwrap_or(0);
        let cb = v.get("content_block").unwrap_or(&Value::Null);
        match str_field(cb, "type") {
            Some("text") => self.push_text(str_field(cb, "text").unwrap_or(""), emit),
            Some("thinking") => push_thinking(
                str_field(cb, "thinking").unwrap_or(""),
                emit,
                &mut self.produced,
            ),
            Some("tool_use") => {
                // A tool call has begun: from here on a retry could run it twice.
                self.produced = true;
                self.open_tools.insert(
                    index,
                    PendingToolUse {
                        id: str_field(cb, "id").unwrap_or_default().to_string(),
                        name: str_field(cb, "name").unwrap_or_default().to_string(),
                        json: String::new(),
                    },
                );
            }
            // redacted_thinking, server_tool_use, *_tool_result: opaque to this client.
            _ => {}
        }
    }

    fn block_delta(
        &mut self,
        v: &Value,
        emit: &mut dyn FnMut(StreamDelta),
    ) -> Result<(), ModelError> {
        let index = u64_field(v, "index").unwrap_or(0);
        let delta = v.get("delta").unwrap_or(&Value::Null);
        match str_field(delta, "type") {
            Some("text_delta") => self.push_text(str_field(delta, "text").unwrap_or(""), emit),
            Some("thinking_delta") => push_thinking(
                str_field(delta, "thinking").unwrap_or(""),
                emit,
                &mut self.produced,
            ),
            Some("input_json_delta") => {
                let part = str_field(delta, "partial_json").unwrap_or("");
                match self.open_tools.get_mut(&index) {
                    Some(tool) => tool.json.push_str(part),
                    None => {
                        return Err(ModelError::Protocol(format!(
                            "input_json_delta for content block {index}, which is not an open tool_use block"
                        )))
                    }
                }
            }
            // signature_delta, citations_delta and future delta types are not surfaced.
            _ => {}
        }
        Ok(())
    }

    fn push_text(&mut self, text: &str, emit: &mut dyn FnMut(StreamDelta)) {
        if !text.is_empty() {
            self.produced = true;
            self.text.push_str(text);
            emit(StreamDelta::Text(text.to_string()));
        }
    }

    fn close_block(&mut self, index: u64) {
        if let Some(t) = self.open_tools.remove(&index) {
            self.tool_calls.insert(
                index,
                ToolCall {
                    id: t.id,
                    name: t.name,
                    arguments: parse_arguments(t.json),
                },
            );
        }
    }

    pub fn finish(mut self, done: bool) -> Result<Assembled, ModelError> {
        // Without message_stop the message is complete only if its stop_reason arrived.
        if !done && self.stop_reason.is_none() {
            return Err(ModelError::Network("stream ended early".into()));
        }
        let open: Vec<u64> = self.open_tools.keys().copied().collect();
        for index in open {
            self.close_block(index);
        }
        let tool_calls: Vec<ToolCall> = self.tool_calls.into_values().collect();
        let stop_reason = match self.stop_reason.as_deref() {
            Some(s) => stop_reason(s),
            None if tool_calls.is_empty() => StopReason::EndTurn,
            None => StopReason::ToolUse,
        };
        Ok(Assembled {
            text: self.text,
            tool_calls,
            stop_reason,
            usage: self.usage,
            model: self.model,
        })
    }
}

fn push_thinking(text: &str, emit: &mut dyn FnMut(StreamDelta), produced: &mut bool) {
    if !text.is_empty() {
        *produced = true;
        emit(StreamDelta::Thinking(text.to_string()));
    }
}

/// Usage counts in `message_delta` are cumulative: present fields replace earlier values.
fn apply_usage(usage: &mut TokenUsage, u: &Value) {
    let fields: [(&str, &mut u64); 4] = [
        ("input_tokens", &mut usage.input_tokens),
        ("output_tokens", &mut usage.output_tokens),
        ("cache_read_input_tokens", &mut usage.cache_read_tokens),
        ("cache_creation_input_tokens", &mut usage.cache_write_tokens),
    ];
    for (key, slot) in fields {
        if let Some(n) = u64_field(u, key) {
            *slot = n;
        }
    }
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_string()),
    }
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;
