//! `lumina-backend bench rag`: project-document RAG on the generated corpus of
//! `lumina_rag::corpus` (every format, known answers): recall@k of full text alone and of
//! full text fused with the selected embedder, ingestion time (first, and again with
//! nothing changed), search latency. The store is the local SQLite one in a temporary
//! AppRoot.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lumina_config::AppRoot;
use lumina_memory::embed::EmbeddingProvider;
use lumina_rag::corpus::Corpus;
use lumina_rag::sqlite::SqliteRag;
use lumina_rag::{Rag, RagOptions, MAX_K};
use serde::Serialize;

/// One retrieval configuration's figures.
#[derive(Debug, Serialize)]
pub struct Run {
    /// `full text` or `full text + <model>`.
    pub retrieval: String,
    /// recall@k per cut-off: share of questions with a chunk holding the answer in the top k.
    pub recall: Vec<(usize, f64)>,
    /// First ingestion of the corpus (extraction, chunking, writes, embeddings).
    pub ingest_ms: f64,
    /// The same ingestion again with nothing changed.
    pub reingest_unchanged_ms: f64,
    /// Chunks written by the first ingestion, and by the second (0 expected).
    pub chunks_written: (usize, usize),
    /// Search latency over the questions, milliseconds.
    pub search_p50_ms: f64,
    /// See `search_p50_ms`.
    pub search_p95_ms: f64,
}

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub documents: usize,
    pub questions: usize,
    pub corpus_bytes: u64,
    /// Fusion: (rrf_k, dense_weight, candidates).
    pub fusion: (f64, f64, usize),
    pub runs: Vec<Run>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn measure(
    root: &Path,
    corpus: &Corpus,
    embedder: Option<Arc<dyn EmbeddingProvider>>,
    ks: &[usize],
    options: &RagOptions,
) -> anyhow::Result<Run> {
    let home = tempfile::tempdir()?;
    let retrieval = match &embedder {
        Some(e) => format!("full text + {}", e.model_id()),
        None => "full text".to_string(),
    };
    let rag = Rag::new(
        Arc::new(SqliteRag::new(AppRoot::new(home.path()))),
        embedder,
        options.clone(),
    );
    let started = Instant::now();
    let first = rag.ingest(root, &["docs".into()]).await?;
    let ingest_ms = ms(started.elapsed());
    anyhow::ensure!(first.skipped.is_empty(), "skipped: {:?}", first.skipped);
    if let Some(err) = &first.embedding_error {
        anyhow::bail!("embeddings failed: {err}");
    }
    let started = Instant::now();
    let again = rag.ingest(root, &["docs".into()]).await?;
    let reingest_unchanged_ms = ms(started.elapsed());
    let k_max = ks.iter().copied().max().unwrap_or(5).min(MAX_K);
    let mut found = vec![0usize; ks.len()];
    let mut latencies = Vec::with_capacity(corpus.questions.len());
    for q in &corpus.questions {
        let started = Instant::now();
        let result = rag.search(root, &q.question, k_max).await?;
        latencies.push(ms(started.elapsed()));
        let rank = result
            .hits
            .iter()
            .position(|h| q.answered_by(&h.path, &h.text));
        for (i, k) in ks.iter().enumerate() {
            if rank.is_some_and(|r| r < *k) {
                found[i] += 1;
            }
        }
    }
    latencies.sort_by(f64::total_cmp);
    let n = corpus.questions.len().max(1) as f64;
    Ok(Run {
        retrieval,
        recall: ks
            .iter()
            .zip(found)
            .map(|(k, f)| (*k, f as f64 / n))
            .collect(),
        ingest_ms,
        reingest_unchanged_ms,
        chunks_written: (first.chunks_written, again.chunks_written),
        search_p50_ms: percentile(&latencies, 0.5),
        search_p95_ms: percentile(&latencies, 0.95),
    })
}

/// Runs the benchmark: full text alone, then fused with `embedder` when there is one.
pub async fn run(
    scale: usize,
    ks: &[usize],
    embedder: Option<Arc<dyn EmbeddingProvider>>,
    options: RagOptions,
) -> anyhow::Result<Report> {
    anyhow::ensure!(
        ks.iter().all(|k| (1..=MAX_K).contains(k)),
        "--k values must be between 1 and {MAX_K}"
    );
    let project = tempfile::tempdir()?;
    let corpus = lumina_rag::corpus::write(project.path(), scale)?;
    let corpus_bytes = corpus
        .files
        .iter()
        .map(|f| std::fs::metadata(project.path().join(f)).map_or(0, |m| m.len()))
        .sum();
    let mut runs = vec![measure(project.path(), &corpus, None, ks, &options).await?];
    if embedder.is_some() {
        runs.push(measure(project.path(), &corpus, embedder, ks, &options).await?);
    }
    Ok(Report {
        documents: corpus.files.len(),
        questions: corpus.questions.len(),
        corpus_bytes,
        fusion: (options.rrf_k, options.dense_weight, options.candidates),
        runs,
    })
}
