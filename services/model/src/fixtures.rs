//! Byte-exact SSE transcripts shared by the unit tests
//! (docs/specs/model-streaming.md#test-transcripts).

pub const ANTHROPIC_TOOL_THINKING: &str =
    include_str!("../tests/fixtures/anthropic_tool_thinking.sse");
pub const OPENAI_INTERLEAVED: &str = include_str!("../tests/fixtures/openai_interleaved.sse");
pub const OPENAI_COMPAT_QUIRKS: &str = include_str!("../tests/fixtures/openai_compat_quirks.sse");
