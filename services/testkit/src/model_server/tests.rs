use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

async fn post(url: &str, body: Value) -> (u16, reqwest::header::HeaderMap, String) {
    let resp = reqwest::Client::new()
        .post(url)
        .header("x-api-key", "sk-secret-value")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.unwrap())
}

#[tokio::test]
async fn anthropic_transcript_is_byte_exact() {
    let server = ScriptedModelServer::start(vec![Turn::text("Hi there!")
        .with_tool_call("list_dir", json!({"path": "."}))
        .with_usage(12, 7)])
    .unwrap();
    let url = format!("{}/v1/messages", server.base_url());
    let (status, headers, body) = post(&url, json!({"model": "claude-test", "stream": true})).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/event-stream; charset=utf-8");
    let expected = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_scripted_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi t\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"here\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"!\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1_0\",\"name\":\"list_dir\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\":\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\".\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":7}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    assert_eq!(body, expected);
}

#[tokio::test]
async fn openai_transcript_interleaves_tool_calls_and_ends_with_usage_and_done() {
    let server = ScriptedModelServer::start(vec![Turn::default()
        .with_tool_call("a", json!({"x": 1}))
        .with_tool_call("b", json!({}))
        .with_usage(3, 4)])
    .unwrap();
    let url = format!("{}/v1/chat/completions", server.base_url());
    let req =
        json!({"model": "gpt-test", "stream": true, "stream_options": {"include_usage": true}});
    let (status, _, body) = post(&url, req).await;
    assert_eq!(status, 200);
    let data: Vec<&str> = body
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap())
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let deltas: Vec<Value> = chunks
        .iter()
        .filter_map(|c| c.pointer("/choices/0/delta").cloned())
        .collect();
    assert_eq!(
        deltas,
        vec![
            json!({"role": "assistant", "content": "", "refusal": null}),
            json!({"tool_calls": [{"index": 0, "id": "call_1_0", "type": "function", "function": {"name": "a", "arguments": ""}}]}),
            json!({"tool_calls": [{"index": 1, "id": "call_1_1", "type": "function", "function": {"name": "b", "arguments": ""}}]}),
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"x\":1}"}}]}),
            json!({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}),
            json!({}),
        ]
    );
    let finish = chunks[chunks.len() - 2].pointer("/choices/0/finish_reason");
    assert_eq!(finish, Some(&json!("tool_calls")));
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(
        last["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})
    );
    assert!(chunks[..chunks.len() - 1]
        .iter()
        .all(|c| c["usage"].is_null()));
}

#[tokio::test]
async fn records_requests_without_credentials_and_accepts_path_variants() {
    let server = ScriptedModelServer::start(vec![]).unwrap();
    let base = server.base_url();
    for path in ["/v1/messages", "/messages", "/v1/v1/chat/completions"] {
        let (status, _, _) = post(&format!("{base}{path}"), json!({"model": "m", "n": path})).await;
        assert_eq!(status, 200, "{path}");
    }
    let (status, _, _) = post(&format!("{base}/v1/embeddings"), json!({})).await;
    assert_eq!(status, 404);
    let reqs = server.requests();
    assert_eq!(server.request_count(), 3);
    assert_eq!(
        reqs.iter()
            .map(|r| (r.path.as_str(), r.api))
            .collect::<Vec<_>>(),
        vec![
            ("/v1/messages", ScriptedApi::Anthropic),
            ("/messages", ScriptedApi::Anthropic),
            ("/v1/v1/chat/completions", ScriptedApi::OpenAi),
        ]
    );
    assert_eq!(reqs[0].auth_header.as_deref(), Some("x-api-key"));
    assert_eq!(
        reqs[0].headers.get("anthropic-version").map(String::as_str),
        Some("2023-06-01")
    );
    assert_eq!(reqs[0].body, json!({"model": "m", "n": "/v1/messages"}));
    let dump = format!("{reqs:?}");
    assert!(!dump.contains("sk-secret-value"));
}

#[tokio::test]
async fn matching_turns_win_then_fifo_then_default() {
    let server = ScriptedModelServer::start(vec![
        Turn::text("first"),
        Turn::text("for steering").matching("please steer"),
        Turn::text("second"),
    ])
    .unwrap();
    server.set_default_turn(Turn::text("fallback default"));
    let url = format!("{}/v1/messages", server.base_url());
    let text_of = |body: String| -> String {
        body.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| {
                v.pointer("/delta/text")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect()
    };
    let mut answers = Vec::new();
    for msg in ["hello", "please steer now", "hello", "hello"] {
        let (_, _, body) = post(&url, json!({"model": "m", "messages": [msg]})).await;
        answers.push(text_of(body));
    }
    assert_eq!(
        answers,
        vec!["first", "for steering", "second", "fallback default"]
    );
    server.push(Turn::text("pushed"));
    let (_, _, body) = post(&url, json!({"model": "m"})).await;
    assert_eq!(text_of(body), "pushed");
    assert_eq!(server.remaining_turns(), 0);
}

#[tokio::test]
async fn http_errors_carry_vendor_bodies_and_retry_headers() {
    let server = ScriptedModelServer::start(vec![
        Turn::http_error(429)
            .with_retry_after_secs(3)
            .with_error_header("x-should-retry", "true"),
        Turn::http_error(401),
    ])
    .unwrap();
    let (status, headers, body) = post(
        &format!("{}/v1/chat/completions", server.base_url()),
        json!({}),
    )
    .await;
    assert_eq!(status, 429);
    assert_eq!(headers["retry-after"], "3");
    assert_eq!(headers["x-should-retry"], "true");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["code"],
        "rate_limit_exceeded"
    );
    let (status, _, body) = post(&format!("{}/v1/messages", server.base_url()), json!({})).await;
    assert_eq!(status, 401);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["type"],
        "authentication_error"
    );
}

#[test]
fn turns_parse_from_json_scripts_and_reject_typos() {
    let script = r#"[
        {"text": "Hello", "usage": {"input_tokens": 10, "output_tokens": 2}},
        {"tool_calls": [{"id": "t1", "name": "shell", "arguments": {"command": "ls"}},
                        {"name": "read_file", "raw_arguments": "{\"path\": "}]},
        {"http_error": {"status": 503, "retry_after_secs": 1}},
        {"text": "slow", "chunk_delay_ms": 50, "stall_after_chunks": 3, "match_contains": "steer"}
    ]"#;
    let turns: Vec<Turn> = serde_json::from_str(script).unwrap();
    assert_eq!(
        turns,
        vec![
            Turn::text("Hello").with_usage(10, 2),
            Turn {
                tool_calls: vec![
                    ScriptedToolCall {
                        id: Some("t1".into()),
                        ..Turn::tool_call("shell", json!({"command": "ls"})).tool_calls[0].clone()
                    },
                    Turn::default()
                        .with_raw_tool_call("read_file", "{\"path\": ")
                        .tool_calls[0]
                        .clone(),
                ],
                ..Turn::default()
            },
            Turn::http_error(503).with_retry_after_secs(1),
            Turn::text("slow")
                .with_chunk_delay_ms(50)
                .stall_after(3)
                .matching("steer"),
        ]
    );
    assert!(serde_json::from_str::<Turn>(r#"{"txt": "typo"}"#).is_err());
}

#[tokio::test]
async fn shutdown_ends_stalled_streams_and_drop_stops_listening() {
    let server =
        ScriptedModelServer::start(vec![Turn::text("never finishes").stall_after(1)]).unwrap();
    let url = format!("{}/v1/messages", server.base_url());
    let resp = reqwest::Client::new()
        .post(&url)
        .json(&json!({"model": "m"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let reader = tokio::spawn(async move { resp.text().await });
    tokio::time::timeout(Duration::from_secs(5), server.shutdown())
        .await
        .expect("graceful shutdown finishes despite a stalled stream");
    let body = reader.await.unwrap().unwrap_or_default();
    assert!(!body.contains("message_stop"));

    let server = ScriptedModelServer::start(vec![]).unwrap();
    let addr = server.addr();
    drop(server);
    let mut refused = false;
    for _ in 0..50 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "listener still accepting after drop");
}
