//! Embedding providers: the remote OpenAI-compatible client against an in-process server,
//! and dense vectors in the pipeline (feature-hashing provider).

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use lumina_config::Secret;
use lumina_embed::{EmbeddingProvider, HashEmbeddings, RemoteEmbeddings, RemoteOptions};
use lumina_memory::conformance::{sample_conversation, SPACE};
use lumina_memory::{Error, MemoryStore, RecallQuery};
use lumina_memory_sqlite::{SqliteMemory, SqliteOptions};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

/// Requests the fake endpoint saw: (authorization header, body).
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// An OpenAI-compatible `/v1/embeddings` on a free loopback port. Vectors are
/// `[len(text), index]`, answered in reverse order to check the client sorts by index.
async fn server(status: StatusCode) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route(
            "/v1/embeddings",
            post(
                move |State(seen): State<Seen>, headers: HeaderMap, Json(body): Json<Value>| async move {
                    let auth = headers
                        .get("authorization")
                        .map(|v| v.to_str().unwrap().to_owned())
                        .unwrap_or_default();
                    seen.lock().unwrap().push((auth.clone(), body.clone()));
                    if status != StatusCode::OK {
                        // Echoes the credentials, as some endpoints do.
                        let message = format!("quota exceeded for {auth}");
                        return (status, Json(json!({"error": {"message": message}})));
                    }
                    let inputs = body["input"].as_array().unwrap();
                    let mut data: Vec<Value> = inputs
                        .iter()
                        .enumerate()
                        .map(|(i, t)| json!({"object": "embedding", "index": i,
                            "embedding": [t.as_str().unwrap().len() as f32, i as f32]}))
                        .collect();
                    data.reverse();
                    (StatusCode::OK, Json(json!({"object": "list", "data": data, "model": body["model"]})))
                },
            ),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn remote(url: &str, batch: usize) -> RemoteEmbeddings {
    RemoteEmbeddings::new(RemoteOptions {
        api_key: Some(Secret::new("sk-test-secret")),
        batch,
        ..RemoteOptions::new(url, "text-embedding-3-small", 2)
    })
    .unwrap()
}

#[tokio::test]
async fn remote_client_speaks_the_openai_wire_format() {
    let (url, seen) = server(StatusCode::OK).await;
    let client = remote(&url, 2);
    let texts: Vec<String> = ["a", "bb", "ccc"].map(String::from).to_vec();
    let vectors = client.embed(&texts).await.unwrap();
    assert_eq!(vectors, [vec![1.0, 0.0], vec![2.0, 1.0], vec![3.0, 0.0]]);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (
                "Bearer sk-test-secret".to_owned(),
                json!({"model": "text-embedding-3-small", "input": ["a", "bb"]})
            ),
            (
                "Bearer sk-test-secret".to_owned(),
                json!({"model": "text-embedding-3-small", "input": ["ccc"]})
            ),
        ]
    );
    assert_eq!(
        client.model_id(),
        "openai-compatible:text-embedding-3-small"
    );
    assert_eq!(client.dims(), 2);
    assert!(
        !format!("{client:?}").contains("sk-test-secret"),
        "the key is redacted"
    );
}

#[tokio::test]
async fn remote_errors_are_reported_and_keys_stay_out_of_fingerprints() {
    let (url, _) = server(StatusCode::TOO_MANY_REQUESTS).await;
    let client = remote(&url, 8);
    match client.embed(&["x".to_owned()]).await {
        Err(Error::Embedding(message)) => {
            assert!(
                message.contains("429") && message.contains("quota exceeded"),
                "{message}"
            );
            assert!(!message.contains("sk-test-secret"));
        }
        other => panic!("expected an embedding error, got {other:?}"),
    }
    let dir = tempfile::tempdir().unwrap();
    let store =
        SqliteMemory::open(dir.path(), SqliteOptions::default(), Some(Arc::new(client))).unwrap();
    assert!(store
        .fingerprint()
        .contains("embedding=openai-compatible:text-embedding-3-small/2"));
    assert!(!store.fingerprint().contains("sk-test") && !store.fingerprint().contains("127.0.0.1"));
}

#[tokio::test]
async fn dense_vectors_join_the_pipeline_and_a_model_change_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let open = |dims: usize| {
        let provider: Arc<dyn EmbeddingProvider> = Arc::new(HashEmbeddings::new(dims));
        SqliteMemory::open(dir.path(), SqliteOptions::default(), Some(provider)).unwrap()
    };
    let store = open(64);
    store.append(sample_conversation(SPACE)).await.unwrap();
    let q = RecallQuery::new(SPACE, "baking sourdough bread");
    let recall = store.recall(&q).await.unwrap();
    assert!(recall.stats.dense > 0);
    assert_eq!(recall.items[0].source_id, "s2:1");
    assert!(
        recall.items[0].signals.dense > 0.3,
        "{:?}",
        recall.items[0].signals
    );
    assert!(store.fingerprint().ends_with("/64"));
    // The vectors are in the model's own file next to index.sqlite.
    let first = store.retrieval_path().unwrap();
    assert_eq!(first.parent(), store.index_path().parent());
    let name = first.file_name().unwrap().to_str().unwrap().to_owned();
    assert!(
        name.starts_with("retrieval-hash-") && name.ends_with("-64.sqlite"),
        "{name}"
    );
    assert!(first.is_file());
    drop(store);
    // Another model (here: other dimensions) never reads the old vectors: it rebuilds into
    // its own file, and the old model's file goes with the old generation.
    let store = open(32);
    let recall = store.recall(&q).await.unwrap();
    assert!(recall.stats.rebuilt);
    assert_eq!(recall.stats.generation, 2);
    assert!(recall.stats.dense > 0);
    assert_eq!(recall.items[0].source_id, "s2:1");
    assert!(store.retrieval_path().unwrap().is_file());
    assert!(!first.exists(), "{} is left", first.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learned_sparse_and_token_vectors_score_candidates() {
    use lumina_memory::conformance::{
        multi_output_model, recall_uses_learned_sparse_and_token_vectors,
    };
    let dir = tempfile::tempdir().unwrap();
    let open = || -> Arc<dyn MemoryStore> {
        Arc::new(
            SqliteMemory::open(
                dir.path(),
                SqliteOptions::default(),
                Some(multi_output_model()),
            )
            .unwrap(),
        )
    };
    recall_uses_learned_sparse_and_token_vectors(open(), async { open() }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn span_vectors_score_the_closest_sentence() {
    let open = |spans: bool, dir: &std::path::Path| -> Arc<dyn MemoryStore> {
        let options = SqliteOptions {
            index: lumina_memory::derive::IndexOptions {
                span_vectors: spans,
                ..Default::default()
            },
            ..SqliteOptions::default()
        };
        Arc::new(SqliteMemory::open(dir, options, Some(Arc::new(HashEmbeddings::new(64)))).unwrap())
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    lumina_memory::conformance::span_vectors_score_the_closest_sentence(
        open(true, a.path()),
        open(false, b.path()),
    )
    .await;
}
