//! Provider-neutral request and response types.

use lumina_config::Secret;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which wire format to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiType {
    Anthropic,
    OpenaiCompatible,
    /// Anthropic when the base URL or model name says so (`anthropic` in the host, a
    /// `claude` model), otherwise OpenAI-compatible.
    Auto,
}

impl ApiType {
    pub fn parse(s: &str) -> Option<ApiType> {
        match s.trim().to_ascii_lowercase().as_str() {
            "anthropic" => Some(ApiType::Anthropic),
            "openai_compatible" | "openai-compatible" | "openai" => Some(ApiType::OpenaiCompatible),
            "auto" | "" => Some(ApiType::Auto),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ApiType::Anthropic => "anthropic",
            ApiType::OpenaiCompatible => "openai_compatible",
            ApiType::Auto => "auto",
        }
    }
}

/// One endpoint + model + key.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEndpoint {
    pub api_type: ApiType,
    /// Base URL without the `/v1/...` path, e.g. `https://api.anthropic.com`. A trailing
    /// `/v1` is tolerated.
    pub base_url: String,
    pub model: String,
    pub api_key: Secret,
}

/// Transport and retry knobs.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOptions {
    /// Completion limit sent to the provider (`max_tokens` for Anthropic).
    pub max_output_tokens: u32,
    pub connect_timeout: std::time::Duration,
    /// Longest silence between two SSE events before the stream counts as stalled.
    pub idle_timeout: std::time::Duration,
    /// Retries after the first attempt (Stainless default: 2).
    pub max_retries: u32,
    /// Upper bound of one backoff sleep.
    pub max_backoff: std::time::Duration,
}

impl Default for ModelOptions {
    fn default() -> Self {
        Self {
            max_output_tokens: 8192,
            connect_timeout: std::time::Duration::from_secs(10),
            idle_timeout: std::time::Duration::from_secs(90),
            max_retries: 2,
            max_backoff: std::time::Duration::from_secs(8),
        }
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One block of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        is_error: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

/// What the runtime asks the model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
}

/// A streamed fragment, forwarded to the user as it arrives.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamDelta {
    Text(String),
    Thinking(String),
}

/// A complete tool call. `arguments` is an error when the model sent invalid JSON: the
/// runtime turns that into an error tool result instead of failing.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Result<Value, InvalidArguments>,
}

/// Tool-call arguments that are not valid JSON, kept as the model sent them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the arguments are not valid JSON ({} bytes)", .raw.len())]
pub struct InvalidArguments {
    pub raw: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

/// Why the model stopped, normalized across providers. Unknown values are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    Refusal,
    Other(String),
}

impl StopReason {
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::Refusal => "refusal",
            StopReason::Other(s) => s,
        }
    }
}

/// Which endpoint answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Primary,
    Fallback,
}

impl Provider {
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Primary => "primary",
            Provider::Fallback => "fallback",
        }
    }
}

/// A complete model turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub stop_reason: StopReason,
    pub usage: TokenUsage,
    /// The model name that answered.
    pub model: String,
    pub provider: Provider,
}
