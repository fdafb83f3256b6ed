//! An MCP server that needs a person to sign in (OAuth authorization code flow), used by a
//! run served as an A2A task: the test kit's OAuth-protected MCP server as a user server,
//! the scripted model calling its tool. The task reads `TASK_STATE_AUTH_REQUIRED` with the
//! sign-in URL (streamed as it happens, and by `GetTask`); the test signs in by following
//! the URL as a browser would; the task goes working → completed with the tool's answer
//! from the server. A headless run does not wait (the tool is missing, as before).

use std::time::Duration;

use futures::StreamExt;
use lumina_protocol::{Event, SignInOutcome, WS_PATH};
use lumina_testkit::{OAuthMcpServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::*;

fn http_base(ws_url: &str) -> String {
    ws_url.replace("ws://", "http://").replace(WS_PATH, "")
}

async fn rpc(base: &str, token: &str, method: &str, params: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{base}/a2a"))
        .header("A2A-Version", "1.0")
        .bearer_auth(token)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A streaming call's events (`result` of each SSE `data:` line), read as they arrive and
/// handed to `seen` one by one, until the server ends the stream or 30 s pass.
async fn stream(
    base: &str,
    token: &str,
    method: &str,
    params: Value,
    seen: tokio::sync::mpsc::UnboundedSender<Value>,
) {
    let response = reqwest::Client::new()
        .post(format!("{base}/a2a"))
        .header("A2A-Version", "1.0")
        .bearer_auth(token)
        .json(&json!({"jsonrpc": "2.0", "id": "s", "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Ok(Some(chunk)) = tokio::time::timeout_at(deadline, body.next()).await {
        buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buffer.find('\n') {
            let line: String = buffer.drain(..=end).collect();
            if let Some(data) = line.trim().strip_prefix("data:") {
                let value: Value = serde_json::from_str(data.trim()).unwrap();
                let _ = seen.send(value["result"].clone());
            }
        }
    }
}

fn state(event: &Value) -> Option<&str> {
    event["statusUpdate"]["status"]["state"]
        .as_str()
        .or_else(|| event["task"]["status"]["state"].as_str())
}

/// Receives events until one in `state` arrives; returns all received so far.
async fn until_state(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
    wanted: &str,
) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no {wanted}; saw {seen:#?}"))
            .unwrap_or_else(|| panic!("the stream ended before {wanted}; saw {seen:#?}"));
        let done = state(&event) == Some(wanted);
        seen.push(event);
        if done {
            return seen;
        }
    }
}

fn write_user_mcp(h: &Harness, server: &OAuthMcpServer) {
    let config = h.tmp.path().join("app").join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("mcp.json"),
        json!({"mcpServers": {"docs": {"url": server.mcp_url()}}}).to_string(),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_is_auth_required_until_the_person_signs_in_then_completes() {
    let server = OAuthMcpServer::start().await.unwrap();
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("mcp__docs__lookup", json!({"topic": "fencing"})),
            Turn::text("fencing is explained"),
        ],
    )
    .await;
    write_user_mcp(&h, &server);
    let base = http_base(&h.url);

    // SendStreamingMessage: the task, working, then auth-required with the URL to open. The
    // run cannot go on before the test signs in, so this arrives while the task is open.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let message = json!({"messageId": "m1", "role": "ROLE_USER",
        "parts": [{"text": "explain fencing from the docs"}]});
    let streaming = tokio::spawn({
        let (base, token) = (base.clone(), h.token.clone());
        async move {
            stream(
                &base,
                &token,
                "SendStreamingMessage",
                json!({"message": message}),
                tx,
            )
            .await
        }
    });
    let seen = until_state(&mut rx, "TASK_STATE_AUTH_REQUIRED").await;
    assert!(seen[0].get("task").is_some(), "{seen:#?}");
    let task_id = seen[0]["task"]["id"].as_str().unwrap().to_owned();
    let session_id = seen[0]["task"]["contextId"].as_str().unwrap().to_owned();
    let auth = &seen.last().unwrap()["statusUpdate"]["status"]["message"];
    let text = auth["parts"][0]["text"].as_str().unwrap();
    let url = auth["metadata"]["mcpSignIn"][0]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(auth["metadata"]["mcpSignIn"][0]["server"], "docs");
    assert!(
        url.starts_with(&format!("{}?", server.authorize_url())),
        "{url}"
    );
    assert!(text.contains(&url) && text.contains("`docs`"), "{text}");
    // The stream of the message ends at the interrupted state, as A2A says.
    tokio::time::timeout(Duration::from_secs(10), streaming)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(server.counts().tool_calls, 0);

    // GetTask agrees, and the journal has the open sign-in.
    let got = rpc(&base, &h.token, "GetTask", json!({"id": task_id})).await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{got}"
    );
    let (client, _notes) = h.client().await;
    let frames = client
        .session_events(&session_id, 0, None)
        .await
        .unwrap()
        .events;
    let required = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::McpSignInRequired { server, url, .. } => Some((server.clone(), url.clone())),
            _ => None,
        })
        .expect("mcp.sign_in_required journaled");
    assert_eq!(required, ("docs".to_string(), url.clone()));

    // SubscribeToTask follows the task through the sign-in to its end.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let subscribed = tokio::spawn({
        let (base, token, id) = (base.clone(), h.token.clone(), task_id.clone());
        async move { stream(&base, &token, "SubscribeToTask", json!({"id": id}), tx).await }
    });
    let first = until_state(&mut rx, "TASK_STATE_AUTH_REQUIRED").await;
    assert!(first[0].get("task").is_some(), "{first:#?}");

    // The person's browser: the authorization page redirects to Lumina's loopback listener.
    let page = reqwest::get(&url).await.unwrap().text().await.unwrap();
    assert!(page.contains("Signed in"), "{page}");

    let rest = until_state(&mut rx, "TASK_STATE_COMPLETED").await;
    let states: Vec<&str> = rest.iter().filter_map(state).collect();
    assert_eq!(states.first(), Some(&"TASK_STATE_WORKING"), "{rest:#?}");
    assert!(!states.contains(&"TASK_STATE_AUTH_REQUIRED"), "{states:?}");
    assert_eq!(
        rest[0]["statusUpdate"]["status"]["message"]["parts"][0]["text"],
        "signed in to `docs`; going on"
    );
    assert!(rest
        .iter()
        .any(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"] == "fencing is explained"));
    tokio::time::timeout(Duration::from_secs(10), subscribed)
        .await
        .unwrap()
        .unwrap();

    let got = rpc(&base, &h.token, "GetTask", json!({"id": task_id})).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        got["result"]["artifacts"][0]["parts"][0]["text"],
        "fencing is explained"
    );

    // The tool ran on the MCP server, with the token the sign-in brought.
    assert_eq!(server.counts().tool_calls, 1);
    assert_eq!(server.counts().authorizations, 1);
    let frames = client
        .session_events(&session_id, 0, None)
        .await
        .unwrap()
        .events;
    let outputs = tool_outputs(&frames);
    assert_eq!(
        outputs,
        vec![(
            "mcp__docs__lookup".to_string(),
            false,
            OAuthMcpServer::lookup_answer("fencing")
        )]
    );
    let ended: Vec<SignInOutcome> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::McpSignInEnded {
                server, outcome, ..
            } if server == "docs" => Some(*outcome),
            _ => None,
        })
        .collect();
    assert_eq!(ended, vec![SignInOutcome::SignedIn]);
    // The model was offered the tool (the run waited before asking it).
    let offered = h.model.requests()[0].body["tools"].to_string();
    assert!(offered.contains("mcp__docs__lookup"), "{offered}");
    // No token in the task or the journal.
    let journal = serde_json::to_string(&frames).unwrap();
    for token in server.issued() {
        assert!(!journal.contains(&token) && !got.to_string().contains(&token));
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_headless_run_does_not_wait_for_a_sign_in() {
    let server = OAuthMcpServer::start().await.unwrap();
    let h = Harness::start(
        "openai",
        vec![
            Turn::tool_call("mcp__docs__lookup", json!({"topic": "x"})),
            Turn::text("went on without it"),
        ],
    )
    .await;
    write_user_mcp(&h, &server);
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let mut params = submit(&session.id, "look it up", bypass());
    params.headless = true;
    let run = client.session_submit(&params).await.unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    let kinds = kinds(&frames);
    assert!(kinds.contains(&"run.completed"), "{kinds:?}");
    assert!(!kinds.contains(&"mcp.sign_in_required"), "{kinds:?}");
    let outputs = tool_outputs(&frames);
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    assert!(outputs[0].1, "the tool is not offered: {outputs:?}");
    assert_eq!(server.counts().tool_calls, 0);
    h.stop().await;
}
