//! The read path (docs/design.md#memory-read-path), one pipeline for every query: alignment
//! check (done by the backend before `run`, while the model encodes the query) → query
//! encoding (`encode`: terms and full-text query; `with_model`: dense vector, learned
//! sparse weights, token vectors) → candidate recall (full text, BM25 sparse, learned
//! sparse, dense; up to `candidates` each) → reciprocal-rank fusion → Personalized PageRank
//! seeded by the fused candidates → exact span scoring (dense : sparse : multi-vector
//! MaxSim = `span_dense` : `span_sparse` : `span_multivector`, 1.0 : 0.3 : 1.0; the dense
//! part is the closer of the event's and its best span's vector) → (with a reranker: the
//! best candidates re-scored, [`crate::rerank`]) → evidence selection → context
//! organization. There is no question-type routing and no query expansion.

mod organize;
mod rerank;
mod select;
pub mod snapshot;
pub mod view;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub use organize::{conflict_note, render};
use snapshot::Snapshot;

use crate::embed::{EmbeddingProvider, Encoding};
use crate::rerank::Reranker;
use crate::{text, Recall, RecallQuery, RecallStats, RecalledItem, Signals};

/// Query-time parameters (not part of the fingerprint: changing them needs no rebuild).
/// Defaults were chosen on the LoCoMo dev split by small sweeps of one parameter at a
/// time (docs/benchmarks.md has the figures); most are flat within a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RetrievalOptions {
    /// Candidates taken from each recall list (full text, sparse, dense). Default 128.
    pub candidates: usize,
    /// Reciprocal-rank fusion constant. Default 60.
    pub rrf_k: f32,
    /// Fusion weight of the full-text list. Default 1.0.
    pub fulltext_weight: f32,
    /// Fusion weight of the sparse (BM25) list. Default 1.0.
    pub sparse_weight: f32,
    /// Fusion weight of the learned sparse list (a model's lexical weights, e.g.
    /// BGE-M3's; without such a model the list is empty). Default 1.0.
    pub learned_weight: f32,
    /// Fusion weight of the dense list. Default 0.25: with all-MiniLM-L6-v2 on LoCoMo dev,
    /// equal weight (1.0) cost 2 points of R@10 against lexical-only, 0.25 gained 2.
    pub dense_weight: f32,
    /// BM25 term-frequency saturation. Default 1.2.
    pub k1: f32,
    /// BM25 length normalization. Default 0.4 (turns are short; full normalization
    /// over-rewards one-line turns).
    pub b: f32,
    /// Weight of the window field (neighbouring turns) in sparse recall and of the window
    /// column in full-text recall. Default 0.35.
    pub window_weight: f32,
    /// Sparse recall scores body and window together (BM25F) instead of summing two BM25s.
    pub bm25f: bool,
    /// Restart probability of Personalized PageRank. Default 0.5.
    pub ppr_alpha: f32,
    /// Power iterations of Personalized PageRank. Default 12.
    pub ppr_iterations: usize,
    /// Edge weights of the graph: adjacent turns, turn–context, turn–concept.
    pub graph_next_weight: f32,
    /// See `graph_next_weight`. Default 0.5.
    pub graph_context_weight: f32,
    /// See `graph_next_weight`. Default 0.5.
    pub graph_concept_weight: f32,
    /// Weight of the edges between an accepted semantic node and the events it cites.
    /// Default 0.5. (Without semantic compile there are no such edges.)
    pub graph_node_weight: f32,
    /// Final score = fused·`fused_weight` + graph·`graph_weight` + span·`span_weight`
    /// (each of fused, graph and the sparse span score normalized to the best candidate).
    pub fused_weight: f32,
    /// See `fused_weight`.
    pub graph_weight: f32,
    /// See `fused_weight`.
    pub span_weight: f32,
    /// Span score ratio dense : sparse : multi-vector, 1.0 : 0.3 : 1.0
    /// (docs/design.md#memory-read-path).
    pub span_dense: f32,
    /// See `span_dense`.
    pub span_sparse: f32,
    /// See `span_dense`: the weight of multi-vector MaxSim (models with token vectors).
    pub span_multivector: f32,
    /// Weight of query-term coverage in evidence selection (0 = pure relevance).
    pub coverage_weight: f32,
}

impl Default for RetrievalOptions {
    fn default() -> Self {
        Self {
            candidates: 128,
            rrf_k: 60.0,
            fulltext_weight: 1.0,
            sparse_weight: 1.0,
            learned_weight: 1.0,
            dense_weight: 0.25,
            k1: 1.2,
            b: 0.4,
            window_weight: 0.35,
            bm25f: true,
            ppr_alpha: 0.5,
            ppr_iterations: 12,
            graph_next_weight: 1.0,
            graph_context_weight: 0.5,
            graph_concept_weight: 0.5,
            graph_node_weight: 0.5,
            fused_weight: 1.0,
            graph_weight: 0.2,
            span_weight: 1.0,
            span_dense: 1.0,
            span_sparse: 0.3,
            span_multivector: 1.0,
            coverage_weight: 0.1,
        }
    }
}

/// An encoded query.
#[derive(Debug, Clone, Default)]
pub struct EncodedQuery {
    /// Analyzed terms, deduplicated.
    pub terms: Vec<String>,
    /// The query vector, when an embedding provider is configured.
    pub dense: Option<Vec<f32>>,
    /// The model's learned sparse weights (empty without them).
    pub sparse: Vec<(u32, f32)>,
    /// The model's token vectors (empty without them).
    pub tokens: Vec<Vec<f32>>,
}

/// How many of a space's documents a word's stem must be in, besides half of them, before
/// [`fulltext_query`] leaves the word out.
pub const UBIQUITOUS_MIN_DOCS: u32 = 1_000;

/// The full-text query of `query_text` against a space's read view: its content words,
/// without the ubiquitous ones — those whose stem is in at least half the view's documents
/// (and in at least [`UBIQUITOUS_MIN_DOCS`]). Their BM25 inverse document frequency is at
/// or below zero, which FTS5 and the PostgreSQL BM25F floor at 1e-6: they add nothing to
/// a score, yet matching them makes the candidate query read every document that has them
/// (every row of a space where each turn says "ok"). Small spaces keep every word: there
/// the query is cheap and a word in half of a handful of rows still picks the right ones.
pub fn fulltext_query(query_text: &str, view: &Snapshot) -> String {
    let n = view.docs.len() as u64;
    let words: Vec<String> = text::content_words(query_text)
        .into_iter()
        .filter(|word| {
            !text::terms(word).iter().any(|term| {
                let df = view
                    .vocab
                    .get(term)
                    .and_then(|id| view.any_df.get(id))
                    .copied()
                    .unwrap_or(0);
                df >= UBIQUITOUS_MIN_DOCS && u64::from(df) * 2 >= n
            })
        })
        .collect();
    crate::derive::fts_query(&words)
}

/// Query encoding, the lexical part: analyzer terms (the full-text query depends on the
/// space's read view: [`fulltext_query`]).
pub fn encode(query_text: &str) -> EncodedQuery {
    let mut terms = text::terms(query_text);
    let mut seen = std::collections::HashSet::new();
    terms.retain(|t| seen.insert(t.clone()));
    EncodedQuery {
        terms,
        ..EncodedQuery::default()
    }
}

impl EncodedQuery {
    /// Adds the model's part of the query encoding (the dense vector is normalized).
    pub fn with_model(mut self, model: Option<Encoding>) -> Self {
        let Some(model) = model else {
            return self;
        };
        if !model.dense.is_empty() {
            let mut v = model.dense;
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            v.iter_mut().for_each(|x| *x /= norm);
            self.dense = Some(v);
        }
        self.sparse = model.sparse;
        self.tokens = model.tokens;
        self
    }
}

/// Query encoding, the model's part (when the store has a model). Runs while the store
/// aligns its indexes and reads the lexical candidates.
pub async fn model_encoding(
    embedder: Option<&dyn EmbeddingProvider>,
    query_text: &str,
) -> crate::Result<Option<Encoding>> {
    let Some(e) = embedder else {
        return Ok(None);
    };
    Ok(e.encode(&[query_text.to_owned()]).await?.into_iter().next())
}

/// One candidate's signals while it moves through the pipeline.
#[derive(Debug, Clone, Copy, Default)]
struct Candidate {
    fused: f32,
    graph: f32,
    sparse: f32,
    dense: f32,
    learned: f32,
    multivector: f32,
    /// The reranker's relevance, when it scored this candidate.
    rerank: Option<f32>,
    span: (usize, usize),
    score: f32,
}

/// The ranked candidates of one query, before evidence selection.
pub struct Ranked {
    /// Candidates by final score, best first, each doc once.
    docs: Vec<(u32, Candidate)>,
    /// The query's term ids in the snapshot's vocabulary.
    terms: Vec<u32>,
    stats: RecallStats,
}

/// Ranks the candidates of a query after alignment and encoding (candidate recall through
/// exact span scoring). `fulltext` is the backend's full-text candidate list (event id,
/// score), best first. `dense` is the backend's approximate nearest-neighbour list (event
/// id, cosine), best first, when it searched an ANN index; `None` runs exact cosine over
/// the snapshot's vectors.
pub fn rank(
    snap: &Snapshot,
    q: &EncodedQuery,
    fulltext: &[(u64, f32)],
    dense: Option<&[(u64, f32)]>,
    options: &RetrievalOptions,
    mut stats: RecallStats,
) -> Ranked {
    let term_ids: Vec<u32> = q
        .terms
        .iter()
        .filter_map(|t| snap.vocab.get(t).copied())
        .collect();

    // Candidate recall.
    let fulltext: Vec<u32> = fulltext
        .iter()
        .filter_map(|(id, _)| snap.by_event.get(id).copied())
        .take(options.candidates)
        .collect();
    let sparse = top(sparse_scores(snap, &term_ids, options), options.candidates);
    let dense = match (&q.dense, dense) {
        (Some(_), Some(ann)) => top(
            ann.iter()
                .filter_map(|&(id, s)| snap.by_event.get(&id).map(|&d| (d, s)))
                .collect(),
            options.candidates,
        ),
        (Some(v), None) if snap.dims == v.len() => top(dense_scores(snap, v), options.candidates),
        _ => Vec::new(),
    };
    let learned_scores = learned_scores(snap, &q.sparse);
    let learned = top(
        learned_scores.iter().map(|(&d, &s)| (d, s)).collect(),
        options.candidates,
    );
    stats.fulltext = fulltext.len();
    stats.sparse = sparse.len() + learned.len();
    stats.dense = dense.len();

    // Reciprocal-rank fusion.
    let mut candidates: HashMap<u32, Candidate> = HashMap::new();
    for (list, weight) in [
        (fulltext, options.fulltext_weight),
        (
            sparse.iter().map(|&(d, _)| d).collect(),
            options.sparse_weight,
        ),
        (
            learned.iter().map(|&(d, _)| d).collect(),
            options.learned_weight,
        ),
        (
            dense.iter().map(|&(d, _)| d).collect(),
            options.dense_weight,
        ),
    ] {
        for (rank, doc) in list.into_iter().enumerate() {
            candidates.entry(doc).or_default().fused +=
                weight / (options.rrf_k + rank as f32 + 1.0);
        }
    }
    stats.fused = candidates.len();

    // Personalized PageRank seeded by the fused candidates; the events it reaches join
    // the candidates.
    let mut seeds: Vec<(u32, f32)> = candidates.iter().map(|(&d, c)| (d, c.fused)).collect();
    // A fixed order keeps float sums, and so scores, reproducible.
    seeds.sort_unstable_by_key(|s| s.0);
    let ppr = personalized_pagerank(snap, &seeds, options);
    let reached: Vec<(u32, f32)> = ppr
        .iter()
        .enumerate()
        .map(|(d, &m)| (d as u32, m))
        .collect();
    for (doc, _) in top(reached, options.candidates) {
        candidates.entry(doc).or_default();
    }
    for (doc, c) in candidates.iter_mut() {
        c.graph = ppr.get(*doc as usize).copied().unwrap_or(0.0);
    }
    stats.scored = candidates.len();

    // Exact span scoring.
    for (&doc, c) in candidates.iter_mut() {
        let (score, span) = best_span(snap, doc, &term_ids, options);
        c.sparse = score;
        c.span = span;
        if let (Some(qv), Some(dv)) = (&q.dense, snap.vector(doc)) {
            c.dense = qv.iter().zip(dv).map(|(a, b)| a * b).sum();
            // Span vectors: the event is as close as its closest sentence, and without
            // a lexical match that sentence is the span shown.
            if let Some((i, cosine)) = snap.best_dense_span(doc, qv) {
                c.dense = c.dense.max(cosine);
                if score == 0.0 {
                    c.span = snap.docs[doc as usize].spans[i].0;
                }
            }
        }
        c.learned = learned_scores.get(&doc).copied().unwrap_or(0.0);
        c.multivector = snap.maxsim(doc, &q.tokens);
    }
    let max =
        |f: fn(&Candidate) -> f32| candidates.values().map(f).fold(0.0f32, f32::max).max(1e-12);
    let (max_fused, max_graph, max_sparse) =
        (max(|c| c.fused), max(|c| c.graph), max(|c| c.sparse));
    for c in candidates.values_mut() {
        let span = options.span_dense * c.dense
            + options.span_sparse * c.sparse / max_sparse
            + options.span_multivector * c.multivector;
        c.score = options.fused_weight * c.fused / max_fused
            + options.graph_weight * c.graph / max_graph
            + options.span_weight * span;
    }
    let mut ranked: Vec<(u32, Candidate)> = candidates.into_iter().collect();
    ranked.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(a.0.cmp(&b.0)));
    Ranked {
        docs: ranked,
        terms: term_ids,
        stats,
    }
}

/// The end of the read path: the optional rerank of the best candidates, evidence
/// selection and context organization.
pub async fn conclude(
    snap: &Snapshot,
    mut ranked: Ranked,
    reranker: Option<&dyn Reranker>,
    options: &RetrievalOptions,
    query: &RecallQuery,
) -> Recall {
    if let Some(reranker) = reranker {
        rerank::apply(
            reranker,
            snap,
            &query.text,
            &mut ranked.docs,
            &mut ranked.stats,
        )
        .await;
    }
    finish(snap, ranked, options, query)
}

/// Evidence selection and context organization of ranked candidates.
fn finish(
    snap: &Snapshot,
    ranked: Ranked,
    options: &RetrievalOptions,
    query: &RecallQuery,
) -> Recall {
    let Ranked {
        docs: ranked,
        terms: term_ids,
        stats,
    } = ranked;
    let chosen = select::select(snap, &ranked, &term_ids, query, options);
    let items: Vec<RecalledItem> = chosen
        .into_iter()
        .map(|(doc, c)| {
            let d = &snap.docs[doc as usize];
            let row = &d.evidence.row;
            RecalledItem {
                event_id: d.evidence.event_id,
                source_id: row.source_id.clone(),
                context: row.context.clone(),
                session_id: row.session_id.clone(),
                actor: row.actor.clone(),
                event_time_ms: row.event_time_ms,
                turn_order: row.turn_order,
                text: row.text.clone(),
                span: c.span,
                score: c.score,
                tokens: d.tokens,
                signals: Signals {
                    fused: c.fused,
                    graph: c.graph,
                    sparse: c.sparse,
                    dense: c.dense,
                    learned: c.learned,
                    multivector: c.multivector,
                    rerank: c.rerank,
                },
            }
        })
        .collect();
    let context = organize::organize(&items, query, &snap.conflicts);
    Recall {
        items,
        context,
        stats,
    }
}

/// The `n` best (doc, score) pairs, best first (ties by doc for determinism).
fn top(mut scores: Vec<(u32, f32)>, n: usize) -> Vec<(u32, f32)> {
    scores.retain(|&(_, s)| s > 0.0);
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scores.truncate(n);
    scores
}

fn bm25(tf: f32, len: f32, avg: f32, idf: f32, o: &RetrievalOptions) -> f32 {
    idf * tf * (o.k1 + 1.0) / (tf + o.k1 * (1.0 - o.b + o.b * len / avg))
}

/// Sparse recall, BM25F over the body and window fields: the window's term frequencies
/// count `window_weight` times, saturate together with the body's, and the length is the
/// weighted sum of both fields (Robertson's BM25F, as FTS5 does with column weights).
/// With `bm25f` off: BM25(body) + `window_weight` × BM25(window).
fn sparse_scores(snap: &Snapshot, terms: &[u32], o: &RetrievalOptions) -> Vec<(u32, f32)> {
    let n = snap.docs.len();
    let mut acc: HashMap<u32, f32> = HashMap::new();
    if o.bm25f {
        let avg = snap.body.avg_len + o.window_weight * snap.window.avg_len;
        for &t in terms {
            let mut tf: HashMap<u32, f32> = HashMap::new();
            for (field, weight) in [(&snap.body, 1.0), (&snap.window, o.window_weight)] {
                for &(doc, f) in field.postings.get(&t).map_or(&[][..], Vec::as_slice) {
                    *tf.entry(doc).or_default() += weight * f as f32;
                }
            }
            let df = tf.len() as f32;
            let idf = (1.0 + (n as f32 - df + 0.5) / (df + 0.5)).ln();
            for (doc, f) in tf {
                let d = doc as usize;
                let len = snap.body.len[d] as f32 + o.window_weight * snap.window.len[d] as f32;
                *acc.entry(doc).or_default() += bm25(f, len, avg, idf, o);
            }
        }
        return acc.into_iter().collect();
    }
    for (field, weight) in [(&snap.body, 1.0), (&snap.window, o.window_weight)] {
        if weight <= 0.0 {
            continue;
        }
        for &t in terms {
            let Some(postings) = field.postings.get(&t) else {
                continue;
            };
            let idf = field.idf(t, n);
            for &(doc, tf) in postings {
                let len = field.len[doc as usize] as f32;
                *acc.entry(doc).or_default() +=
                    weight * bm25(tf as f32, len, field.avg_len, idf, o);
            }
        }
    }
    acc.into_iter().collect()
}

/// Learned sparse scores: the dot product of the query's and each doc's weights, for
/// every doc sharing a vocabulary id with the query.
fn learned_scores(snap: &Snapshot, query: &[(u32, f32)]) -> HashMap<u32, f32> {
    let mut acc: HashMap<u32, f32> = HashMap::new();
    for (id, qw) in query {
        for &(doc, dw) in snap.learned.get(id).map_or(&[][..], Vec::as_slice) {
            *acc.entry(doc).or_default() += qw * dw;
        }
    }
    acc
}

fn dense_scores(snap: &Snapshot, q: &[f32]) -> Vec<(u32, f32)> {
    (0..snap.docs.len() as u32)
        .filter_map(|d| {
            let v = snap.vector(d)?;
            Some((d, q.iter().zip(v).map(|(a, b)| a * b).sum()))
        })
        .collect()
}

/// Power iteration of Personalized PageRank with restart to the seed distribution;
/// returns the mass on each event node (indexed by doc).
fn personalized_pagerank(snap: &Snapshot, seeds: &[(u32, f32)], o: &RetrievalOptions) -> Vec<f32> {
    let g = &snap.graph;
    let nodes = g.degree.len();
    let total: f32 = seeds.iter().map(|s| s.1).sum();
    if nodes == 0 || total <= 0.0 {
        return Vec::new();
    }
    let mut restart = vec![0f32; nodes];
    for &(d, w) in seeds {
        restart[d as usize] += w / total;
    }
    let mut rank = restart.clone();
    let mut next = vec![0f32; nodes];
    for _ in 0..o.ppr_iterations {
        next.iter_mut()
            .zip(&restart)
            .for_each(|(n, r)| *n = o.ppr_alpha * r);
        let mut dangling = 0.0;
        for (node, &mass) in rank.iter().enumerate() {
            if mass == 0.0 {
                continue;
            }
            let deg = g.degree[node];
            if deg <= 0.0 {
                dangling += mass;
                continue;
            }
            let share = (1.0 - o.ppr_alpha) * mass / deg;
            for at in g.offsets[node]..g.offsets[node + 1] {
                next[g.targets[at] as usize] += share * g.weights[at];
            }
        }
        if dangling > 0.0 {
            // Mass that cannot move restarts at the seeds.
            let scale = (1.0 - o.ppr_alpha) * dangling;
            next.iter_mut()
                .zip(&restart)
                .for_each(|(n, r)| *n += scale * r);
        }
        std::mem::swap(&mut rank, &mut next);
    }
    rank.truncate(snap.docs.len());
    rank
}

/// Exact sparse score of a doc's best span and its byte range: BM25F of the span's terms
/// (plus the event's actor and date) together with the event's window field, so a span is
/// judged in its conversational context like in sparse recall.
fn best_span(
    snap: &Snapshot,
    doc: u32,
    terms: &[u32],
    o: &RetrievalOptions,
) -> (f32, (usize, usize)) {
    let d = &snap.docs[doc as usize];
    let window_len = o.window_weight * snap.window.len[doc as usize] as f32;
    let avg = snap.body.avg_len + o.window_weight * snap.window.avg_len;
    let mut best = (0.0f32, d.spans.first().map_or((0, 0), |s| s.0));
    for (range, ids) in &d.spans {
        let len = ids.len() as f32 + window_len;
        let score: f32 = terms
            .iter()
            .map(|&t| {
                let tf = ids.iter().filter(|&&i| i == t).count() as f32
                    + o.window_weight * d.window_tf.get(&t).copied().unwrap_or(0) as f32;
                if tf == 0.0 {
                    0.0
                } else {
                    bm25(tf, len, avg, snap.any_idf(t), o)
                }
            })
            .sum();
        if score > best.0 {
            best = (score, *range);
        }
    }
    best
}
