//! A2A on the local backend: the card is public, JSON-RPC takes the WebSocket's bearer
//! token, a message runs the agent (contextId = session, task = run), an approval is
//! `input-required` and the next message answers it, and a task survives a restart.

use std::time::Duration;

use lumina_backend::local::{self, LocalOptions};
use lumina_backend::server;
use lumina_config::{AppRoot, Env};
use lumina_protocol::WS_PATH;
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::*;

fn http_base(ws_url: &str) -> String {
    ws_url.replace("ws://", "http://").replace(WS_PATH, "")
}

async fn rpc(base: &str, token: Option<&str>, method: &str, params: Value) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/a2a"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn text_message(id: &str, text: &str) -> Value {
    json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

#[tokio::test]
async fn a_message_runs_the_agent_in_a_session() {
    let h = Harness::start(
        "anthropic",
        vec![Turn::text("the answer is 42"), Turn::text("still 42")],
    )
    .await;
    let base = http_base(&h.url);

    let card: Value = reqwest::get(format!("{base}/.well-known/agent-card.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["supportedInterfaces"][0]["url"], format!("{base}/a2a"));
    assert_eq!(card["skills"][0]["id"], "agent-run");
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );

    let (status, _) = rpc(
        &base,
        None,
        "SendMessage",
        json!({"message": text_message("m1", "q")}),
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = rpc(&base, Some("wrong-token"), "GetTask", json!({"id": "x"})).await;
    assert_eq!(status, 401);

    let (status, body) = rpc(
        &base,
        Some(&h.token),
        "SendMessage",
        json!({"message": text_message("m1", "what is the answer?")}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let task = &body["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "the answer is 42");
    let session_id = task["contextId"].as_str().unwrap().to_owned();
    assert_eq!(task["metadata"]["lumina"]["sessionId"], session_id.as_str());

    // The context is a real session: the WebSocket sees the run.
    let (client, _notes) = h.client().await;
    let events = client.session_events(&session_id, 0, None).await.unwrap();
    let kinds: Vec<&str> = events.events.iter().map(|e| e.event.kind()).collect();
    assert!(kinds.contains(&"run.completed"), "{kinds:?}");

    // A second task in the same context runs in the same session.
    let next = json!({"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "again?"}], "contextId": session_id});
    let (_, body) = rpc(
        &base,
        Some(&h.token),
        "SendMessage",
        json!({"message": next}),
    )
    .await;
    assert_eq!(body["result"]["task"]["contextId"], session_id.as_str());
    assert_eq!(
        body["result"]["task"]["artifacts"][0]["parts"][0]["text"],
        "still 42"
    );
    let (_, list) = rpc(
        &base,
        Some(&h.token),
        "ListTasks",
        json!({"contextId": session_id}),
    )
    .await;
    assert_eq!(list["result"]["totalSize"], 2);

    // A contextId that is no session of the caller is refused.
    let stray = json!({"messageId": "m3", "role": "ROLE_USER", "parts": [{"text": "x"}], "contextId": "not-a-session"});
    let (_, body) = rpc(
        &base,
        Some(&h.token),
        "SendMessage",
        json!({"message": stray}),
    )
    .await;
    assert_eq!(body["error"]["code"], -32602);
    h.stop().await;
}

#[tokio::test]
async fn an_approval_is_input_required_and_the_next_message_answers_it() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("shell", json!({"command": "echo hi > a2a.txt"})),
            Turn::text("wrote it"),
        ],
    )
    .await;
    let base = http_base(&h.url);
    let (_, body) = rpc(
        &base,
        Some(&h.token),
        "SendMessage",
        json!({"message": text_message("m1", "write a file")}),
    )
    .await;
    let task = &body["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{body}"
    );
    assert!(task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("shell"));
    let task_id = task["id"].as_str().unwrap().to_owned();

    let answer = json!({"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "approve"}], "taskId": task_id});
    let (_, body) = rpc(
        &base,
        Some(&h.token),
        "SendMessage",
        json!({"message": answer}),
    )
    .await;
    let task = &body["result"]["task"];
    assert_eq!(task["id"], task_id.as_str());
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "wrote it");
    assert_eq!(read(&h.path("a2a.txt")).trim(), "hi");
    h.stop().await;
}

#[tokio::test]
async fn a_task_survives_a_backend_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let model = ScriptedModelServer::start(vec![Turn::text("durable answer")]).unwrap();
    let env = Env::from_pairs(vec![
        ("LUMINA_API_KEY".to_string(), "test-key-123".to_string()),
        ("LUMINA_API_BASE_URL".to_string(), model.base_url()),
        ("LUMINA_API_MODEL".to_string(), "scripted-model".to_string()),
        ("LUMINA_API_TYPE".to_string(), "anthropic".to_string()),
        ("LUMINA_MODEL_MAX_RETRIES".to_string(), "1".to_string()),
        ("HOME".to_string(), tmp.path().display().to_string()),
    ]);
    let options = LocalOptions {
        app_root: AppRoot::new(tmp.path().join("app")),
        env,
        port: 0,
        project_root: project.canonicalize().unwrap(),
        allow_loopback_agents: false,
    };

    let first = local::build(&options).await.unwrap();
    let base = format!("http://{}", first.addr);
    let token = first.token.clone();
    let state = first.state.clone();
    let served = tokio::spawn(server::serve(first.listener, state.clone()));
    let (_, body) = rpc(
        &base,
        Some(&token),
        "SendMessage",
        json!({"message": text_message("m1", "remember")}),
    )
    .await;
    let task = body["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    state.shutdown.cancel();
    served.await.unwrap().unwrap();
    drop(state);
    tokio::time::sleep(Duration::from_millis(100)).await;

    let second = local::build(&options).await.unwrap();
    let base = format!("http://{}", second.addr);
    let state = second.state.clone();
    let served = tokio::spawn(server::serve(second.listener, state.clone()));
    let (_, got) = rpc(
        &base,
        Some(&second.token),
        "GetTask",
        json!({"id": task["id"]}),
    )
    .await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got}"
    );
    assert_eq!(got["result"]["artifacts"], task["artifacts"]);
    assert_eq!(got["result"]["history"], task["history"]);
    let (_, list) = rpc(&base, Some(&second.token), "ListTasks", json!({})).await;
    assert_eq!(list["result"]["totalSize"], 1);
    state.shutdown.cancel();
    served.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_stream_follows_the_run_and_cancel_interrupts_it() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::text("streamed answer"),
            Turn::text("this never ends").stall_after(1),
        ],
    )
    .await;
    let base = http_base(&h.url);

    // SendStreamingMessage: the task first, then the run's events, ending completed.
    let response = reqwest::Client::new()
        .post(format!("{base}/a2a"))
        .bearer_auth(&h.token)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": "s", "method": "SendStreamingMessage", "params": {"message": text_message("m1", "stream it")}}))
        .send()
        .await
        .unwrap();
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let body = response.text().await.unwrap();
    let events: Vec<Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str::<Value>(d.trim()).unwrap()["result"].clone())
        .collect();
    assert!(events[0].get("task").is_some(), "{events:?}");
    let last = events.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{events:?}"
    );
    assert!(events
        .iter()
        .any(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"] == "streamed answer"));
    let context = events[0]["task"]["contextId"].clone();

    // A run that does not end: cancel interrupts it.
    let next = json!({"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "go on"}], "contextId": context});
    let (_, body) = rpc(
        &base,
        Some(&h.token),
        "SendMessage",
        json!({"message": next, "configuration": {"returnImmediately": true}}),
    )
    .await;
    let task_id = body["result"]["task"]["id"].clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, got) = rpc(&base, Some(&h.token), "GetTask", json!({"id": task_id})).await;
        if got["result"]["status"]["state"] == "TASK_STATE_WORKING" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never working: {got}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, canceled) = rpc(&base, Some(&h.token), "CancelTask", json!({"id": task_id})).await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let (client, _notes) = h.client().await;
    let session = context.as_str().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let events = client.session_events(session, 0, None).await.unwrap();
        if events
            .events
            .iter()
            .any(|e| e.event.kind() == "run.interrupted")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run was not interrupted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.stop().await;
}

#[tokio::test]
async fn a_task_waiting_for_an_approval_catches_up_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let model =
        ScriptedModelServer::start(vec![Turn::tool_call("shell", json!({"command": "echo x"}))])
            .unwrap();
    let env = Env::from_pairs(vec![
        ("LUMINA_API_KEY".to_string(), "test-key-123".to_string()),
        ("LUMINA_API_BASE_URL".to_string(), model.base_url()),
        ("LUMINA_API_MODEL".to_string(), "scripted-model".to_string()),
        ("LUMINA_API_TYPE".to_string(), "anthropic".to_string()),
        ("LUMINA_MODEL_MAX_RETRIES".to_string(), "1".to_string()),
        ("HOME".to_string(), tmp.path().display().to_string()),
    ]);
    let options = LocalOptions {
        app_root: AppRoot::new(tmp.path().join("app")),
        env,
        port: 0,
        project_root: project.canonicalize().unwrap(),
        allow_loopback_agents: false,
    };
    let first = local::build(&options).await.unwrap();
    let base = format!("http://{}", first.addr);
    let state = first.state.clone();
    let served = tokio::spawn(server::serve(first.listener, state.clone()));
    let (_, body) = rpc(
        &base,
        Some(&first.token),
        "SendMessage",
        json!({"message": text_message("m1", "run something")}),
    )
    .await;
    let task = body["result"]["task"].clone();
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{body}"
    );
    // Shut down as `lumina-backend serve` does: running work is interrupted and journaled.
    state.shutdown.cancel();
    served.await.unwrap().unwrap();
    local::stop_runs(&state).await;
    drop(state);

    let second = local::build(&options).await.unwrap();
    let base = format!("http://{}", second.addr);
    let state = second.state.clone();
    let served = tokio::spawn(server::serve(second.listener, state.clone()));
    // Nobody followed the run while it ended: the read brings the task up to date.
    let (_, got) = rpc(
        &base,
        Some(&second.token),
        "GetTask",
        json!({"id": task["id"]}),
    )
    .await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{got}"
    );
    // An answer to the old approval is now a message to a terminal task.
    let answer = json!({"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "approve"}], "taskId": task["id"]});
    let (_, body) = rpc(
        &base,
        Some(&second.token),
        "SendMessage",
        json!({"message": answer}),
    )
    .await;
    assert_eq!(body["error"]["code"], -32004, "{body}");
    state.shutdown.cancel();
    served.await.unwrap().unwrap();
}
