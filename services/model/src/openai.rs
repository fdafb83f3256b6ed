//! OpenAI-compatible Chat Completions: request body and chunk parser
//! (docs/specs/model-streaming.md#openai-compatible-chat-completions, including the
//! compat-server quirks listed there).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::sse::SseEvent;
use crate::stream::{parse_arguments, parse_json, str_field, u64_field, Assembled, Progress};
use crate::{
    http, ChatRequest, ContentBlock, Message, ModelError, ModelOptions, Role, StopReason,
    StreamDelta, TokenUsage, ToolCall,
};

/// Which field carries the completion limit. api.openai.com rejects `max_tokens` for its
/// reasoning models, while many compat servers only know `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LimitField {
    MaxTokens,
    MaxCompletionTokens,
}

/// The JSON body of `POST /v1/chat/completions`. The local context window (`max_tokens`
/// setting) is never sent; only the completion limit is.
pub(crate) fn request_body(
    model: &str,
    options: &ModelOptions,
    req: &ChatRequest,
    limit: LimitField,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let limit_key = match limit {
        LimitField::MaxTokens => "max_tokens",
        LimitField::MaxCompletionTokens => "max_completion_tokens",
    };
    body.insert(limit_key.into(), json!(options.max_output_tokens));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    let mut msgs = Vec::new();
    if !req.system.is_empty() {
        msgs.push(json!({"role": "system", "content": req.system}));
    }
    for m in &req.messages {
        push_message(&mut msgs, m);
    }
    body.insert("messages".into(), Value::Array(msgs));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// Tool results become `role: "tool"` messages. They are emitted before any user text of
/// the same message because they must directly follow the assistant's `tool_calls`.
fn push_message(out: &mut Vec<Value>, m: &Message) {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for b in &m.content {
        match b {
            ContentBlock::Text { text } if !text.is_empty() => texts.push(text.as_str()),
            ContentBlock::Text { .. } => {}
            ContentBlock::ToolUse { id, name, input } => calls.push(json!({
                "id": id, "type": "function",
                "function": {"name": name, "arguments": input.to_string()}
            })),
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                // The format has no error flag; say it in the content so the model knows.
                let content = if *is_error {
                    format!("Error: {content}")
                } else {
                    content.clone()
                };
                results
                    .push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
            }
        }
    }
    let text = texts.join("\n\n");
    match m.role {
        Role::User => {
            out.extend(results);
            if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
        }
        Role::Assistant => {
            if !text.is_empty() || !calls.is_empty() {
                let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                out.push(msg);
            }
            out.extend(results);
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    id: String,
    name: String,
    arguments: String,
}

/// The deprecated single `function_call` delta gets its own slot beyond any real index.
const LEGACY_FUNCTION_SLOT: u64 = u64::MAX;

/// Accumulates one streamed completion (choice 0).
#[derive(Debug, Default)]
pub(crate) struct StreamParser {
    text: String,
    /// Tool calls keyed strictly by their `index`: fragments of parallel calls interleave.
    slots: BTreeMap<u64, Slot>,
    finish_reason: Option<String>,
    usage: TokenUsage,
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
        let data = ev.data.trim();
        if data == "[DONE]" {
            return Ok(Progress::Done);
        }
        if data.is_empty() {
            return Ok(Progress::More);
        }
        if ev.event.as_deref() == Some("error") {
            let v = serde_json::from_str(data).unwrap_or_else(|_| json!({"message": data}));
            return Err(http::stream_error(&v));
        }
        let v = parse_json(ev)?;
        if v.get("error").is_some_and(|e| !e.is_null()) {
            return Err(http::stream_error(&v));
        }
        if let Some(model) = str_field(&v, "model") {
            self.model = Some(model.to_string());
        }
        // Usually a separate final chunk with empty choices; some servers attach it to the
        // last content chunk instead. Either way it replaces earlier values.
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.apply_usage(u);
        }
        let choices = v.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            if u64_field(choice, "index").unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.get("delta") {
                self.apply_delta(delta, emit);
            }
            if let Some(reason) = str_field(choice, "finish_reason") {
                self.finish_reason = Some(reason.to_string());
            }
        }
        Ok(Progress::More)
    }

    fn apply_delta(&mut self, delta: &Value, emit: &mut dyn FnMut(StreamDelta)) {
        // `reasoning_content` (vLLM, DeepSeek, llama.cpp) and `reasoning` (Ollama, OpenRouter).
        for key in ["reasoning_content", "reasoning"] {
            if let Some(t) = str_field(delta, key).filter(|t| !t.is_empty()) {
                self.produced = true;
                emit(StreamDelta::Thinking(t.to_string()));
            }
        }
        // A refusal is the model's visible answer, so it streams like text.
        for key in ["content", "refusal"] {
            if let Some(t) = str_field(delta, key).filter(|t| !t.is_empty()) {
                self.produced = true;
                self.text.push_str(t);
                emit(StreamDelta::Text(t.to_string()));
            }
        }
        let calls = delta.get("tool_calls").and_then(Value::as_array);
        for (pos, tc) in calls.into_iter().flatten().enumerate() {
            // Some servers omit `index` when every call arrives whole in one chunk.
            let index = u64_field(tc, "index").unwrap_or(pos as u64);
            let (name, args) = match (tc.get("function"), tc.get("custom")) {
                (Some(f), _) => (f.get("name"), f.get("arguments")),
                (None, Some(c)) => (c.get("name"), c.get("input")),
                (None, None) => (None, None),
            };
            self.apply_call_fragment(index, str_field(tc, "id"), name, args);
        }
        if let Some(f) = delta.get("function_call").filter(|f| f.is_object()) {
            self.apply_call_fragment(
                LEGACY_FUNCTION_SLOT,
                None,
                f.get("name"),
                f.get("arguments"),
            );
        }
    }

    fn apply_call_fragment(
        &mut self,
        index: u64,
        id: Option<&str>,
        name: Option<&Value>,
        args: Option<&Value>,
    ) {
        self.produced = true;
        let slot = self.slots.entry(index).or_default();
        if let Some(id) = id.filter(|id| !id.is_empty()) {
            if slot.id.is_empty() {
                slot.id = id.to_string();
            }
        }
        // Some gateways repeat the name on every fragment; it is not streamed in pieces.
        if let Some(name) = name.and_then(Value::as_str).filter(|n| !n.is_empty()) {
            if slot.name.is_empty() {
                slot.name = name.to_string();
            }
        }
        match args {
            Some(Value::String(s)) => slot.arguments.push_str(s),
            // An already-parsed object instead of a JSON string (seen on some compat servers).
            Some(v @ (Value::Object(_) | Value::Array(_))) => slot.arguments = v.to_string(),
            _ => {}
        }
    }

    fn apply_usage(&mut self, u: &Value) {
        if let Some(n) = u64_field(u, "prompt_tokens") {
            self.usage.input_tokens = n;
        }
        if let Some(n) = u64_field(u, "completion_tokens") {
            self.usage.output_tokens = n;
        }
        if let Some(n) = u
            .get("prompt_tokens_details")
            .and_then(|d| u64_field(d, "cached_tokens"))
        {
            self.usage.cache_read_tokens = n;
        }
    }

    pub fn finish(self, done: bool) -> Result<Assembled, ModelError> {
        // A clean EOF without `[DONE]` is fine once a finish_reason arrived (compat servers).
        if !done && self.finish_reason.is_none() {
            return Err(ModelError::Network("stream ended early".into()));
        }
        let tool_calls: Vec<ToolCall> = self
            .slots
            .into_iter()
            .map(|(index, s)| ToolCall {
                id: if s.id.is_empty() {
                    format!("call_{index}")
                } else {
                    s.id
                },
                name: s.name,
                arguments: parse_arguments(s.arguments),
            })
            .collect();
        // Compat servers often say "stop" although they sent tool calls.
        let stop_reason = match self.finish_reason.as_deref() {
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            _ if !tool_calls.is_empty() => StopReason::ToolUse,
            None | Some("stop") => StopReason::EndTurn,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            Some(other) => StopReason::Other(other.to_string()),
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

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;
