//! The rerank extension against an in-process HTTP server: both response shapes, the
//! Bailian URL normalization, the bearer key (sent, never shown), the fallback to the
//! pipeline's order on errors and timeouts, and the reordering of a real recall.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use lumina_config::{MemoryModels, Secret};
use lumina_memory::conformance::{sample_conversation, SPACE};
use lumina_memory::rerank::{self, rerank_url, RemoteReranker, RerankOptions, Reranker};
use lumina_memory::{Error, MemoryStore, Recall, RecallQuery, RetrievalOptions};
use lumina_memory_sqlite::{SqliteMemory, SqliteOptions};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const KEY: &str = "sk-rerank-secret";

/// Requests the fake endpoint saw: (path, authorization header, body).
type Seen = Arc<Mutex<Vec<(String, String, Value)>>>;

/// Scores document `i` as `i`: the reranker's order is the reverse of the documents'.
fn reversed(count: usize, field: &str) -> Vec<Value> {
    (0..count)
        .map(|i| json!({"index": i, field: i as f64}))
        .collect()
}

/// Answers by the path's first segment: `ok` (`results[].relevance_score`), `bailian`
/// (`data[].score`, Bailian's `/compatible-api/v1/reranks`), `fail` (500 echoing the
/// authorization header), `slow` (answers after 5 s).
async fn server() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let handler = |State(seen): State<Seen>,
                   Path(path): Path<String>,
                   headers: HeaderMap,
                   Json(body): Json<Value>| async move {
        let auth = headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        seen.lock()
            .unwrap()
            .push((format!("/{path}"), auth.clone(), body.clone()));
        let count = body["documents"].as_array().map_or(0, Vec::len);
        match path.split('/').next().unwrap_or_default() {
            "ok" => (
                StatusCode::OK,
                Json(json!({"results": reversed(count, "relevance_score")})),
            ),
            "bailian" => (
                StatusCode::OK,
                Json(json!({"object": "list", "data": reversed(count, "score")})),
            ),
            "slow" => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                (StatusCode::OK, Json(json!({"results": []})))
            }
            _ => (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"error": format!("invalid credentials: {auth}")})),
            ),
        }
    };
    let app = Router::new()
        .route("/{*path}", post(handler))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn reranker(base_url: String, top_n: usize) -> RemoteReranker {
    RemoteReranker::new(RerankOptions {
        api_key: Some(Secret::new(KEY)),
        top_n,
        ..RerankOptions::new(base_url, "bge-reranker")
    })
    .unwrap()
}

fn docs(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| (*t).to_owned()).collect()
}

#[test]
fn base_urls_are_normalized_to_the_rerank_endpoint() {
    for (base, url) in [
        (
            "https://api.example.com/v1",
            "https://api.example.com/v1/rerank",
        ),
        (
            "https://api.example.com/v1/",
            "https://api.example.com/v1/rerank",
        ),
        (
            "https://api.example.com/v1/rerank",
            "https://api.example.com/v1/rerank",
        ),
        (
            "https://x.example/v1/reranks",
            "https://x.example/v1/reranks",
        ),
        (
            "https://dashscope.aliyuncs.com/compatible-mode/v1",
            "https://dashscope.aliyuncs.com/compatible-api/v1/reranks",
        ),
        (
            "https://ws-1.ap-southeast-1.maas.aliyuncs.com/compatible-mode/v1/",
            "https://ws-1.ap-southeast-1.maas.aliyuncs.com/compatible-api/v1/reranks",
        ),
        (
            "https://dashscope.aliyuncs.com/compatible-api/v1",
            "https://dashscope.aliyuncs.com/compatible-api/v1/reranks",
        ),
    ] {
        assert_eq!(rerank_url(base), url, "{base}");
    }
    assert_eq!(
        RerankOptions::new("http://h/v1", "m").timeout,
        Duration::from_secs(2)
    );
}

#[tokio::test]
async fn both_response_shapes_are_read_and_the_key_is_a_bearer_token() {
    let (url, seen) = server().await;
    let texts = docs(&["a", "b", "c"]);

    let jina = reranker(format!("{url}/ok/v1"), 20);
    let mut scores = jina.rerank("which one?", &texts).await.unwrap();
    scores.sort_by_key(|s| s.0);
    assert_eq!(scores, vec![(0, 0.0), (1, 1.0), (2, 2.0)]);

    let bailian = reranker(format!("{url}/bailian/compatible-mode/v1"), 20);
    assert_eq!(
        bailian.url(),
        format!("{url}/bailian/compatible-api/v1/reranks")
    );
    let mut scores = bailian.rerank("which one?", &texts).await.unwrap();
    scores.sort_by_key(|s| s.0);
    assert_eq!(scores, vec![(0, 0.0), (1, 1.0), (2, 2.0)]);

    let body = json!({"model": "bge-reranker", "query": "which one?",
        "documents": ["a", "b", "c"], "top_n": 3});
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![
            (
                "/ok/v1/rerank".to_owned(),
                format!("Bearer {KEY}"),
                body.clone()
            ),
            (
                "/bailian/compatible-api/v1/reranks".to_owned(),
                format!("Bearer {KEY}"),
                body
            ),
        ]
    );
    assert!(!format!("{jina:?} {bailian:?}").contains(KEY));
}

#[tokio::test]
async fn errors_and_timeouts_never_show_the_key() {
    let (url, _) = server().await;
    let failing = reranker(format!("{url}/fail/v1"), 20);
    match failing.rerank("q", &docs(&["a", "b"])).await {
        Err(Error::Rerank(message)) => {
            assert!(message.contains("500"), "{message}");
            assert!(message.contains("[redacted]"), "{message}");
            assert!(!message.contains(KEY), "{message}");
        }
        other => panic!("expected a rerank error, got {other:?}"),
    }
    let slow = RemoteReranker::new(RerankOptions {
        api_key: Some(Secret::new(KEY)),
        timeout: Duration::from_millis(300),
        ..RerankOptions::new(format!("{url}/slow/v1"), "m")
    })
    .unwrap();
    let started = std::time::Instant::now();
    let err = slow.rerank("q", &docs(&["a", "b"])).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(err.to_string().contains("timed out"), "{err}");
    assert!(!err.to_string().contains(KEY) && !format!("{err:?}").contains(KEY));
}

/// A store over the sample conversation, with selection by score alone so the items are
/// the ranked candidates in order.
async fn store(dir: &std::path::Path, reranker: Option<Arc<dyn Reranker>>) -> SqliteMemory {
    let options = SqliteOptions {
        retrieval: RetrievalOptions {
            coverage_weight: 0.0,
            ..RetrievalOptions::default()
        },
        ..SqliteOptions::default()
    };
    let store = SqliteMemory::open(dir, options, None)
        .unwrap()
        .with_reranker(reranker);
    store.append(sample_conversation(SPACE)).await.unwrap();
    store
}

fn ids(recall: &Recall) -> Vec<String> {
    recall.items.iter().map(|i| i.source_id.clone()).collect()
}

#[tokio::test]
async fn the_best_candidates_are_put_in_the_rerankers_order() {
    let (url, seen) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let query = RecallQuery::new(SPACE, "what bread did they bake on the weekend");
    let plain = store(dir.path(), None).await.recall(&query).await.unwrap();
    assert!(plain.items.len() > 3, "{:?}", ids(&plain));
    assert_eq!(plain.stats.reranked, 0);

    let top_n = 3;
    let r: Arc<dyn Reranker> = Arc::new(reranker(format!("{url}/ok/v1"), top_n));
    let reranked = store(dir.path(), Some(r))
        .await
        .recall(&query)
        .await
        .unwrap();
    let mut want = ids(&plain);
    want[..top_n].reverse();
    assert_eq!(ids(&reranked), want);
    assert_eq!(reranked.stats.reranked, top_n);
    assert_eq!(reranked.items[0].signals.rerank, Some(2.0));
    assert_eq!(reranked.items[top_n].signals.rerank, None);
    // The scores keep their distribution: the best score goes to the reranker's first.
    assert_eq!(reranked.items[0].score, plain.items[0].score);
    // The documents are the events as the embedding model sees them.
    let (_, _, body) = seen.lock().unwrap()[0].clone();
    let sent: Vec<String> = serde_json::from_value(body["documents"].clone()).unwrap();
    let expected: Vec<String> = plain.items[..top_n]
        .iter()
        .map(|i| format!("{}: {}", i.actor, i.text))
        .collect();
    assert_eq!(sent, expected);
    assert_eq!(body["top_n"], json!(top_n));
}

#[tokio::test]
async fn a_failing_or_slow_reranker_keeps_the_pipelines_order() {
    let (url, _) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let query = RecallQuery::new(SPACE, "what bread did they bake on the weekend");
    let plain = store(dir.path(), None).await.recall(&query).await.unwrap();
    let slow = RemoteReranker::new(RerankOptions {
        timeout: Duration::from_millis(300),
        ..RerankOptions::new(format!("{url}/slow/v1"), "m")
    })
    .unwrap();
    let failing: Arc<dyn Reranker> = Arc::new(reranker(format!("{url}/fail/v1"), 20));
    for r in [failing, Arc::new(slow) as Arc<dyn Reranker>] {
        let recall = store(dir.path(), Some(r))
            .await
            .recall(&query)
            .await
            .unwrap();
        assert_eq!(recall.items, plain.items);
        assert_eq!(recall.stats.reranked, 0);
    }
    // Reranking is query-time only: the fingerprint does not change.
    let r: Arc<dyn Reranker> = Arc::new(reranker(format!("{url}/ok/v1"), 20));
    let with = store(dir.path(), Some(r)).await;
    let without = store(dir.path(), None).await;
    assert_eq!(with.fingerprint(), without.fingerprint());
    assert!(!with.fingerprint().contains("rerank"));
}

#[test]
fn the_settings_choose_the_reranker() {
    let none = rerank::select(&MemoryModels::default());
    assert!(none.is_none());
    let broken = rerank::select(&MemoryModels {
        reranker_base_url: Some("localhost:8080".into()),
        ..MemoryModels::default()
    });
    assert!(broken.is_none());
    let chosen = rerank::select(&MemoryModels {
        reranker_base_url: Some("https://dashscope.aliyuncs.com/compatible-mode/v1".into()),
        reranker_api_key: Some(Secret::new(KEY)),
        reranker_model: "qwen3-rerank".into(),
        reranker_top_n: 12,
        ..MemoryModels::default()
    })
    .unwrap();
    assert_eq!(chosen.model(), "qwen3-rerank");
    assert_eq!(chosen.top_n(), 12);
    assert_eq!(MemoryModels::default().reranker_top_n, 20);
}
