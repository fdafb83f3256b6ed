//! The Conversation API on a cluster: any instance serves any conversation, tenants stay
//! apart, and a Redis that lost everything costs the hot window nothing (it is rebuilt from
//! PostgreSQL).

use std::time::Duration;

use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use reqwest::Method;
use serde_json::{json, Value};

use super::support::*;
use crate::conversation::api::{chunks, request_texts, Api};

fn api(cluster: &Cluster, i: usize, token: &str) -> Api {
    Api::new(
        format!("http://127.0.0.1:{}", cluster.instances[i].port),
        token,
    )
}

fn texts(page: &Value) -> Vec<String> {
    page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_instance_serves_any_conversation_and_tenants_stay_apart() {
    let cluster = Cluster::start(
        2,
        vec![Turn::text("first answer"), Turn::text("second answer")],
    )
    .await;
    let token = cluster.user_token();
    let a = api(&cluster, 0, &token);
    let b = api(&cluster, 1, &token);
    // Created on i0 (its owner); the first turn arrives at i1 and is forwarded.
    let id = a.create("shared").await;
    let (_, first) = b.turn("hello", Some(&id)).await;
    assert_eq!(chunks(&first), "first answer");
    assert_eq!(first.last().unwrap().data["done"], json!(true));
    let (_, second) = a.turn("again", Some(&id)).await;
    assert_eq!(chunks(&second), "second answer");
    let requests = cluster.model.requests();
    assert_eq!(
        request_texts(&requests[1].body),
        vec![
            ("user".to_string(), "hello".to_string()),
            ("assistant".to_string(), "first answer".to_string()),
            ("user".to_string(), "again".to_string()),
        ]
    );
    // Either instance pages the messages and replays the stream, with the same ids.
    let mut replays = Vec::new();
    for api in [&a, &b] {
        let (status, page) = api
            .get(&format!("/api/v1/conversations/{id}/messages"))
            .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(
            texts(&page),
            ["hello", "first answer", "again", "second answer"]
        );
        let (_, list) = api.get("/api/v1/conversations").await;
        assert_eq!(list["conversations"][0]["id"], json!(id));
        let mut sse = api
            .stream(
                Method::GET,
                &format!("/api/v1/conversations/{id}/stream?after={}", first[0].id),
                None,
            )
            .await
            .unwrap();
        replays.push(sse.all().await);
    }
    assert_eq!(replays[0], replays[1]);
    assert_eq!(chunks(&replays[0]), "first answersecond answer");
    // The replay's first answer ends where the live stream's did.
    assert!(replays[0].contains(first.last().unwrap()));

    // Another tenant: not found everywhere, never the data.
    let other = cluster.token(
        "eve",
        "t2",
        &["lumina:session:read", "lumina:session:write"],
    );
    for eve in [a.with_token(&other), b.with_token(&other)] {
        for (status, body) in [
            eve.get(&format!("/api/v1/conversations/{id}/messages"))
                .await,
            eve.post(
                &format!("/api/v1/agents/default/execute/sync?task=steal&conversationId={id}"),
                None,
            )
            .await,
            eve.get(&format!("/api/v1/conversations/{id}/stream?after=0"))
                .await,
            eve.delete(&format!("/api/v1/conversations/{id}")).await,
        ] {
            assert_eq!(status, 404, "{body}");
            assert_eq!(body["error"]["code"], json!("not_found"));
            assert!(!body.to_string().contains("hello"));
        }
        let (_, list) = eve.get("/api/v1/conversations").await;
        assert_eq!(list["conversations"], json!([]));
    }
    let (status, _) = a
        .with_token("eyJhbGciOiJub25lIn0.e30.")
        .get("/api/v1/conversations")
        .await;
    assert_eq!(status, 401);
    // Only the two turns reached the model.
    assert_eq!(cluster.model.request_count(), 2);
}

/// One synchronous turn, retried with the same idempotency key while the cluster recovers.
async fn sync_turn(api: &Api, id: &str, task: &str) -> Value {
    let key = uuid::Uuid::new_v4().to_string();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let response = api
            .http
            .post(format!(
                "{}/api/v1/agents/default/execute/sync?task={}&conversationId={id}",
                api.base,
                crate::conversation::api::encode(task)
            ))
            .bearer_auth(&api.token)
            .header("Idempotency-Key", &key)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        if status == 200 {
            assert_eq!(body["status"], json!("completed"), "{body}");
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "turn {task}: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_redis_rebuilds_the_window_and_the_next_turn_sees_the_last_20_messages() {
    let turns = (1..=12)
        .map(|i| Turn::text(format!("answer {i}")))
        .collect();
    let cluster = Cluster::start(2, turns).await;
    let token = cluster.user_token();
    let a = api(&cluster, 0, &token);
    let b = api(&cluster, 1, &token);
    let id = a.create("long").await;
    for i in 1..=11 {
        let api = if i % 2 == 0 { &a } else { &b };
        let result = sync_turn(api, &id, &format!("question {i}")).await;
        assert_eq!(result["answer"], json!(format!("answer {i}")));
    }
    let mut redis = redis::Client::open(cluster.redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let key = format!("lumina:{}:hot:{{{TENANT}:{id}}}:list", cluster.cluster_id);
    let len: usize = redis::cmd("LLEN")
        .arg(&key)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(len, 20);

    let _: () = redis::cmd("FLUSHALL")
        .query_async(&mut redis)
        .await
        .unwrap();
    let result = sync_turn(&b, &id, "question 12").await;
    assert_eq!(result["answer"], json!("answer 12"));
    // The twelfth run saw exactly the last 20 messages (turns 2–11) and its prompt.
    let requests = cluster.model.requests();
    let last = request_texts(&requests.last().unwrap().body);
    let mut expected = Vec::new();
    for i in 2..=11 {
        expected.push(("user".to_string(), format!("question {i}")));
        expected.push(("assistant".to_string(), format!("answer {i}")));
    }
    expected.push(("user".to_string(), "question 12".to_string()));
    assert_eq!(last, expected);
    // Rebuilt in Redis, and trimmed as it grows.
    let len: usize = redis::cmd("LLEN")
        .arg(&key)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(len, 20);
    let (_, page) = a
        .get(&format!("/api/v1/conversations/{id}/messages?limit=200"))
        .await;
    assert_eq!(texts(&page).len(), 24);
}
