//! The LoCoMo dev-split benchmark (ignored: it measures, it does not gate). Run with
//! `cargo test --release -p lumina-memory --test all -- --ignored --nocapture locomo`.
//! `LOCOMO_DIR` overrides the data folder; `LOCOMO_OUTPUT` writes the JSON report;
//! `LOCOMO_OPTIONS` is a JSON object of `RetrievalOptions` overrides; `LOCOMO_WINDOW` sets
//! the index window; with the `local-embeddings` feature, `LOCOMO_EMBEDDINGS=minilm` adds
//! dense vectors from the local all-MiniLM-L6-v2. `LOCOMO_STORE=postgres` runs it on the
//! PostgreSQL store (a fresh database on the test server) instead of SQLite;
//! `LOCOMO_EXACT_THRESHOLD` sets that store's exact/HNSW threshold.

use std::path::PathBuf;

use lumina_memory::bench::{bench_locomo, BenchOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: needs the LoCoMo dev split; run by hand in release mode"]
async fn locomo_dev() {
    let dir = PathBuf::from(
        std::env::var("LOCOMO_DIR").unwrap_or_else(|_| "/work/shared/data/locomo".into()),
    );
    let mut opts = BenchOptions::new(
        dir.join("locomo-dev.json"),
        dir.join("locomo-dev.qrels.jsonl"),
    );
    if let Ok(json) = std::env::var("LOCOMO_OPTIONS") {
        let mut value = serde_json::to_value(&opts.sqlite.retrieval).unwrap();
        let overrides: serde_json::Value = serde_json::from_str(&json).unwrap();
        for (k, v) in overrides.as_object().unwrap() {
            value[k] = v.clone();
        }
        opts.sqlite.retrieval = serde_json::from_value(value).unwrap();
    }
    if let Ok(w) = std::env::var("LOCOMO_WINDOW") {
        opts.sqlite.index.window = w.parse().unwrap();
    }
    #[cfg(feature = "local-embeddings")]
    if std::env::var("LOCOMO_EMBEDDINGS").as_deref() == Ok("minilm") {
        let model = lumina_memory::embed::LocalMiniLm::load(&super::local::model_dir()).unwrap();
        opts.embedder = Some(std::sync::Arc::new(model));
    }
    if std::env::var("LOCOMO_STORE").as_deref() == Ok("postgres") {
        opts.postgres_url = Some(super::postgres::fresh_database().await.0);
    }
    if let Ok(t) = std::env::var("LOCOMO_EXACT_THRESHOLD") {
        opts.exact_threshold = t.parse().unwrap();
    }
    let report = bench_locomo(opts).await.unwrap();
    println!("{report}");
    if let Ok(path) = std::env::var("LOCOMO_OUTPUT") {
        std::fs::write(path, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    }
}
