//! Every unary method and the task state transitions, through the HTTP router.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::{message, state, unique, Options, Server, TestBearer};

async fn send(server: &Server, message_id: &str) -> Value {
    server
        .ok("SendMessage", json!({"message": message(message_id)}))
        .await["task"]
        .clone()
}

#[tokio::test]
async fn send_message_completes_a_task_with_history() {
    let server = Server::start().await;
    let id = unique("tck-complete-task");
    let task = send(&server, &id).await;
    assert_eq!(state(&task), "TASK_STATE_COMPLETED");
    assert!(task["id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(task["contextId"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "Hello from TCK"
    );
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    assert!(task["status"]["timestamp"].as_str().unwrap().ends_with('Z'));
    let history = task["history"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0]["messageId"], id.as_str());
    assert_eq!(history[0]["taskId"], task["id"]);
    assert!(task.get("kind").is_none(), "v1.0 has no kind");

    // Server-made task ids are unique; a client contextId is kept.
    let other = server
        .ok("SendMessage", json!({"message": {"messageId": unique("tck-complete-task"), "role": "ROLE_USER", "parts": [{"text": "x"}], "contextId": "ctx-mine"}}))
        .await;
    assert_ne!(other["task"]["id"], task["id"]);
    assert_eq!(other["task"]["contextId"], "ctx-mine");
}

#[tokio::test]
async fn artifacts_of_every_part_kind() {
    let server = Server::start().await;
    let text = send(&server, &unique("tck-artifact-text")).await;
    assert_eq!(
        text["artifacts"][0]["parts"][0]["text"],
        "Generated text content"
    );
    let file = send(&server, &unique("tck-artifact-file")).await;
    assert_eq!(
        file["artifacts"][0]["parts"][0],
        json!({"raw": "dGNr", "filename": "output.txt", "mediaType": "text/plain"})
    );
    let url = send(&server, &unique("tck-artifact-file-url")).await;
    assert_eq!(
        url["artifacts"][0]["parts"][0]["url"],
        "https://example.com/output.txt"
    );
    let data = send(&server, &unique("tck-artifact-data")).await;
    assert_eq!(
        data["artifacts"][0]["parts"][0]["data"],
        json!({"key": "value", "count": 42})
    );
}

#[tokio::test]
async fn a_direct_message_answer_creates_no_task() {
    let server = Server::start().await;
    let result = server
        .ok(
            "SendMessage",
            json!({"message": message(&unique("tck-message-response"))}),
        )
        .await;
    assert!(result.get("task").is_none());
    assert_eq!(
        result["message"]["parts"][0]["text"],
        "Direct message response"
    );
    assert_eq!(result["message"]["role"], "ROLE_AGENT");
    let list = server.ok("ListTasks", json!({})).await;
    assert_eq!(list["totalSize"], 0);
}

#[tokio::test]
async fn input_required_then_continue_in_place_then_terminal() {
    let server = Server::start().await;
    let task = send(&server, &unique("tck-input-required")).await;
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED");
    let task_id = task["id"].as_str().unwrap();
    let context_id = task["contextId"].as_str().unwrap();

    // A wrong contextId for the task is refused.
    let mismatched = json!({"message": {"messageId": unique("tck-complete-task"), "role": "ROLE_USER", "parts": [{"text": "x"}], "taskId": task_id, "contextId": "other"}});
    assert_eq!(server.err("SendMessage", mismatched).await, -32602);

    // The same taskId continues the task; the contextId is inferred.
    let next = json!({"message": {"messageId": unique("tck-complete-task"), "role": "ROLE_USER", "parts": [{"text": "more"}], "taskId": task_id}});
    let done = server.ok("SendMessage", next).await["task"].clone();
    assert_eq!(done["id"], task_id);
    assert_eq!(done["contextId"], context_id);
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    assert_eq!(done["history"].as_array().unwrap().len(), 4, "{done}");

    // A terminal task takes no more messages.
    let after = json!({"message": {"messageId": unique("tck-complete-task"), "role": "ROLE_USER", "parts": [{"text": "x"}], "taskId": task_id}});
    assert_eq!(server.err("SendMessage", after).await, -32004);
    // An unknown task is TaskNotFound.
    let unknown = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}], "taskId": "no-such-task"}});
    assert_eq!(server.err("SendMessage", unknown).await, -32001);
}

#[tokio::test]
async fn rejected_and_failed_are_terminal() {
    let server = Server::start().await;
    let task = send(&server, &unique("tck-reject-task")).await;
    assert_eq!(state(&task), "TASK_STATE_REJECTED");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "rejected");
    let cancel = server.call("CancelTask", json!({"id": task["id"]})).await;
    assert_eq!(cancel["error"]["code"], -32002);
}

#[tokio::test]
async fn return_immediately_answers_before_the_task_ends() {
    let server = Server::start().await;
    let result = server
        .ok("SendMessage", json!({"message": message(&unique("test-resubscribe-message-id")), "configuration": {"returnImmediately": true}}))
        .await;
    let task = &result["task"];
    assert!(
        matches!(state(task), "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"),
        "{task}"
    );
    // It is still running: cancel it.
    let canceled = server.ok("CancelTask", json!({"id": task["id"]})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    // The executor's late completion does not overwrite the terminal state.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let got = server.ok("GetTask", json!({"id": task["id"]})).await;
    assert_eq!(state(&got), "TASK_STATE_CANCELED");
}

#[tokio::test]
async fn get_task_history_length() {
    let server = Server::start().await;
    let task = send(&server, &unique("tck-complete-task")).await;
    let id = task["id"].clone();
    let full = server.ok("GetTask", json!({"id": id})).await;
    assert_eq!(full["history"].as_array().unwrap().len(), 2);
    let none = server
        .ok("GetTask", json!({"id": id, "historyLength": 0}))
        .await;
    assert!(none.get("history").is_none(), "{none}");
    let one = server
        .ok("GetTask", json!({"id": id, "history_length": 1}))
        .await;
    assert_eq!(one["history"].as_array().unwrap().len(), 1);
    assert_eq!(
        one["history"][0]["role"], "ROLE_AGENT",
        "the most recent message"
    );
    assert_eq!(
        server
            .err("GetTask", json!({"id": id, "historyLength": -1}))
            .await,
        -32602
    );
    assert_eq!(server.err("GetTask", json!({"id": "nope"})).await, -32001);
    let not_found = server.call("GetTask", json!({"id": "nope"})).await;
    assert_eq!(not_found["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
}

#[tokio::test]
async fn list_tasks_filters_and_pages() {
    let server = Server::start().await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        let m = json!({"messageId": unique("tck-artifact-text"), "role": "ROLE_USER", "parts": [{"text": "x"}], "contextId": "ctx-list"});
        ids.push(server.ok("SendMessage", json!({"message": m})).await["task"]["id"].clone());
    }
    let waiting = json!({"messageId": unique("tck-input-required"), "role": "ROLE_USER", "parts": [{"text": "x"}], "contextId": "ctx-list"});
    let waiting_id =
        server.ok("SendMessage", json!({"message": waiting})).await["task"]["id"].clone();
    send(&server, &unique("tck-complete-task")).await; // another context

    let all = server
        .ok("ListTasks", json!({"contextId": "ctx-list"}))
        .await;
    assert_eq!(all["totalSize"], 6);
    assert_eq!(all["nextPageToken"], "");
    assert_eq!(all["tasks"][0]["id"], waiting_id, "newest-updated first");
    assert!(
        all["tasks"][1].get("artifacts").is_none(),
        "artifacts only on request"
    );

    let with = server
        .ok(
            "ListTasks",
            json!({"contextId": "ctx-list", "includeArtifacts": true}),
        )
        .await;
    assert!(with["tasks"][1]["artifacts"].is_array());

    let input = server
        .ok(
            "ListTasks",
            json!({"contextId": "ctx-list", "status": "TASK_STATE_INPUT_REQUIRED"}),
        )
        .await;
    assert_eq!(input["totalSize"], 1);
    assert_eq!(input["tasks"][0]["id"], waiting_id);

    // Pages of 2 cover every task exactly once.
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = server
            .ok(
                "ListTasks",
                json!({"contextId": "ctx-list", "pageSize": 2, "pageToken": token}),
            )
            .await;
        assert_eq!(page["pageSize"], 2);
        assert!(page["tasks"].as_array().unwrap().len() <= 2);
        seen.extend(
            page["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].clone()),
        );
        token = page["nextPageToken"].as_str().unwrap().to_owned();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen.len(), 6);
    for id in ids.iter().chain([&waiting_id]) {
        assert!(seen.contains(id));
    }

    let future = server
        .ok(
            "ListTasks",
            json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(future["totalSize"], 0);
    let history = server
        .ok(
            "ListTasks",
            json!({"contextId": "ctx-list", "historyLength": 0}),
        )
        .await;
    assert!(history["tasks"][0].get("history").is_none());

    assert_eq!(
        server.err("ListTasks", json!({"pageSize": 500})).await,
        -32602
    );
    assert_eq!(
        server
            .err("ListTasks", json!({"pageToken": "garbage!"}))
            .await,
        -32602
    );
    assert_eq!(
        server
            .err("ListTasks", json!({"statusTimestampAfter": "yesterday"}))
            .await,
        -32602
    );
}

#[tokio::test]
async fn cancel_task_transitions() {
    let server = Server::start().await;
    let task = send(&server, &unique("tck-input-required")).await;
    let canceled = server.ok("CancelTask", json!({"id": task["id"]})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    assert_eq!(
        server.err("CancelTask", json!({"id": task["id"]})).await,
        -32002
    );
    let done = send(&server, &unique("tck-complete-task")).await;
    assert_eq!(
        server.err("CancelTask", json!({"id": done["id"]})).await,
        -32002
    );
    assert_eq!(
        server.err("CancelTask", json!({"id": "unknown"})).await,
        -32001
    );
}

#[tokio::test]
async fn extended_card_is_not_configured() {
    let server = Server::start().await;
    let response = server.call("GetExtendedAgentCard", json!({})).await;
    assert_eq!(response["error"]["code"], -32007);
    assert_eq!(
        response["error"]["data"][0]["reason"],
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    );
}

#[tokio::test]
async fn unsupported_media_types_are_refused() {
    let server = Server::start().await;
    let m = json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "dGNr", "mediaType": "application/x-unknown"}]});
    let response = server.call("SendMessage", json!({"message": m})).await;
    assert_eq!(response["error"]["code"], -32005);
    assert_eq!(
        response["error"]["data"][0]["reason"],
        "CONTENT_TYPE_NOT_SUPPORTED"
    );
}

#[tokio::test]
async fn auth_is_required_scoped_and_isolating() {
    let server = Server::with(Options {
        auth: Arc::new(TestBearer),
        ..Options::default()
    })
    .await;
    let send_body = json!({"message": message(&unique("tck-complete-task"))});
    // No credentials: 401 with a Bearer challenge. The card stays public.
    let response = server
        .http
        .post(&server.url)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_body}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let wrong = server
        .call_with(
            "GetTask",
            json!({"id": "x"}),
            &[("A2A-Version", "1.0"), ("Authorization", "Bearer forged")],
        )
        .await;
    assert_eq!(wrong["error"]["message"], "authentication required");
    let card = server
        .http
        .get(format!("{}.well-known/agent-card.json", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(card.status(), 200);

    // Read-only credentials cannot send.
    let ro = server
        .http
        .post(&server.url)
        .header("A2A-Version", "1.0")
        .header("Authorization", "Bearer ro-alice")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_body}))
        .send()
        .await
        .unwrap();
    assert_eq!(ro.status(), 403);

    let alice = [("A2A-Version", "1.0"), ("Authorization", "Bearer rw-alice")];
    let bob = [("A2A-Version", "1.0"), ("Authorization", "Bearer rw-bob")];
    let created = server.call_with("SendMessage", send_body, &alice).await;
    let task_id = created["result"]["task"]["id"].clone();
    assert_eq!(state(&created["result"]["task"]), "TASK_STATE_COMPLETED");
    // Alice (also read-only) sees it; Bob gets exactly what an unknown id gets.
    let mine = server
        .call_with(
            "GetTask",
            json!({"id": task_id}),
            &[("A2A-Version", "1.0"), ("Authorization", "Bearer ro-alice")],
        )
        .await;
    assert_eq!(mine["result"]["id"], task_id);
    let theirs = server
        .call_with("GetTask", json!({"id": task_id}), &bob)
        .await;
    let unknown = server
        .call_with("GetTask", json!({"id": "no-such"}), &bob)
        .await;
    assert_eq!(theirs["error"]["code"], -32001);
    assert_eq!(theirs["error"]["data"], unknown["error"]["data"]);
    let list = server.call_with("ListTasks", json!({}), &bob).await;
    assert_eq!(list["result"]["totalSize"], 0);
    let cancel = server
        .call_with("CancelTask", json!({"id": task_id}), &bob)
        .await;
    assert_eq!(cancel["error"]["code"], -32001);
}

#[tokio::test]
async fn memory_store_passes_the_store_conformance_suite() {
    lumina_a2a::store::conformance::run(&lumina_a2a::MemoryTaskStore::new()).await;
}

#[tokio::test]
async fn memory_store_applies_a_step_raced_by_two_instances_once() {
    lumina_a2a::store::conformance::race(std::sync::Arc::new(lumina_a2a::MemoryTaskStore::new()))
        .await;
}
