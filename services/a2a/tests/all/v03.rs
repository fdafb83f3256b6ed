//! v0.3 requests (no `A2A-Version`): old method names and shapes in and out.

use futures::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::{unique, Server};

fn v03_message(id: &str) -> Value {
    json!({"kind": "message", "messageId": id, "role": "user", "parts": [{"kind": "text", "text": "hi"}]})
}

#[tokio::test]
async fn message_send_and_tasks_get_in_v03_shapes() {
    let server = Server::start().await;
    let response = server
        .call_with(
            "message/send",
            json!({"message": v03_message(&unique("tck-artifact-file"))}),
            &[],
        )
        .await;
    let task = &response["result"];
    assert_eq!(task["kind"], "task", "{response}");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(task["history"][0]["kind"], "message");
    assert_eq!(task["history"][0]["role"], "user");
    assert_eq!(
        task["history"][0]["parts"][0],
        json!({"kind": "text", "text": "hi"})
    );
    assert_eq!(
        task["artifacts"][0]["parts"][0],
        json!({"kind": "file", "file": {"bytes": "dGNr", "name": "output.txt", "mimeType": "text/plain"}})
    );
    let got = server
        .call_with(
            "tasks/get",
            json!({"id": task["id"], "historyLength": 1}),
            &[],
        )
        .await;
    assert_eq!(got["result"]["kind"], "task");
    assert_eq!(got["result"]["history"].as_array().unwrap().len(), 1);
    // v0.3 errors have no typed details.
    let missing = server
        .call_with("tasks/get", json!({"id": "nope"}), &[])
        .await;
    assert_eq!(missing["error"]["code"], -32001);
    assert!(missing["error"].get("data").is_none());
    // An empty header is v0.3 too; v1.0 names still work without the header.
    let v1 = server
        .call_with("GetTask", json!({"id": task["id"]}), &[("A2A-Version", "")])
        .await;
    assert_eq!(v1["result"]["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn v03_input_required_cancel_and_direct_messages() {
    let server = Server::start().await;
    let waiting = server
        .call_with(
            "message/send",
            json!({"message": v03_message(&unique("tck-input-required"))}),
            &[],
        )
        .await;
    assert_eq!(waiting["result"]["status"]["state"], "input-required");
    assert_eq!(waiting["result"]["status"]["message"]["role"], "agent");
    let canceled = server
        .call_with("tasks/cancel", json!({"id": waiting["result"]["id"]}), &[])
        .await;
    assert_eq!(canceled["result"]["status"]["state"], "canceled");
    let direct = server
        .call_with(
            "message/send",
            json!({"message": v03_message(&unique("tck-message-response"))}),
            &[],
        )
        .await;
    assert_eq!(direct["result"]["kind"], "message");
    assert_eq!(direct["result"]["role"], "agent");
}

#[tokio::test]
async fn message_stream_marks_the_final_event() {
    let server = Server::start().await;
    let events: Vec<Value> = server
        .open_stream(
            "message/stream",
            json!({"message": v03_message(&unique("tck-stream-003"))}),
            &[],
        )
        .await
        .collect()
        .await;
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["task", "status-update", "artifact-update", "status-update"]
    );
    assert_eq!(events[1]["final"], false);
    assert_eq!(events[3]["final"], true);
    assert_eq!(events[3]["status"]["state"], "completed");
    assert_eq!(events[2]["artifact"]["parts"][0]["kind"], "text");
}

#[tokio::test]
async fn push_config_methods_in_v03_shapes() {
    let server = Server::start().await;
    let waiting = server
        .call_with(
            "message/send",
            json!({"message": v03_message(&unique("tck-input-required"))}),
            &[],
        )
        .await;
    let task_id = waiting["result"]["id"].clone();
    let set = server
        .call_with(
            "tasks/pushNotificationConfig/set",
            json!({"taskId": task_id, "pushNotificationConfig": {"id": "c1", "url": "https://example.com/h", "token": "t", "authentication": {"schemes": ["Bearer"], "credentials": "x"}}}),
            &[],
        )
        .await;
    assert_eq!(
        set["result"],
        json!({"taskId": task_id, "pushNotificationConfig": {"id": "c1", "url": "https://example.com/h", "token": "t", "authentication": {"schemes": ["Bearer"], "credentials": "x"}}})
    );
    let got = server
        .call_with(
            "tasks/pushNotificationConfig/get",
            json!({"id": task_id, "pushNotificationConfigId": "c1"}),
            &[],
        )
        .await;
    assert_eq!(got["result"], set["result"]);
    let list = server
        .call_with(
            "tasks/pushNotificationConfig/list",
            json!({"id": task_id}),
            &[],
        )
        .await;
    assert_eq!(list["result"], json!([set["result"]]));
    let deleted = server
        .call_with(
            "tasks/pushNotificationConfig/delete",
            json!({"id": task_id, "pushNotificationConfigId": "c1"}),
            &[],
        )
        .await;
    assert_eq!(deleted["result"], Value::Null);
}
