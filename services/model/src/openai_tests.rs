use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::fixtures::{OPENAI_COMPAT_QUIRKS, OPENAI_INTERLEAVED};
use crate::stream::parse_transcript;
use crate::{ApiType, InvalidArguments, ToolSpec};

fn parse(s: &str) -> (Vec<StreamDelta>, Result<Assembled, ModelError>) {
    parse_transcript(ApiType::OpenaiCompatible, &[s.as_bytes()])
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let v = json!({"id":"c","object":"chat.completion.chunk","created":1,"model":"m",
        "choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
    format!("data: {v}\n\n")
}

#[test]
fn interleaved_tool_calls_are_keyed_by_index() {
    let (deltas, result) = parse(OPENAI_INTERLEAVED);
    assert_eq!(
        deltas,
        vec![
            StreamDelta::Text("Checking both cities — ".into()),
            StreamDelta::Text("東京 and Paris.".into()),
        ]
    );
    assert_eq!(
        result,
        Ok(Assembled {
            text: "Checking both cities — 東京 and Paris.".into(),
            tool_calls: vec![
                ToolCall {
                    id: "call_tokyo".into(),
                    name: "get_weather".into(),
                    arguments: Ok(json!({"location": "Tokyo"})),
                },
                ToolCall {
                    id: "call_paris".into(),
                    name: "get_weather".into(),
                    arguments: Ok(json!({"location": "Paris"})),
                },
            ],
            stop_reason: StopReason::ToolUse,
            usage: TokenUsage {
                input_tokens: 82,
                output_tokens: 41,
                cache_read_tokens: 64,
                cache_write_tokens: 0,
            },
            model: Some("gpt-4o-2024-08-06".into()),
        })
    );
}

#[test]
fn transcripts_split_at_every_byte_give_the_same_result() {
    for fixture in [OPENAI_INTERLEAVED, OPENAI_COMPAT_QUIRKS] {
        let bytes = fixture.as_bytes();
        let whole = parse_transcript(ApiType::OpenaiCompatible, &[bytes]);
        assert!(whole.1.is_ok());
        for i in 0..=bytes.len() {
            let (a, b) = bytes.split_at(i);
            assert_eq!(
                parse_transcript(ApiType::OpenaiCompatible, &[a, b]),
                whole,
                "split at {i}"
            );
        }
    }
}

#[test]
fn compat_quirks_whole_call_stop_reason_inline_usage_no_done() {
    let (deltas, result) = parse(OPENAI_COMPAT_QUIRKS);
    assert_eq!(
        deltas,
        vec![StreamDelta::Thinking("Need to list files.".into())]
    );
    assert_eq!(
        result,
        Ok(Assembled {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "call_abc".into(),
                name: "list_dir".into(),
                arguments: Ok(json!({"path": "."})),
            }],
            stop_reason: StopReason::ToolUse,
            usage: TokenUsage {
                input_tokens: 30,
                output_tokens: 12,
                ..TokenUsage::default()
            },
            model: Some("qwen2.5-coder".into()),
        })
    );
}

#[test]
fn invalid_arguments_object_arguments_and_missing_ids() {
    let s = [
        chunk(json!({"tool_calls":[{"index":0,"function":{"name":"shell","arguments":"{\"command\": "}}]}), None),
        chunk(json!({"tool_calls":[{"index":1,"function":{"name":"glob","arguments":{"pattern":"*.rs"}}}]}), None),
        chunk(json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let a = parse(&s).1.unwrap();
    assert_eq!(
        a.tool_calls,
        vec![
            ToolCall {
                id: "call_0".into(),
                name: "shell".into(),
                arguments: Err(InvalidArguments {
                    raw: "{\"command\": ".into(),
                }),
            },
            ToolCall {
                id: "call_1".into(),
                name: "glob".into(),
                arguments: Ok(json!({"pattern": "*.rs"})),
            },
        ]
    );
}

#[test]
fn eof_before_finish_reason_is_network_error() {
    let s = chunk(json!({"role":"assistant","content":"Hel"}), None);
    let (deltas, result) = parse(&s);
    assert_eq!(deltas, vec![StreamDelta::Text("Hel".into())]);
    assert_eq!(
        result,
        Err(ModelError::Network("stream ended early".into()))
    );
}

#[test]
fn error_object_inside_stream() {
    let s = chunk(json!({"role":"assistant","content":""}), None)
        + "data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n";
    assert_eq!(
        parse(&s),
        (
            vec![],
            Err(ModelError::Server {
                status: 500,
                message: "The server had an error".into()
            })
        )
    );
    let s = "event: error\ndata: {\"error\":{\"message\":\"slow down\",\"type\":\"rate_limit_exceeded\"}}\n\n";
    assert_eq!(
        parse(s).1,
        Err(ModelError::RateLimited {
            status: 429,
            message: "slow down".into()
        })
    );
}

#[test]
fn finish_reasons_map() {
    for (reason, want) in [
        ("stop", StopReason::EndTurn),
        ("length", StopReason::MaxTokens),
        ("content_filter", StopReason::Refusal),
        ("weird", StopReason::Other("weird".into())),
    ] {
        let s = chunk(json!({"content":"x"}), Some(reason));
        assert_eq!(parse(&s).1.unwrap().stop_reason, want, "{reason}");
    }
}

#[test]
fn request_body_shapes_messages_and_tools() {
    let req = ChatRequest {
        system: "Be brief.".into(),
        messages: vec![
            Message {
                role: Role::User,
                content: vec![ContentBlock::Text {
                    text: "Weather?".into(),
                }],
            },
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Text {
                        text: "Checking.".into(),
                    },
                    ContentBlock::ToolUse {
                        id: "call_1".into(),
                        name: "get_weather".into(),
                        input: json!({"city": "Oslo"}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::ToolResult {
                        tool_use_id: "call_1".into(),
                        content: "rain".into(),
                        is_error: false,
                    },
                    ContentBlock::ToolResult {
                        tool_use_id: "call_2".into(),
                        content: "no such city".into(),
                        is_error: true,
                    },
                ],
            },
        ],
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Weather for a city".into(),
            input_schema: json!({"type": "object"}),
        }],
    };
    let options = ModelOptions {
        max_output_tokens: 2000,
        ..ModelOptions::default()
    };
    assert_eq!(
        request_body("gpt-x", &options, &req, LimitField::MaxTokens),
        json!({
            "model": "gpt-x",
            "max_tokens": 2000,
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": "Checking.", "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
                {"role": "tool", "tool_call_id": "call_2", "content": "Error: no such city"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "get_weather", "description": "Weather for a city", "parameters": {"type": "object"}
            }}]
        })
    );
    let body = request_body("o3", &options, &req, LimitField::MaxCompletionTokens);
    assert_eq!(body.get("max_completion_tokens"), Some(&json!(2000)));
    assert_eq!(body.get("max_tokens"), None);
}
