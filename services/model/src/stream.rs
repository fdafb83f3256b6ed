//! What both wire parsers produce, and the dispatch between them.

use serde_json::Value;

use crate::sse::SseEvent;
use crate::{
    anthropic, openai, ApiType, InvalidArguments, ModelError, StopReason, StreamDelta, TokenUsage,
    ToolCall,
};

/// Whether the parser has seen the end of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    More,
    Done,
}

/// A fully parsed turn, before the client adds which provider answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Assembled {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub stop_reason: StopReason,
    pub usage: TokenUsage,
    /// The model name reported by the stream, if any.
    pub model: Option<String>,
}

/// Tool arguments are only valid JSON once complete; an empty string means "no arguments".
/// Invalid JSON is kept raw so the runtime can hand the model an error tool result.
pub(crate) fn parse_arguments(raw: String) -> Result<Value, InvalidArguments> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(&raw).map_err(|_| InvalidArguments { raw })
}

pub(crate) fn parse_json(ev: &SseEvent) -> Result<Value, ModelError> {
    serde_json::from_str(&ev.data).map_err(|e| {
        let mut snippet: String = ev.data.chars().take(200).collect();
        if snippet.len() < ev.data.len() {
            snippet.push('…');
        }
        ModelError::Protocol(format!("invalid JSON in stream event ({e}): {snippet}"))
    })
}

pub(crate) fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

pub(crate) fn u64_field(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// The wire parser of one attempt.
#[derive(Debug)]
pub(crate) enum StreamParser {
    Anthropic(anthropic::StreamParser),
    OpenAi(openai::StreamParser),
}

impl StreamParser {
    /// `api` must already be resolved (`Auto` is treated as OpenAI-compatible).
    pub fn new(api: ApiType) -> Self {
        match api {
            ApiType::Anthropic => StreamParser::Anthropic(anthropic::StreamParser::default()),
            ApiType::OpenaiCompatible | ApiType::Auto => {
                StreamParser::OpenAi(openai::StreamParser::default())
            }
        }
    }

    pub fn on_event(
        &mut self,
        ev: &SseEvent,
        emit: &mut dyn FnMut(StreamDelta),
    ) -> Result<Progress, ModelError> {
        match self {
            StreamParser::Anthropic(p) => p.on_event(ev, emit),
            StreamParser::OpenAi(p) => p.on_event(ev, emit),
        }
    }

    /// True once anything reached the caller: a text/thinking delta or a tool-call fragment.
    /// From then on a failure must not be retried (it would duplicate output).
    pub fn produced(&self) -> bool {
        match self {
            StreamParser::Anthropic(p) => p.produced(),
            StreamParser::OpenAi(p) => p.produced(),
        }
    }

    /// `done` is true when [`Progress::Done`] was returned, false at a bare end of stream.
    pub fn finish(self, done: bool) -> Result<Assembled, ModelError> {
        match self {
            StreamParser::Anthropic(p) => p.finish(done),
            StreamParser::OpenAi(p) => p.finish(done),
        }
    }
}

/// Run a whole transcript through decoder and parser, feeding it in the given chunks.
#[cfg(test)]
pub(crate) fn parse_transcript(
    api: ApiType,
    chunks: &[&[u8]],
) -> (Vec<StreamDelta>, Result<Assembled, ModelError>) {
    let mut decoder = crate::sse::SseDecoder::new();
    let mut parser = StreamParser::new(api);
    let mut deltas = Vec::new();
    let mut emit = |d: StreamDelta| deltas.push(d);
    let mut events = Vec::new();
    for c in chunks {
        events.extend(decoder.push(c));
    }
    events.extend(decoder.finish());
    for ev in &events {
        match parser.on_event(ev, &mut emit) {
            Ok(Progress::More) => {}
            Ok(Progress::Done) => return (deltas, parser.finish(true)),
            Err(e) => return (deltas, Err(e)),
        }
    }
    (deltas, parser.finish(false))
}
