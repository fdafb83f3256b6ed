//! The script language of the scripted model server: one [`Turn`] per model request.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the scripted model answers to one request. Serde-compatible so scripts can be JSON
/// files (`[{"text": "hi"}, {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}]`);
/// unknown fields are rejected to catch typos in scripts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Turn {
    /// Answer text, streamed in several deltas of a few characters each.
    pub text: String,
    /// Reasoning streamed before the text (Anthropic `thinking` block, OpenAI-compatible
    /// `reasoning_content`).
    pub thinking: String,
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Defaults to a rough estimate (request bytes / 4, answer bytes / 4 + 1).
    pub usage: Option<ScriptedUsage>,
    /// Anthropic spelling (`end_turn`, `tool_use`, `max_tokens`, ...); defaults to
    /// `tool_use` when tool calls are present, else `end_turn`. Mapped for OpenAI.
    pub stop_reason: Option<String>,
    /// Answer with this HTTP error instead of a stream.
    pub http_error: Option<HttpError>,
    /// After HTTP 200 and the first event, send an overloaded error inside the stream.
    pub overloaded_after_200: bool,
    /// Send this many SSE events, then keep the connection open and silent.
    pub stall_after_chunks: Option<usize>,
    /// Send this many SSE events, then drop the connection without a terminating chunk.
    pub disconnect_after_chunks: Option<usize>,
    /// Pause between two SSE events.
    pub chunk_delay_ms: u64,
    /// Only use this turn for a request whose raw JSON body contains the string. Such turns
    /// are preferred over unconditional ones; otherwise the script is FIFO.
    pub match_contains: Option<String>,
}

/// A tool call the scripted model makes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// Defaults to `toolu_{request}_{k}` / `call_{request}_{k}`.
    pub id: Option<String>,
    pub name: String,
    /// The arguments object (serialized compactly and streamed in fragments).
    pub arguments: Option<Value>,
    /// Streamed verbatim instead of `arguments`; may be invalid JSON on purpose.
    pub raw_arguments: Option<String>,
}

impl ScriptedToolCall {
    /// The exact argument text that goes on the wire.
    pub fn arguments_text(&self) -> String {
        match (&self.raw_arguments, &self.arguments) {
            (Some(raw), _) => raw.clone(),
            (None, Some(v)) if !v.is_null() => v.to_string(),
            _ => "{}".to_string(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScriptedUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// An HTTP error answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpError {
    pub status: u16,
    /// Response body; defaults to the vendor's error JSON for the status.
    pub body: Option<String>,
    /// Sent as `retry-after: N`.
    pub retry_after_secs: Option<u64>,
    /// Sent as `retry-after-ms: N`.
    pub retry_after_ms: Option<u64>,
    /// Extra response headers, e.g. `{"x-should-retry": "false"}`.
    pub headers: BTreeMap<String, String>,
}

impl Turn {
    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    /// A turn that only calls one tool.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Self::default().with_tool_call(name, arguments)
    }

    /// Answer with an HTTP error status (vendor-style body).
    pub fn http_error(status: u16) -> Self {
        Self {
            http_error: Some(HttpError {
                status,
                ..HttpError::default()
            }),
            ..Self::default()
        }
    }

    pub fn with_tool_call(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.tool_calls.push(ScriptedToolCall {
            name: name.into(),
            arguments: Some(arguments),
            ..ScriptedToolCall::default()
        });
        self
    }

    /// A tool call whose argument text is sent verbatim (e.g. invalid JSON).
    pub fn with_raw_tool_call(mut self, name: impl Into<String>, raw: impl Into<String>) -> Self {
        self.tool_calls.push(ScriptedToolCall {
            name: name.into(),
            raw_arguments: Some(raw.into()),
            ..ScriptedToolCall::default()
        });
        self
    }

    pub fn with_thinking(mut self, thinking: impl Into<String>) -> Self {
        self.thinking = thinking.into();
        self
    }

    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(ScriptedUsage {
            input_tokens,
            output_tokens,
        });
        self
    }

    pub fn with_stop_reason(mut self, reason: impl Into<String>) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }

    /// Only for an [`Turn::http_error`] turn: the error body.
    pub fn with_error_body(mut self, body: impl Into<String>) -> Self {
        if let Some(e) = &mut self.http_error {
            e.body = Some(body.into());
        }
        self
    }

    /// Only for an [`Turn::http_error`] turn: `retry-after: secs`.
    pub fn with_retry_after_secs(mut self, secs: u64) -> Self {
        if let Some(e) = &mut self.http_error {
            e.retry_after_secs = Some(secs);
        }
        self
    }

    /// Only for an [`Turn::http_error`] turn: `retry-after-ms: ms`.
    pub fn with_retry_after_ms(mut self, ms: u64) -> Self {
        if let Some(e) = &mut self.http_error {
            e.retry_after_ms = Some(ms);
        }
        self
    }

    /// Only for an [`Turn::http_error`] turn: an extra response header.
    pub fn with_error_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Some(e) = &mut self.http_error {
            e.headers.insert(name.into(), value.into());
        }
        self
    }

    pub fn overloaded_after_200(mut self) -> Self {
        self.overloaded_after_200 = true;
        self
    }

    pub fn stall_after(mut self, chunks: usize) -> Self {
        self.stall_after_chunks = Some(chunks);
        self
    }

    pub fn disconnect_after(mut self, chunks: usize) -> Self {
        self.disconnect_after_chunks = Some(chunks);
        self
    }

    pub fn with_chunk_delay_ms(mut self, ms: u64) -> Self {
        self.chunk_delay_ms = ms;
        self
    }

    pub fn matching(mut self, needle: impl Into<String>) -> Self {
        self.match_contains = Some(needle.into());
        self
    }

    /// The stop reason in Anthropic spelling.
    pub(crate) fn effective_stop_reason(&self) -> String {
        match &self.stop_reason {
            Some(r) => r.clone(),
            None if self.tool_calls.is_empty() => "end_turn".into(),
            None => "tool_use".into(),
        }
    }
}
