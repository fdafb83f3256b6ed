//! SendStreamingMessage and SubscribeToTask: order, incremental delivery, Task first.

use std::time::{Duration, Instant};

use futures::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::{message, state, unique, Server};

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let key = e.as_object().unwrap().keys().next().unwrap().clone();
            match key.as_str() {
                "statusUpdate" => format!("status:{}", state(&e["statusUpdate"])),
                _ => key,
            }
        })
        .collect()
}

#[tokio::test]
async fn a_stream_is_task_first_then_events_in_order_then_closes() {
    let server = Server::start().await;
    let events = server
        .stream(
            "SendStreamingMessage",
            json!({"message": message(&unique("tck-stream-001"))}),
        )
        .await;
    assert_eq!(
        kinds(&events),
        [
            "task",
            "status:TASK_STATE_WORKING",
            "artifactUpdate",
            "status:TASK_STATE_COMPLETED"
        ]
    );
    let task_id = &events[0]["task"]["id"];
    assert_eq!(state(&events[0]["task"]), "TASK_STATE_SUBMITTED");
    for event in &events[1..] {
        let inner = event.as_object().unwrap().values().next().unwrap();
        assert_eq!(&inner["taskId"], task_id);
        assert_eq!(inner["contextId"], events[0]["task"]["contextId"]);
    }
    assert_eq!(
        events[2]["artifactUpdate"]["artifact"]["parts"][0]["text"],
        "Stream hello from TCK"
    );
    let stored = server.ok("GetTask", json!({"id": task_id})).await;
    assert_eq!(state(&stored), "TASK_STATE_COMPLETED");
    assert_eq!(stored["artifacts"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn chunked_artifacts_are_appended() {
    let server = Server::start().await;
    let events = server
        .stream(
            "SendStreamingMessage",
            json!({"message": message(&unique("tck-stream-artifact-chunked"))}),
        )
        .await;
    assert_eq!(events[3]["artifactUpdate"]["append"], true);
    assert_eq!(events[3]["artifactUpdate"]["lastChunk"], true);
    let stored = server
        .ok("GetTask", json!({"id": events[0]["task"]["id"]}))
        .await;
    let parts = &stored["artifacts"][0]["parts"];
    assert_eq!(parts, &json!([{"text": "chunk-1 "}, {"text": "chunk-2"}]));
}

#[tokio::test]
async fn a_message_answer_is_the_whole_stream() {
    let server = Server::start().await;
    let events = server
        .stream(
            "SendStreamingMessage",
            json!({"message": message(&unique("tck-message-response"))}),
        )
        .await;
    assert_eq!(kinds(&events), ["message"]);
}

#[tokio::test]
async fn input_required_closes_the_stream() {
    let server = Server::start().await;
    let events = server
        .stream(
            "SendStreamingMessage",
            json!({"message": message(&unique("tck-input-required"))}),
        )
        .await;
    assert_eq!(kinds(&events), ["task", "status:TASK_STATE_INPUT_REQUIRED"]);
}

#[tokio::test]
async fn events_arrive_as_they_happen_and_subscribers_get_the_task_first() {
    let server = Server::start().await;
    let started = Instant::now();
    let mut stream = server
        .open_stream(
            "SendStreamingMessage",
            json!({"message": message(&unique("test-resubscribe-message-id"))}),
            &[("A2A-Version", "1.0")],
        )
        .await;
    let first = stream.next().await.unwrap();
    let working = stream.next().await.unwrap();
    assert_eq!(state(&working["statusUpdate"]), "TASK_STATE_WORKING");
    assert!(
        started.elapsed() < lumina_a2a::fixture::LONG_RUNNING / 2,
        "the first events came only after {:?}: not incremental",
        started.elapsed()
    );
    let task_id = first["task"]["id"].clone();

    // A second stream on the same task: the current task first, then the same end.
    let mut sub = server
        .open_stream(
            "SubscribeToTask",
            json!({"id": task_id}),
            &[("A2A-Version", "1.0")],
        )
        .await;
    let snapshot = sub.next().await.unwrap();
    assert_eq!(snapshot["task"]["id"], task_id);
    assert_eq!(state(&snapshot["task"]), "TASK_STATE_WORKING");
    let rest: Vec<Value> = tokio::time::timeout(Duration::from_secs(20), sub.collect())
        .await
        .unwrap();
    assert_eq!(kinds(&rest), ["status:TASK_STATE_COMPLETED"]);
    let original: Vec<Value> = tokio::time::timeout(Duration::from_secs(20), stream.collect())
        .await
        .unwrap();
    assert_eq!(kinds(&original), ["status:TASK_STATE_COMPLETED"]);
}

#[tokio::test]
async fn dropping_a_stream_does_not_stop_the_task() {
    let server = Server::start().await;
    let mut stream = server
        .open_stream(
            "SendStreamingMessage",
            json!({"message": message(&unique("test-resubscribe-message-id"))}),
            &[("A2A-Version", "1.0")],
        )
        .await;
    let task_id = stream.next().await.unwrap()["task"]["id"].clone();
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let task = server.ok("GetTask", json!({"id": task_id})).await;
        if state(&task) == "TASK_STATE_COMPLETED" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the task never completed: {task}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn subscribe_errors_are_plain_json_rpc_errors() {
    let server = Server::start().await;
    let done = server
        .ok(
            "SendMessage",
            json!({"message": message(&unique("tck-complete-task"))}),
        )
        .await;
    let response = server
        .call("SubscribeToTask", json!({"id": done["task"]["id"]}))
        .await;
    assert_eq!(response["error"]["code"], -32004);
    let response = server
        .call("SubscribeToTask", json!({"id": "unknown"}))
        .await;
    assert_eq!(response["error"]["code"], -32001);
    let waiting = server
        .ok(
            "SendMessage",
            json!({"message": message(&unique("tck-input-required"))}),
        )
        .await;
    let mut sub = server
        .open_stream(
            "SubscribeToTask",
            json!({"id": waiting["task"]["id"]}),
            &[("A2A-Version", "1.0")],
        )
        .await;
    let first = sub.next().await.unwrap();
    assert_eq!(state(&first["task"]), "TASK_STATE_INPUT_REQUIRED");
    // Cancel it: the subscriber sees the terminal event, then the end.
    server
        .ok("CancelTask", json!({"id": waiting["task"]["id"]}))
        .await;
    let rest: Vec<Value> = tokio::time::timeout(Duration::from_secs(10), sub.collect())
        .await
        .unwrap();
    assert_eq!(kinds(&rest), ["status:TASK_STATE_CANCELED"]);
}
