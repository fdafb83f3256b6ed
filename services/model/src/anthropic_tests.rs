use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::fixtures::ANTHROPIC_TOOL_THINKING;
use crate::stream::parse_transcript;
use crate::{ApiType, InvalidArguments, ToolSpec};

fn parse(s: &str) -> (Vec<StreamDelta>, Result<Assembled, ModelError>) {
    parse_transcript(ApiType::Anthropic, &[s.as_bytes()])
}

#[test]
fn full_transcript_with_thinking_ping_and_tools() {
    let (deltas, result) = parse(ANTHROPIC_TOOL_THINKING);
    assert_eq!(
        deltas,
        vec![
            StreamDelta::Thinking("The user wants ".into()),
            StreamDelta::Thinking("the weather.".into()),
            StreamDelta::Text("Je vérifie la météo à ".into()),
            StreamDelta::Text("東京 🌤".into()),
        ]
    );
    assert_eq!(
        result,
        Ok(Assembled {
            text: "Je vérifie la météo à 東京 🌤".into(),
            tool_calls: vec![
                ToolCall {
                    id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                    name: "get_weather".into(),
                    arguments: Ok(json!({"location": "Tokyo", "unit": "c"})),
                },
                // No input_json_delta at all: empty input means `{}`.
                ToolCall {
                    id: "toolu_02".into(),
                    name: "list_dir".into(),
                    arguments: Ok(json!({})),
                },
            ],
            stop_reason: StopReason::ToolUse,
            usage: TokenUsage {
                input_tokens: 472,
                output_tokens: 89,
                cache_read_tokens: 2048,
                cache_write_tokens: 12,
            },
            model: Some("claude-sonnet-4-5".into()),
        })
    );
}

#[test]
fn transcript_split_at_every_byte_gives_the_same_result() {
    let bytes = ANTHROPIC_TOOL_THINKING.as_bytes();
    let whole = parse_transcript(ApiType::Anthropic, &[bytes]);
    for i in 0..=bytes.len() {
        let (a, b) = bytes.split_at(i);
        assert_eq!(
            parse_transcript(ApiType::Anthropic, &[a, b]),
            whole,
            "split at {i}"
        );
    }
}

fn tool_stream(partial_json: &str) -> String {
    format!(
        "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"model\":\"m\",\"usage\":{{\"input_tokens\":5,\"output_tokens\":1}}}}}}\n\n\
         event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"shell\",\"input\":{{}}}}}}\n\n\
         event: content_block_delta\ndata: {}\n\n\
         event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n\
         event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"tool_use\"}},\"usage\":{{\"output_tokens\":7}}}}\n\n",
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":partial_json}})
    )
}

#[test]
fn invalid_tool_json_is_kept_raw_and_eof_after_stop_reason_is_complete() {
    let (_, result) = parse(&tool_stream("{\"command\": \"ls"));
    let a = result.unwrap();
    assert_eq!(
        a.tool_calls[0].arguments,
        Err(InvalidArguments {
            raw: "{\"command\": \"ls".to_string()
        })
    );
    assert_eq!(a.stop_reason, StopReason::ToolUse);
    assert_eq!(a.usage.output_tokens, 7);
}

#[test]
fn eof_before_stop_reason_is_a_network_error() {
    let s = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n\
             event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
             event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n";
    let (deltas, result) = parse(s);
    assert_eq!(deltas, vec![StreamDelta::Text("Hi".into())]);
    assert_eq!(
        result,
        Err(ModelError::Network("stream ended early".into()))
    );
}

#[test]
fn error_events_map_like_http_statuses() {
    let s = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n\
             event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    assert_eq!(
        parse(s).1,
        Err(ModelError::Server {
            status: 529,
            message: "Overloaded".into()
        })
    );
    let s = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal\"}}\n\n";
    assert_eq!(
        parse(s).1,
        Err(ModelError::Server {
            status: 500,
            message: "Internal".into()
        })
    );
}

#[test]
fn garbage_data_in_a_known_event_is_a_protocol_error() {
    let (_, result) = parse("event: message_delta\ndata: {not json\n\n");
    assert!(matches!(result, Err(ModelError::Protocol(_))), "{result:?}");
}

#[test]
fn request_body_places_system_tools_and_tool_results() {
    let req = ChatRequest {
        system: "You are terse.".into(),
        messages: vec![
            Message {
                role: Role::User,
                content: vec![ContentBlock::Text {
                    text: "List files".into(),
                }],
            },
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Text {
                        text: String::new(),
                    },
                    ContentBlock::ToolUse {
                        id: "toolu_1".into(),
                        name: "list_dir".into(),
                        input: json!({"path": "."}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::Text {
                        text: "also hurry".into(),
                    },
                    ContentBlock::ToolResult {
                        tool_use_id: "toolu_1".into(),
                        content: "a.txt".into(),
                        is_error: false,
                    },
                ],
            },
        ],
        tools: vec![ToolSpec {
            name: "list_dir".into(),
            description: "List a directory".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
    };
    let options = ModelOptions {
        max_output_tokens: 1024,
        ..ModelOptions::default()
    };
    assert_eq!(
        request_body("claude-x", &options, &req),
        json!({
            "model": "claude-x",
            "max_tokens": 1024,
            "stream": true,
            "system": "You are terse.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "List files"}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "list_dir", "input": {"path": "."}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"},
                    {"type": "text", "text": "also hurry"}
                ]}
            ],
            "tools": [{
                "name": "list_dir",
                "description": "List a directory",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}
            }]
        })
    );
}
