//! The local profile: multi-turn context, the hot window, paging, resumption after a
//! disconnect, execute variants and bad input.

use std::time::Duration;

use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use reqwest::Method;
use serde_json::{json, Value};

use super::api::{chunks, encode, request_texts, Api, Event};
use crate::support::Harness;

async fn start(turns: Vec<Turn>, env: &[(&str, &str)]) -> (Harness, Api) {
    let harness = Harness::start_with("anthropic", turns, env).await;
    let api = Api::for_ws(&harness.url, &harness.token);
    (harness, api)
}

pub fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(r, t)| (r.to_string(), t.to_string()))
        .collect()
}

pub fn roles_texts(page: &Value) -> Vec<(String, String)> {
    page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn code(body: &Value) -> String {
    body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_carry_context_and_messages_page_back_in_order() {
    let (harness, api) = start(
        vec![Turn::text("Paris it is."), Turn::text("About two million.")],
        &[],
    )
    .await;
    let id = api.create("travel").await;

    let (same, first) = api.turn("Which city should I visit?", Some(&id)).await;
    assert_eq!(same, id);
    // The conversation first, then the answer in chunks, then done naming the message.
    assert_eq!(first[0].data["conversationId"], json!(id));
    assert_eq!(chunks(&first), "Paris it is.");
    assert!(
        first
            .iter()
            .filter(|e| e.data.get("chunk").is_some())
            .count()
            > 1
    );
    let done = first.last().unwrap();
    assert_eq!(done.data["done"], json!(true));
    let answer_id = done.data["messageId"].as_u64().unwrap();
    let mut ids: Vec<&String> = first.iter().map(|e| &e.id).collect();
    let count = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), count, "event ids repeat: {first:?}");

    let (_, second) = api.turn("How many people live there?", Some(&id)).await;
    assert_eq!(chunks(&second), "About two million.");
    // The model saw the first turn.
    let requests = harness.model.requests();
    assert_eq!(
        request_texts(&requests[1].body),
        pairs(&[
            ("user", "Which city should I visit?"),
            ("assistant", "Paris it is."),
            ("user", "How many people live there?"),
        ])
    );

    // Messages page back oldest first.
    let (status, page) = api
        .get(&format!("/api/v1/conversations/{id}/messages?limit=3"))
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        roles_texts(&page),
        pairs(&[
            ("user", "Which city should I visit?"),
            ("assistant", "Paris it is."),
            ("user", "How many people live there?"),
        ])
    );
    assert_eq!(page["messages"][1]["id"].as_u64(), Some(answer_id));
    let cursor = page["nextCursor"].as_u64().unwrap();
    let (_, rest) = api
        .get(&format!(
            "/api/v1/conversations/{id}/messages?limit=3&cursor={cursor}"
        ))
        .await;
    assert_eq!(
        roles_texts(&rest),
        pairs(&[("assistant", "About two million.")])
    );
    assert_eq!(rest.get("nextCursor"), None);

    // Listed, newest first; archived, gone from the list.
    let other = api.create("later").await;
    let (_, list) = api.get("/api/v1/conversations?limit=1").await;
    assert_eq!(list["conversations"][0]["id"], json!(other));
    let cursor = list["nextCursor"].as_str().unwrap();
    let (_, next) = api
        .get(&format!("/api/v1/conversations?limit=1&cursor={cursor}"))
        .await;
    assert_eq!(next["conversations"][0]["id"], json!(id));
    assert_eq!(next["conversations"][0]["title"], json!("travel"));
    let (status, _) = api.delete(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(status, 204);
    let (_, list) = api.get("/api/v1/conversations").await;
    let ids: Vec<&str> = list["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![other.as_str()]);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_sees_only_the_hot_window() {
    let turns = (1..=4).map(|i| Turn::text(format!("answer {i}"))).collect();
    let (harness, api) = start(turns, &[("LUMINA_CONVERSATION_WINDOW", "4")]).await;
    // No conversation named: one is created, and the first event says which.
    let (id, _) = api.turn("question 1", None).await;
    for i in 2..=4 {
        api.turn(&format!("question {i}"), Some(&id)).await;
    }
    let requests = harness.model.requests();
    assert_eq!(requests.len(), 4);
    // The fourth run: the last four messages and its prompt, not the first turn.
    assert_eq!(
        request_texts(&requests[3].body),
        pairs(&[
            ("user", "question 2"),
            ("assistant", "answer 2"),
            ("user", "question 3"),
            ("assistant", "answer 3"),
            ("user", "question 4"),
        ])
    );
    // The journal keeps everything.
    let (_, page) = api
        .get(&format!("/api/v1/conversations/{id}/messages"))
        .await;
    assert_eq!(page["messages"].as_array().unwrap().len(), 8);
    harness.stop().await;
}

const LONG: &str = "one two three four five six seven eight nine ten eleven twelve thirteen";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reconnects_gets_exactly_the_missed_events() {
    let (harness, api) = start(vec![Turn::text(LONG).with_chunk_delay_ms(60)], &[]).await;
    let id = api.create("resume").await;
    let path = format!("/api/v1/agents/default/execute/stream?task=count&conversationId={id}");
    let mut sse = api.stream(Method::POST, &path, None).await.unwrap();
    let start = sse.next().await.unwrap();
    let mut seen: Vec<Event> = Vec::new();
    while seen.len() < 2 {
        seen.push(sse.next().await.unwrap());
    }
    assert!(
        seen.iter().all(|e| e.data.get("chunk").is_some()),
        "{seen:?}"
    );
    drop(sse);
    let last = seen.last().unwrap().id.clone();

    let mut resumed = api
        .stream(
            Method::GET,
            &format!("/api/v1/conversations/{id}/stream"),
            Some(&last),
        )
        .await
        .unwrap();
    let rest = resumed.all().await;
    let done = rest.last().unwrap();
    assert_eq!(done.data["done"], json!(true), "{rest:?}");
    // Exactly the rest: nothing twice, nothing missing.
    assert_eq!(format!("{}{}", chunks(&seen), chunks(&rest)), LONG);
    assert!(!rest.iter().any(|e| seen.contains(e)));

    // The ids are the journal's: resuming again from the first event replays the same
    // answer and the same `done` (same id, same message).
    let mut again = api
        .stream(
            Method::GET,
            &format!("/api/v1/conversations/{id}/stream?after={}", start.id),
            None,
        )
        .await
        .unwrap();
    let replayed = again.all().await;
    assert_eq!(chunks(&replayed), LONG);
    assert_eq!(replayed.last(), Some(done));
    // After the end there is nothing more: the stream closes at once.
    let mut after_end = api
        .stream(
            Method::GET,
            &format!("/api/v1/conversations/{id}/stream"),
            Some(&done.id),
        )
        .await
        .unwrap();
    assert_eq!(after_end.all().await, vec![]);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_nobody_waits_for_still_lands_in_messages() {
    let (harness, api) = start(vec![Turn::text(LONG).with_chunk_delay_ms(40)], &[]).await;
    let path = format!(
        "/api/v1/agents/default/execute/stream?task={}",
        encode("go on")
    );
    let mut sse = api.stream(Method::POST, &path, None).await.unwrap();
    let id = sse.next().await.unwrap().data["conversationId"]
        .as_str()
        .unwrap()
        .to_string();
    sse.next().await.unwrap();
    drop(sse);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, page) = api
            .get(&format!("/api/v1/conversations/{id}/messages"))
            .await;
        if roles_texts(&page) == pairs(&[("user", "go on"), ("assistant", LONG)]) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_async_and_sync() {
    let (harness, api) = start(
        vec![Turn::text("async answer"), Turn::text("sync answer")],
        &[],
    )
    .await;
    let id = api.create("modes").await;
    let (status, accepted) = api
        .post(
            &format!("/api/v1/agents/default/execute?task=first&conversationId={id}"),
            None,
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["conversationId"], json!(id));
    // Following the run from the id it named.
    let mut sse = api
        .stream(
            Method::GET,
            &format!(
                "/api/v1/conversations/{id}/stream?after={}",
                accepted["eventId"].as_str().unwrap()
            ),
            None,
        )
        .await
        .unwrap();
    let events = sse.all().await;
    assert_eq!(chunks(&events), "async answer");
    assert_eq!(events.last().unwrap().data["runId"], accepted["runId"]);

    let (status, result) = api
        .post(
            &format!("/api/v1/agents/default/execute/sync?task=second&conversationId={id}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["status"], json!("completed"));
    assert_eq!(result["answer"], json!("sync answer"));
    let (_, page) = api
        .get(&format!("/api/v1/conversations/{id}/messages"))
        .await;
    assert_eq!(page["messages"][3]["id"], result["messageId"]);
    assert_eq!(page["messages"][3]["text"], json!("sync answer"));
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_clear_errors() {
    let (harness, api) = start(vec![], &[]).await;
    let id = api.create("errors").await;
    let unknown = uuid::Uuid::new_v4();

    for path in [
        format!("/api/v1/conversations/{unknown}/messages"),
        "/api/v1/conversations/not-a-uuid/messages".to_string(),
        "/api/v1/conversations/..%2F..%2Fetc/messages".to_string(),
    ] {
        let (status, body) = api.get(&path).await;
        assert_eq!((status, code(&body).as_str()), (404, "not_found"), "{path}");
    }
    let (status, body) = api
        .delete(&format!("/api/v1/conversations/{unknown}"))
        .await;
    assert_eq!((status, code(&body).as_str()), (404, "not_found"));
    let (status, body) = api
        .post(
            &format!("/api/v1/agents/default/execute/stream?task=x&conversationId={unknown}"),
            None,
        )
        .await;
    assert_eq!((status, code(&body).as_str()), (404, "not_found"));

    let (status, body) = api
        .post(
            &format!("/api/v1/agents/default/execute/stream?conversationId={id}"),
            None,
        )
        .await;
    assert_eq!((status, code(&body).as_str()), (400, "invalid_params"));
    assert!(body["error"]["message"].as_str().unwrap().contains("task"));
    let (status, body) = api
        .post(
            &format!("/api/v1/agents/no-such-agent/execute/sync?task=x&conversationId={id}"),
            None,
        )
        .await;
    assert_eq!((status, code(&body).as_str()), (404, "not_found"), "{body}");
    let (status, body) = api
        .get(&format!("/api/v1/conversations/{id}/messages?cursor=abc"))
        .await;
    assert_eq!((status, code(&body).as_str()), (400, "invalid_params"));
    let (status, body) = api
        .get(&format!("/api/v1/conversations/{id}/stream?after=1.x"))
        .await;
    assert_eq!((status, code(&body).as_str()), (400, "invalid_params"));
    let (status, body) = api.post("/api/v1/conversations", None).await;
    assert_eq!(status, 201, "{body}");
    let bad_json = api
        .http
        .post(format!("{}/api/v1/conversations", api.base))
        .bearer_auth(&api.token)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_json.status(), 400);

    let stranger = api.with_token("not-the-token");
    let (status, body) = stranger.get("/api/v1/conversations").await;
    assert_eq!((status, code(&body).as_str()), (401, "unauthorized"));
    let (status, _) = stranger
        .get(&format!("/api/v1/conversations/{id}/messages"))
        .await;
    assert_eq!(status, 401);
    // Nothing ran.
    assert_eq!(harness.model.request_count(), 0);

    // The schema describes every endpoint.
    let (status, doc) = api.get("/api/v1/openapi.json").await;
    assert_eq!(status, 200);
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    assert_eq!(
        paths,
        vec![
            "/api/v1/agents/{agentId}/execute",
            "/api/v1/agents/{agentId}/execute/stream",
            "/api/v1/agents/{agentId}/execute/sync",
            "/api/v1/conversations",
            "/api/v1/conversations/{id}",
            "/api/v1/conversations/{id}/messages",
            "/api/v1/conversations/{id}/stream",
        ]
    );
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_stream_counts_as_a_connection_of_its_tenant() {
    let (harness, api) = start(
        vec![Turn::text(LONG).with_chunk_delay_ms(50)],
        &[("LUMINA_TENANT_MAX_CONNECTIONS", "1")],
    )
    .await;
    let id = api.create("limits").await;
    let path = format!("/api/v1/agents/default/execute/stream?task=go&conversationId={id}");
    let mut open = api.stream(Method::POST, &path, None).await.unwrap();
    open.next().await.unwrap();
    let (status, body) = api
        .stream(
            Method::GET,
            &format!("/api/v1/conversations/{id}/stream?after=0"),
            None,
        )
        .await
        .err()
        .unwrap();
    assert_eq!((status, code(&body).as_str()), (429, "rate_limited"));
    // The first stream ends normally and gives its connection back.
    let rest = open.all().await;
    assert_eq!(rest.last().unwrap().data["done"], json!(true));
    let mut again = api
        .stream(
            Method::GET,
            &format!("/api/v1/conversations/{id}/stream?after=0"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(chunks(&again.all().await), LONG);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_name_as_agent_id_runs_the_task_as_that_team() {
    let (harness, api) = start(vec![Turn::text("the leader's answer")], &[]).await;
    let (status, result) = api
        .post(
            "/api/v1/agents/product-development/execute/sync?task=Plan%20a%20login%20page",
            None,
        )
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["answer"], json!("the leader's answer"));
    // The run was the team leader's: its system prompt is the team's.
    let requests = harness.model.requests();
    let system = requests[0].body["system"].to_string();
    assert!(system.contains("team-leader"), "{system}");
    // The conversation stays in the team; another team is a conflict, an unknown one 404.
    let id = result["conversationId"].as_str().unwrap().to_string();
    let (status, body) = api
        .post(
            &format!("/api/v1/agents/deep-research/execute/sync?task=x&conversationId={id}"),
            None,
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (409, "conflict".to_string()),
        "{body}"
    );
    let (status, body) = api
        .post("/api/v1/agents/no-such-agent/execute/sync?task=x", None)
        .await;
    assert_eq!(
        (status, code(&body)),
        (404, "not_found".to_string()),
        "{body}"
    );
    harness.stop().await;
}
