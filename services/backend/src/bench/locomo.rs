//! The LoCoMo retrieval benchmark behind `lumina-backend bench memory --dataset locomo`.
//!
//! Each conversation is ingested into its own project space through the normal write path
//! (one context per session, the session's `date_time` as event time, speakers as actors,
//! image captions appended to the turn text as ` [image: …]`), the index job builds the
//! derived indexes, then every question runs through the normal read path within its
//! conversation's space. The ranked, deduplicated evidence list is cut at each k and
//! scored by R@k (the fraction of the question's evidence `dia_id`s in the top k, the
//! LoCoMo definition) and any@k (1 if any is). Questions without evidence are not scored.
//! Latency is per query, wall clock, query encoding and alignment check included.
//!
//! Measured on the LoCoMo dev split (5 conversations, 2,760 turns, 997 scored questions;
//! 2 shared cores), default options, `cargo test --release -p lumina-backend --test all --
//! --ignored --nocapture locomo` (R@k, %):
//!
//! | system | R@1 | R@5 | R@10 | R@25 | R@50 | any@10 | multi-hop R@10 | p50 / p95 ms |
//! |---|---|---|---|---|---|---|---|---|
//! | README baseline: BM25 + dates | 32.7 | 55.5 | 61.9 | 68.7 | 72.6 | 66.5 | – | 0.03 / 0.05 |
//! | lexical (FTS5 + BM25F + graph) | 40.2 | 71.0 | 79.1 | 87.1 | 91.1 | 84.7 | 42.3 | 1.7 / 3.0 |
//! | + all-MiniLM-L6-v2 (candle; the product default) | 38.3 | 70.0 | 80.9 | 88.5 | 92.1 | 86.0 | 44.6 | 12–20 / 16–28 |
//! | lexical, PostgreSQL store (`LOCOMO_STORE=postgres`) | 40.2 | 70.0 | 78.1 | 86.6 | 91.0 | 83.6 | 42.8 | 13–17 / 21–25 |
//!
//! The third row adds `LOCOMO_EMBEDDINGS=minilm` (or is `lumina-backend bench memory` with
//! the model installed); its latency moves with the machine's load. One-at-a-time ablations (lexical, R@10): no window
//! field 67.2; two summed BM25s instead of BM25F 75.9; no graph 79.2; no span score 79.0;
//! no full-text list 78.5; no sparse list 80.2; no coverage term 79.0; dense fused at
//! weight 1.0 instead of 0.25: 77.2. The PostgreSQL row runs the same pipeline over the
//! same snapshot (identical figures with the full-text list off); only its full-text list
//! differs (PostgreSQL's `english` stemmer and stop words and lengths in distinct lexemes
//! in place of FTS5's porter tokenizer), and its queries make database round trips.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use lumina_memory::embed::EmbeddingProvider;
use lumina_memory::rerank::Reranker;
use lumina_memory::time::{to_ms, Civil};
use lumina_memory::{BuildLimits, Error, MemoryStore, NewEvidence, RecallQuery, Result};
use lumina_memory_postgres::{PgMemory, PgMemoryOptions};
use lumina_memory_sqlite::{SqliteMemory, SqliteOptions};

/// Benchmark settings.
#[derive(Clone)]
pub struct BenchOptions {
    /// `locomo-*.json`.
    pub data: PathBuf,
    /// `locomo-*.qrels.jsonl`.
    pub qrels: PathBuf,
    /// Cut-offs. Default 1, 5, 10, 25, 50.
    pub ks: Vec<usize>,
    /// Where the store's AppRoot goes; a temporary directory when `None`.
    pub root: Option<PathBuf>,
    /// Store settings (retrieval parameters included).
    pub sqlite: SqliteOptions,
    /// A dense provider, if any.
    pub embedder: Option<Arc<dyn EmbeddingProvider>>,
    /// A reranker of the best candidates, if any (its calls count in the latency).
    pub reranker: Option<Arc<dyn Reranker>>,
    /// Run against the PostgreSQL store at this URL (a migrated database) instead of
    /// SQLite. The run uses a fresh tenant (`bench-<now ms>`) with the `sqlite` options'
    /// index, retrieval and build settings.
    pub postgres_url: Option<String>,
    /// The PostgreSQL store's exact-search threshold (default 50,000).
    pub exact_threshold: usize,
}

impl BenchOptions {
    /// Defaults for the given files.
    pub fn new(data: impl Into<PathBuf>, qrels: impl Into<PathBuf>) -> Self {
        Self {
            data: data.into(),
            qrels: qrels.into(),
            ks: vec![1, 5, 10, 25, 50],
            root: None,
            sqlite: SqliteOptions::default(),
            embedder: None,
            reranker: None,
            postgres_url: None,
            exact_threshold: lumina_memory_postgres::DEFAULT_EXACT_THRESHOLD,
        }
    }
}

/// Recall figures of one group of questions (percent).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Metrics {
    /// Scored questions.
    pub questions: usize,
    /// R@k by k.
    pub recall: BTreeMap<usize, f64>,
    /// any@k by k.
    pub any: BTreeMap<usize, f64>,
}

/// The benchmark's result.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    /// "locomo".
    pub dataset: String,
    /// "sqlite" or "postgres".
    pub store: String,
    /// The retrieval fingerprint of the store.
    pub fingerprint: String,
    /// The reranker's model, when one re-scored the candidates.
    #[serde(default)]
    pub reranker: Option<String>,
    /// Conversations (= spaces).
    pub conversations: usize,
    /// Turns ingested.
    pub turns: usize,
    /// Ledger appends, turns per second.
    pub ingest_turns_per_sec: f64,
    /// Index build (all derived indexes, embeddings included), turns per second.
    pub index_turns_per_sec: f64,
    /// Per-query latency percentiles, milliseconds.
    pub latency_ms: BTreeMap<String, f64>,
    /// All scored questions.
    pub overall: Metrics,
    /// All but category 5 (adversarial).
    pub overall_without_adversarial: Metrics,
    /// By category name.
    pub categories: BTreeMap<String, Metrics>,
}

/// One question's R@k and any@k, in the order of the cut-offs.
type Scores = (Vec<f64>, Vec<f64>);

#[derive(Deserialize)]
struct Qrel {
    sample_id: String,
    #[serde(default)]
    category: i64,
    #[serde(default)]
    category_name: String,
    question: String,
    #[serde(default)]
    evidence_dia_ids: Vec<String>,
}

/// Parses LoCoMo's session time, e.g. "1:56 pm on 8 May, 2023" (UTC).
pub fn parse_locomo_time(s: &str) -> Option<i64> {
    let (clock, date) = s.split_once(" on ")?;
    let (hm, ampm) = clock.trim().split_once(' ')?;
    let (h, m) = hm.split_once(':')?;
    let mut hour: u32 = h.trim().parse().ok()?;
    let minute: u32 = m.trim().parse().ok()?;
    match ampm.trim().to_ascii_lowercase().as_str() {
        "pm" if hour < 12 => hour += 12,
        "am" if hour == 12 => hour = 0,
        "am" | "pm" => {}
        _ => return None,
    }
    let date = date.replace(',', " ");
    let mut parts = date.split_whitespace();
    let day: u32 = parts.next()?.parse().ok()?;
    let month_word = parts.next()?.to_ascii_lowercase();
    let month = (1..=12).find(|&m| lumina_memory::text::month_name(m) == month_word)?;
    let year: i64 = parts.next()?.parse().ok()?;
    Some(to_ms(Civil {
        year,
        month,
        day,
        hour,
        minute,
    }))
}

/// The evidence rows of one LoCoMo conversation.
fn conversation_rows(sample: &Value) -> Result<(String, Vec<Vec<NewEvidence>>)> {
    let bad = |what: &str| Error::Invalid(format!("locomo data: {what}"));
    let space = sample["sample_id"]
        .as_str()
        .ok_or_else(|| bad("sample_id"))?
        .to_owned();
    let conv = sample["conversation"]
        .as_object()
        .ok_or_else(|| bad("conversation"))?;
    let mut sessions: Vec<(u32, &Value)> = conv
        .iter()
        .filter_map(|(k, v)| {
            let n = k.strip_prefix("session_")?.parse::<u32>().ok()?;
            Some((n, v))
        })
        .collect();
    sessions.sort_by_key(|s| s.0);
    let mut offset = 0i64;
    let mut out = Vec::new();
    for (n, turns) in sessions {
        let key = format!("session_{n}_date_time");
        let when = conv
            .get(&key)
            .and_then(Value::as_str)
            .and_then(parse_locomo_time)
            .ok_or_else(|| bad(&key))?;
        let mut rows = Vec::new();
        for (i, t) in turns
            .as_array()
            .ok_or_else(|| bad("session turns"))?
            .iter()
            .enumerate()
        {
            let mut text = t["text"].as_str().unwrap_or_default().to_owned();
            if let Some(caption) = t.get("blip_caption").and_then(Value::as_str) {
                text.push_str(&format!(" [image: {caption}]"));
            }
            rows.push(NewEvidence {
                space: space.clone(),
                context: format!("session_{n}"),
                session_id: format!("session_{n}"),
                actor: t["speaker"].as_str().unwrap_or_default().to_owned(),
                event_time_ms: when,
                turn_order: i as i64,
                text,
                source_id: t["dia_id"]
                    .as_str()
                    .ok_or_else(|| bad("dia_id"))?
                    .to_owned(),
                source_offset: offset,
            });
            offset += 1;
        }
        out.push(rows);
    }
    Ok((space, out))
}

/// Runs the benchmark (see the module docs).
pub async fn bench_locomo(opts: BenchOptions) -> Result<Report> {
    let data: Vec<Value> = serde_json::from_slice(&std::fs::read(&opts.data)?)
        .map_err(|e| Error::Invalid(format!("locomo data: {e}")))?;
    let qrels: Vec<Qrel> = std::fs::read_to_string(&opts.qrels)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| Error::Invalid(format!("qrels: {e}"))))
        .collect::<Result<_>>()?;
    let tmp;
    let root = match &opts.root {
        Some(r) => r.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let (store, kind, fingerprint): (Arc<dyn MemoryStore>, &str, String) = match &opts.postgres_url
    {
        Some(url) => {
            let pg = PgMemory::connect(
                url,
                PgMemoryOptions {
                    tenant: format!("bench-{}", lumina_memory::now_ms()),
                    exact_threshold: opts.exact_threshold,
                    index: opts.sqlite.index.clone(),
                    retrieval: opts.sqlite.retrieval.clone(),
                    build: opts.sqlite.build,
                    ..PgMemoryOptions::default()
                },
                opts.embedder.clone(),
            )?
            .with_reranker(opts.reranker.clone());
            let fingerprint = pg.fingerprint().to_owned();
            (Arc::new(pg), "postgres", fingerprint)
        }
        None => {
            let sqlite = SqliteMemory::open(&root, opts.sqlite.clone(), opts.embedder.clone())?
                .with_reranker(opts.reranker.clone());
            let fingerprint = sqlite.fingerprint().to_owned();
            (Arc::new(sqlite), "sqlite", fingerprint)
        }
    };

    let mut turns = 0usize;
    let started = Instant::now();
    for sample in &data {
        let (_, sessions) = conversation_rows(sample)?;
        for rows in sessions {
            turns += rows.len();
            store.append(rows).await?;
        }
    }
    let ingest_secs = started.elapsed().as_secs_f64();
    let started = Instant::now();
    store.sync(BuildLimits::default()).await?;
    let index_secs = started.elapsed().as_secs_f64();

    let max_k = opts.ks.iter().copied().max().unwrap_or(10);
    let mut groups: BTreeMap<String, Vec<Scores>> = BTreeMap::new();
    let mut latencies = Vec::new();
    for q in qrels.iter().filter(|q| !q.evidence_dia_ids.is_empty()) {
        let started = Instant::now();
        let recall = store
            .recall(&RecallQuery {
                space: q.sample_id.clone(),
                text: q.question.clone(),
                reference_time_ms: None,
                max_items: max_k,
                token_budget: usize::MAX,
            })
            .await?;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        let ranked: Vec<&str> = recall.items.iter().map(|i| i.source_id.as_str()).collect();
        let (mut r, mut a) = (Vec::new(), Vec::new());
        for &k in &opts.ks {
            let top = &ranked[..k.min(ranked.len())];
            let hits = q
                .evidence_dia_ids
                .iter()
                .filter(|e| top.contains(&e.as_str()))
                .count();
            r.push(hits as f64 / q.evidence_dia_ids.len() as f64);
            a.push(if hits > 0 { 1.0 } else { 0.0 });
        }
        let mut names = vec!["overall".to_owned()];
        if q.category != 5 {
            names.push("overall_without_adversarial".to_owned());
        }
        let name = if q.category_name.is_empty() {
            format!("category {}", q.category)
        } else {
            format!("{} {}", q.category, q.category_name)
        };
        names.push(name);
        for n in names {
            groups.entry(n).or_default().push((r.clone(), a.clone()));
        }
    }

    let metrics = |rows: &[Scores]| {
        let mut m = Metrics {
            questions: rows.len(),
            ..Metrics::default()
        };
        for (i, &k) in opts.ks.iter().enumerate() {
            let n = rows.len().max(1) as f64;
            m.recall
                .insert(k, 100.0 * rows.iter().map(|r| r.0[i]).sum::<f64>() / n);
            m.any
                .insert(k, 100.0 * rows.iter().map(|r| r.1[i]).sum::<f64>() / n);
        }
        m
    };
    let mut report = Report {
        dataset: "locomo".into(),
        store: kind.into(),
        fingerprint,
        reranker: opts.reranker.as_ref().map(|r| r.model().to_owned()),
        conversations: data.len(),
        turns,
        ingest_turns_per_sec: turns as f64 / ingest_secs.max(1e-9),
        index_turns_per_sec: turns as f64 / index_secs.max(1e-9),
        ..Report::default()
    };
    latencies.sort_by(f64::total_cmp);
    for (name, p) in [("p50", 0.50), ("p95", 0.95), ("p99", 0.99)] {
        let at =
            ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len().max(1)) - 1;
        report
            .latency_ms
            .insert(name.into(), latencies.get(at).copied().unwrap_or(0.0));
    }
    for (name, rows) in groups {
        let m = metrics(&rows);
        match name.as_str() {
            "overall" => report.overall = m,
            "overall_without_adversarial" => report.overall_without_adversarial = m,
            _ => {
                report.categories.insert(name, m);
            }
        }
    }
    Ok(report)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} on {}: {} conversations, {} turns; fingerprint {}",
            self.dataset, self.store, self.conversations, self.turns, self.fingerprint
        )?;
        if let Some(model) = &self.reranker {
            writeln!(f, "reranked by {model}")?;
        }
        writeln!(
            f,
            "ingest {:.0} turns/s, index build {:.0} turns/s, latency p50 {:.2} ms p95 {:.2} ms p99 {:.2} ms",
            self.ingest_turns_per_sec,
            self.index_turns_per_sec,
            self.latency_ms.get("p50").copied().unwrap_or_default(),
            self.latency_ms.get("p95").copied().unwrap_or_default(),
            self.latency_ms.get("p99").copied().unwrap_or_default(),
        )?;
        let ks: Vec<usize> = self.overall.recall.keys().copied().collect();
        write!(f, "| group | n |")?;
        for k in &ks {
            write!(f, " R@{k} |")?;
        }
        writeln!(f, " any@10 |")?;
        let mut rows = vec![
            ("overall", &self.overall),
            ("overall w/o adversarial", &self.overall_without_adversarial),
        ];
        rows.extend(self.categories.iter().map(|(n, m)| (n.as_str(), m)));
        for (name, m) in rows {
            write!(f, "| {name} | {} |", m.questions)?;
            for k in &ks {
                write!(f, " {:.1} |", m.recall.get(k).copied().unwrap_or_default())?;
            }
            writeln!(f, " {:.1} |", m.any.get(&10).copied().unwrap_or_default())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_locomo_time;
    use lumina_memory::time::display;

    #[test]
    fn parses_session_times() {
        let ms = parse_locomo_time("1:56 pm on 8 May, 2023").unwrap();
        assert_eq!(display(ms), "2023-05-08 13:56 UTC");
        let ms = parse_locomo_time("12:09 am on 13 September, 2023").unwrap();
        assert_eq!(display(ms), "2023-09-13 00:09 UTC");
        assert!(parse_locomo_time("yesterday").is_none());
    }
}
