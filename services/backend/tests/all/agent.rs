//! The agent loop end to end over WebSocket: tools, failures, idempotency, interrupt,
//! compaction.

use lumina_protocol::Event;
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

async fn write_and_shell(api_type: &str) {
    let h = Harness::start(
        api_type,
        vec![
            Turn::tool_call(
                "write_file",
                json!({"path": "src/hello.txt", "content": "hello lumina\n"}),
            ),
            Turn::tool_call(
                "shell",
                json!({"command": "cat src/hello.txt && echo shell-ran"}),
            ),
            Turn::text("Wrote src/hello.txt and ran it.").with_usage(100, 20),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let submitted = client
        .session_submit(&submit(&session.id, "create hello and run it", bypass()))
        .await
        .unwrap();
    assert!(submitted.created);
    let seen = until_run_end(&mut notes, &submitted.run_id).await;
    let frames = events(&seen);
    assert_contiguous(&frames);
    assert_eq!(
        kinds(&frames),
        vec![
            "session.created",
            "run.started",
            "message.user",
            "step.started",
            "model.requested",
            "message.assistant",
            "model.responded",
            "usage.recorded",
            "tool.started",
            "permission.resolved",
            "tool.completed",
            "step.completed",
            "step.started",
            "model.requested",
            "message.assistant",
            "model.responded",
            "usage.recorded",
            "tool.started",
            "permission.resolved",
            "tool.completed",
            "step.completed",
            "step.started",
            "model.requested",
            "message.assistant",
            "model.responded",
            "usage.recorded",
            "step.completed",
            "run.completed",
        ]
    );
    assert_eq!(read(&h.path("src/hello.txt")), "hello lumina\n");
    let shell_output = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::ToolCompleted {
                tool,
                output,
                is_error,
                ..
            } if tool == "shell" => Some((output.clone(), *is_error)),
            _ => None,
        })
        .unwrap();
    assert!(!shell_output.1, "{shell_output:?}");
    assert!(shell_output.0.contains("hello lumina") && shell_output.0.contains("shell-ran"));
    match &frames.last().unwrap().event {
        Event::RunCompleted { result, usage, .. } => {
            assert_eq!(result, "Wrote src/hello.txt and ran it.");
            // The run's usage is the sum of its steps' recorded usage.
            let mut total = lumina_protocol::Usage::default();
            for f in &frames {
                if let Event::UsageRecorded { usage, .. } = &f.event {
                    total.add(usage);
                }
            }
            assert_eq!(*usage, total);
            assert!(usage.input_tokens >= 100);
        }
        other => panic!("{other:?}"),
    }
    // The streamed text arrived as ephemeral deltas too.
    let streamed: String = seen
        .iter()
        .filter_map(|n| match n {
            lumina_client::Notification::Delta(d) if d.channel == "text" => Some(d.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "Wrote src/hello.txt and ran it.");
    // The model saw the tool results of earlier steps.
    let requests = h.model.requests();
    assert_eq!(requests.len(), 3);
    let last = requests[2].body.to_string();
    assert!(last.contains("shell-ran"), "{last}");
    // The key never reaches the journal.
    let page = client.session_events(&session.id, 0, None).await.unwrap();
    assert!(!serde_json::to_string(&page)
        .unwrap()
        .contains("test-key-123"));
    let list = client.session_list(false).await.unwrap();
    assert_eq!(list[0].status, "idle");
    assert_eq!(list[0].last_run.as_ref().unwrap().status, "completed");
    h.stop().await;
}

#[tokio::test]
async fn anthropic_agent_writes_a_file_and_runs_the_shell() {
    write_and_shell("anthropic").await;
}

#[tokio::test]
async fn openai_agent_writes_a_file_and_runs_the_shell() {
    write_and_shell("openai_compatible").await;
}

#[tokio::test]
async fn invalid_arguments_and_escapes_become_error_results() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::text("").with_raw_tool_call("write_file", "{\"path\": \"a.txt\", "),
            Turn::tool_call(
                "write_file",
                json!({"path": "../outside.txt", "content": "x"}),
            ),
            Turn::tool_call("read_file", json!({"path": 42})),
            Turn::tool_call("no_such_tool", json!({})),
            Turn::text("gave up"),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, "try things", bypass()))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    let results: Vec<(String, bool, String)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::ToolCompleted {
                tool,
                is_error,
                output,
                ..
            } => Some((tool.clone(), *is_error, output.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|r| r.1), "{results:#?}");
    assert!(results[0].2.contains("not valid JSON"), "{}", results[0].2);
    assert!(
        results[1].2.contains("outside the project root"),
        "{}",
        results[1].2
    );
    assert!(results[2].2.contains("path"), "{}", results[2].2);
    assert!(results[3].2.contains("unknown tool"), "{}", results[3].2);
    assert!(!h.tmp.path().join("outside.txt").exists());
    assert!(matches!(
        frames.last().unwrap().event,
        Event::RunCompleted { .. }
    ));
    h.stop().await;
}

#[tokio::test]
async fn invalid_key_fails_clearly_without_fallback() {
    let fallback = ScriptedModelServer::start(vec![Turn::text("from fallback")]).unwrap();
    let h = Harness::start_with(
        "openai_compatible",
        vec![Turn::http_error(401).with_error_body(
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#,
        )],
        &[
            ("LUMINA_FALLBACK_API_ENABLED", "true"),
            ("LUMINA_FALLBACK_API_KEY", "fallback-key"),
            ("LUMINA_FALLBACK_API_BASE_URL", &fallback.base_url()),
            ("LUMINA_FALLBACK_API_MODEL", "fallback-model"),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, "hello", bypass()))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    match &frames.last().unwrap().event {
        Event::RunFailed { code, message, .. } => {
            assert_eq!(code, "model_auth");
            assert!(message.contains("Incorrect API key"), "{message}");
            assert!(!message.contains("test-key-123"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.model.request_count(), 1, "401 is never retried");
    assert_eq!(fallback.request_count(), 0, "401 never falls back");
    h.stop().await;
}

#[tokio::test]
async fn server_errors_fall_back_after_retries() {
    let fallback = ScriptedModelServer::start(vec![Turn::text("from fallback")]).unwrap();
    let h = Harness::start_with(
        "anthropic",
        vec![Turn::http_error(500), Turn::http_error(503)],
        &[
            ("LUMINA_FALLBACK_API_ENABLED", "true"),
            ("LUMINA_FALLBACK_API_KEY", "fallback-key"),
            ("LUMINA_FALLBACK_API_BASE_URL", &fallback.base_url()),
            ("LUMINA_FALLBACK_API_MODEL", "fallback-model"),
            ("LUMINA_FALLBACK_API_TYPE", "openai_compatible"),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, "hello", bypass()))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    let provider = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::ModelResponded { provider, .. } => Some(provider.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(provider, "fallback");
    assert!(
        matches!(&frames.last().unwrap().event, Event::RunCompleted { result, .. } if result == "from fallback")
    );
    assert_eq!(h.model.request_count(), 2);
    h.stop().await;
}

#[tokio::test]
async fn same_idempotency_key_returns_the_original_run() {
    let h = Harness::start("anthropic", vec![Turn::text("once")]).await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let params = submit(&session.id, "hello", bypass());
    let first = client.session_submit(&params).await.unwrap();
    until_run_end(&mut notes, &first.run_id).await;
    let second = client.session_submit(&params).await.unwrap();
    assert_eq!(second.run_id, first.run_id);
    assert!(!second.created);
    assert_eq!(second.run.status, "completed");
    assert_eq!(second.run.result.as_deref(), Some("once"));
    assert_eq!(h.model.request_count(), 1);
    h.stop().await;
}

#[tokio::test]
async fn interrupt_stops_a_streaming_run() {
    let h = Harness::start(
        "anthropic",
        vec![Turn::text("a long answer that stalls").stall_after(3)],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, "hello", bypass()))
        .await
        .unwrap();
    next_event(&mut notes, "model.requested").await;
    // A second submit while the run is active is queued, not interleaved; interrupting it
    // by id cancels it before it starts.
    let queued = client
        .session_submit(&submit(&session.id, "again", bypass()))
        .await
        .unwrap();
    assert_eq!(queued.run.status, "queued");
    let cancelled = client
        .session_interrupt(&session.id, Some(&queued.run_id))
        .await
        .unwrap();
    assert!(cancelled.interrupted);
    let interrupted = client.session_interrupt(&session.id, None).await.unwrap();
    assert!(interrupted.interrupted);
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    assert_eq!(
        kinds(&frames[frames.len() - 2..]),
        vec!["step.interrupted", "run.interrupted"]
    );
    let all = client
        .session_events(&session.id, 0, None)
        .await
        .unwrap()
        .events;
    assert!(
        !all.iter().any(
            |f| matches!(&f.event, Event::RunStarted { run_id, .. } if *run_id == queued.run_id)
        ),
        "the cancelled follow-up must never start"
    );
    assert_eq!(h.model.request_count(), 1);
    h.stop().await;
}

#[tokio::test]
async fn long_sessions_compact_at_the_threshold() {
    let big = "x".repeat(3000);
    let h = Harness::start_with(
        "anthropic",
        vec![
            Turn::text(format!("first answer {big}")),
            Turn::text(format!("second answer {big}")),
            Turn::text("third answer"),
        ],
        &[("LUMINA_MAX_TOKENS", "3000")],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    for prompt in ["my goal: build a parser", "second request", "third request"] {
        let run = client
            .session_submit(&submit(&session.id, prompt, bypass()))
            .await
            .unwrap();
        until_run_end(&mut notes, &run.run_id).await;
    }
    let page = client
        .session_events(&session.id, 0, Some(1000))
        .await
        .unwrap();
    let checkpoint = page
        .events
        .iter()
        .find_map(|f| match &f.event {
            Event::Checkpoint {
                summary,
                tokens_before,
                tokens_after,
                ..
            } => Some((summary.clone(), *tokens_before, *tokens_after)),
            _ => None,
        })
        .expect("a checkpoint");
    assert!(
        checkpoint.0.contains("my goal: build a parser"),
        "{}",
        checkpoint.0
    );
    assert!(checkpoint.2 < checkpoint.1);
    // The last request carries the summary, not the compacted turns.
    let last = h.model.requests().last().unwrap().body.to_string();
    assert!(last.contains("Summary of the earlier conversation"));
    assert!(!last.contains(&big));
    h.stop().await;
}
