//! Successful streams: deltas, tool calls, usage, request shapes.

use lumina_model::{
    ApiType, ChatRequest, ContentBlock, InvalidArguments, Message, Provider, Role, StopReason,
    StreamDelta, TokenUsage, ToolCall, ToolSpec,
};
use lumina_testkit::{ScriptedApi, ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{client, endpoint, fast_options, run, user};

crate::both_apis!(
    text_streams_in_several_deltas,
    tool_calls_are_assembled_from_fragments,
    invalid_tool_json_is_kept_raw,
    usage_is_reported,
    thinking_is_forwarded_separately,
    request_carries_history_tools_and_auth,
    base_url_ending_in_v1_is_not_doubled,
);

async fn text_streams_in_several_deltas(api: ApiType) {
    let text = "Hello from the scripted model — ünïcødé ✓";
    let server = ScriptedModelServer::start(vec![Turn::text(text)]).unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let run = run(&c, &user("hi")).await;
    let resp = run.result.as_ref().unwrap();
    assert!(
        run.deltas.len() > 3,
        "expected several deltas, got {:?}",
        run.deltas
    );
    assert_eq!(run.text_deltas().concat(), text);
    assert_eq!(resp.text, text);
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    assert_eq!(resp.provider, Provider::Primary);
    assert_eq!(
        resp.model,
        endpoint(&server, api).model,
        "model echoed by the stream"
    );
    assert!(resp.tool_calls.is_empty());
    assert_eq!(server.request_count(), 1);
}

async fn tool_calls_are_assembled_from_fragments(api: ApiType) {
    let turn = Turn::text("Let me look.")
        .with_tool_call(
            "read_file",
            json!({"path": "src/main.rs", "offset": 10, "limit": 200}),
        )
        .with_tool_call("grep", json!({"pattern": "fn main", "glob": "**/*.rs"}));
    let server = ScriptedModelServer::start(vec![turn]).unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let resp = run(&c, &user("go")).await.result.unwrap();
    let (id0, id1) = match api {
        ApiType::Anthropic => ("toolu_1_0", "toolu_1_1"),
        _ => ("call_1_0", "call_1_1"),
    };
    assert_eq!(
        resp.tool_calls,
        vec![
            ToolCall {
                id: id0.into(),
                name: "read_file".into(),
                arguments: Ok(json!({"path": "src/main.rs", "offset": 10, "limit": 200})),
            },
            ToolCall {
                id: id1.into(),
                name: "grep".into(),
                arguments: Ok(json!({"pattern": "fn main", "glob": "**/*.rs"})),
            },
        ]
    );
    assert_eq!(resp.stop_reason, StopReason::ToolUse);
    assert_eq!(resp.text, "Let me look.");
}

async fn invalid_tool_json_is_kept_raw(api: ApiType) {
    let raw = "{\"command\": \"ls -la";
    let server = ScriptedModelServer::start(vec![Turn::default()
        .with_raw_tool_call("shell", raw)
        .with_tool_call("list_dir", json!({}))])
    .unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let resp = run(&c, &user("go")).await.result.unwrap();
    let args: Vec<_> = resp
        .tool_calls
        .iter()
        .map(|t| t.arguments.clone())
        .collect();
    assert_eq!(
        args,
        vec![
            Err(InvalidArguments {
                raw: raw.to_string()
            }),
            Ok(json!({}))
        ]
    );
}

async fn usage_is_reported(api: ApiType) {
    let server =
        ScriptedModelServer::start(vec![Turn::text("counted").with_usage(1234, 56)]).unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let resp = run(&c, &user("count")).await.result.unwrap();
    assert_eq!(
        resp.usage,
        TokenUsage {
            input_tokens: 1234,
            output_tokens: 56,
            ..TokenUsage::default()
        }
    );
}

async fn thinking_is_forwarded_separately(api: ApiType) {
    let server =
        ScriptedModelServer::start(vec![Turn::text("Answer.").with_thinking("Pondering deeply")])
            .unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let run = run(&c, &user("think")).await;
    let thinking: String = run
        .deltas
        .iter()
        .filter_map(|d| match d {
            StreamDelta::Thinking(t) => Some(t.as_str()),
            StreamDelta::Text(_) => None,
        })
        .collect();
    assert_eq!(thinking, "Pondering deeply");
    // Thinking is not part of the answer text.
    assert_eq!(run.result.unwrap().text, "Answer.");
    assert!(matches!(run.deltas.first(), Some(StreamDelta::Thinking(_))));
}

async fn request_carries_history_tools_and_auth(api: ApiType) {
    let server = ScriptedModelServer::start(vec![]).unwrap();
    let c = client(endpoint(&server, api), None, fast_options());
    let req = ChatRequest {
        system: "Be brief.".into(),
        messages: vec![
            Message {
                role: Role::User,
                content: vec![ContentBlock::Text {
                    text: "List it".into(),
                }],
            },
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "list_dir".into(),
                    input: json!({"path": "."}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "t1".into(),
                    content: "a.txt".into(),
                    is_error: false,
                }],
            },
        ],
        tools: vec![ToolSpec {
            name: "list_dir".into(),
            description: "List".into(),
            input_schema: json!({"type": "object"}),
        }],
    };
    let resp = run(&c, &req).await.result.unwrap();
    assert_eq!(resp.text, "ok", "default turn answers unscripted requests");
    let recorded = server.requests();
    assert_eq!(recorded.len(), 1);
    let r = &recorded[0];
    let expected = match api {
        ApiType::Anthropic => json!({
            "model": "claude-scripted", "max_tokens": 512, "stream": true, "system": "Be brief.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "List it"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "list_dir", "input": {"path": "."}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]}
            ],
            "tools": [{"name": "list_dir", "description": "List", "input_schema": {"type": "object"}}]
        }),
        _ => json!({
            "model": "gpt-scripted", "max_tokens": 512, "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "List it"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "t1", "type": "function", "function": {"name": "list_dir", "arguments": "{\"path\":\".\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "t1", "content": "a.txt"}
            ],
            "tools": [{"type": "function", "function": {"name": "list_dir", "description": "List", "parameters": {"type": "object"}}}]
        }),
    };
    assert_eq!(r.body, expected);
    match api {
        ApiType::Anthropic => {
            assert_eq!(r.api, ScriptedApi::Anthropic);
            assert_eq!(r.path, "/v1/messages");
            assert_eq!(r.auth_header.as_deref(), Some("x-api-key"));
            assert_eq!(
                r.headers.get("anthropic-version").map(String::as_str),
                Some("2023-06-01")
            );
        }
        _ => {
            assert_eq!(r.api, ScriptedApi::OpenAi);
            assert_eq!(r.path, "/v1/chat/completions");
            assert_eq!(r.auth_header.as_deref(), Some("authorization"));
            assert_eq!(r.headers.get("anthropic-version"), None);
        }
    }
}

async fn base_url_ending_in_v1_is_not_doubled(api: ApiType) {
    let server = ScriptedModelServer::start(vec![]).unwrap();
    let mut ep = endpoint(&server, api);
    ep.base_url = format!("{}/v1/", server.base_url());
    let c = client(ep, None, fast_options());
    run(&c, &user("hi")).await.result.unwrap();
    let want = match api {
        ApiType::Anthropic => "/v1/messages",
        _ => "/v1/chat/completions",
    };
    assert_eq!(server.requests()[0].path, want);
}

#[tokio::test]
async fn auto_api_type_picks_the_format_from_the_model_name() {
    let server = ScriptedModelServer::start(vec![]).unwrap();
    for (model, path) in [
        ("claude-x", "/v1/messages"),
        ("llama3", "/v1/chat/completions"),
    ] {
        let mut ep = endpoint(&server, ApiType::Auto);
        ep.model = model.into();
        let resp = run(&client(ep, None, fast_options()), &user("hi"))
            .await
            .result
            .unwrap();
        assert_eq!(resp.text, "ok");
        assert_eq!(server.requests().last().unwrap().path, path);
    }
}
