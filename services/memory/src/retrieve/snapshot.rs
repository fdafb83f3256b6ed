//! An in-memory read view of one space's published index generation: documents with their
//! evidence, the sparse index (two BM25 fields), the graph in CSR form and the vectors.
//! Built from what a backend loads, so every backend shares the same query code; cached
//! by the backend per (generation, indexed ledger position).

use std::collections::HashMap;

use super::RetrievalOptions;
use crate::derive::{EDGE_CONCEPT, EDGE_CONTEXT, EDGE_NODE};
use crate::embed::codec::{Quantized, VectorRow, SCALE};
use crate::semantic::overlay::{ConflictNote, Overlay};
use crate::{text, time, Evidence};

/// One document: the evidence plus its scoring spans.
#[derive(Debug)]
pub struct Doc {
    /// The ledger row.
    pub evidence: Evidence,
    /// Byte ranges of the text's spans with their term ids (plus the event's actor and
    /// date terms, which hold for every span).
    pub spans: Vec<((usize, usize), Vec<u32>)>,
    /// Distinct term ids of the body (for coverage).
    pub terms: Vec<u32>,
    /// Term frequencies of the window field.
    pub window_tf: HashMap<u32, u32>,
    /// Estimated tokens of the text (`text::estimate_tokens`).
    pub tokens: usize,
}

/// One BM25 field.
#[derive(Debug, Default)]
pub struct Field {
    /// Term id → (doc, term frequency), by doc.
    pub postings: HashMap<u32, Vec<(u32, u32)>>,
    /// Field length per doc, in terms.
    pub len: Vec<u32>,
    /// Average field length.
    pub avg_len: f32,
}

impl Field {
    /// BM25 inverse document frequency of a term among `n` docs.
    pub fn idf(&self, term: u32, n: usize) -> f32 {
        let df = self.postings.get(&term).map_or(0, Vec::len) as f32;
        (1.0 + (n as f32 - df + 0.5) / (df + 0.5)).ln()
    }
}

/// The graph: docs are nodes `0..n`, contexts and concepts follow.
#[derive(Debug, Default)]
pub struct Graph {
    /// CSR offsets: node `i`'s edges are `offsets[i]..offsets[i + 1]`.
    pub offsets: Vec<usize>,
    /// Edge targets.
    pub targets: Vec<u32>,
    /// Edge weights.
    pub weights: Vec<f32>,
    /// Weighted degree per node.
    pub degree: Vec<f32>,
}

/// A space's read view.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The documents, in context order.
    pub docs: Vec<Doc>,
    /// Event id → doc index.
    pub by_event: HashMap<u64, u32>,
    /// Term → term id.
    pub vocab: HashMap<String, u32>,
    /// The body field.
    pub body: Field,
    /// The event window field.
    pub window: Field,
    /// The event/context/concept graph.
    pub graph: Graph,
    /// Row-major unit vectors, `dims` per doc (zeros for a doc without one).
    pub vectors: Vec<f32>,
    /// Dimensions of `vectors` (0 without a model).
    pub dims: usize,
    /// Learned sparse postings (model vocabulary id → (doc, weight)), when the model has
    /// them.
    pub learned: HashMap<u32, Vec<(u32, f32)>>,
    /// Every doc's token vectors (the model's, for MaxSim).
    pub tokens: DocVectors,
    /// The dense vectors of the spans of docs with several, in span order (`dims` each;
    /// a doc has none or one per span).
    pub spans: DocVectors,
    /// Documents containing each term in either field (BM25F's document frequency).
    pub any_df: HashMap<u32, u32>,
    /// Event id → pending or superseded nodes citing it.
    pub conflicts: HashMap<u64, Vec<ConflictNote>>,
}

/// Several i8-quantized unit vectors per doc (`codec::Quantized`), of one dimension.
#[derive(Debug, Default)]
pub struct DocVectors {
    dims: usize,
    data: Vec<i8>,
    /// Per doc: (first vector, count) in `data`.
    ranges: Vec<(usize, usize)>,
}

impl DocVectors {
    fn new(docs: usize, dims: usize) -> Self {
        Self {
            dims,
            data: Vec::new(),
            ranges: vec![(0, 0); docs],
        }
    }

    /// Adds a doc's vectors (dims 0 takes the first non-empty set's); `false` when their
    /// dimensions differ.
    fn push(&mut self, doc: u32, q: Quantized) -> bool {
        if q.count() == 0 {
            return true;
        }
        if self.dims == 0 {
            self.dims = q.dims;
        }
        if q.dims != self.dims {
            return false;
        }
        self.ranges[doc as usize] = (self.data.len() / self.dims, q.count());
        self.data.extend(q.data);
        true
    }

    /// The cosines of `query` (unit length, `dims` values) with each of a doc's vectors,
    /// in order; empty when the doc has none or the dimensions differ.
    fn cosines<'a>(&'a self, doc: u32, query: &'a [f32]) -> impl Iterator<Item = f32> + 'a {
        let (start, count) = self.ranges.get(doc as usize).copied().unwrap_or((0, 0));
        let d = self.dims;
        let data = if query.len() == d && count > 0 {
            &self.data[start * d..(start + count) * d]
        } else {
            &[]
        };
        data.chunks_exact(d.max(1)).map(move |v| {
            query
                .iter()
                .zip(v)
                .map(|(a, &b)| a * f32::from(b))
                .sum::<f32>()
                / SCALE
        })
    }
}

/// Inputs for [`Snapshot::build`]: documents in context order (context, turn order, id).
pub struct SnapshotParts {
    /// (evidence, body length, window length), in context order.
    pub docs: Vec<(Evidence, u32, u32)>,
    /// Window postings: (term, field, event id, term frequency).
    pub postings: Vec<(String, i64, u64, u32)>,
    /// Graph edges: (event id, node, edge kind).
    pub edges: Vec<(u64, String, i64)>,
    /// The model's vectors per event.
    pub vectors: Vec<VectorRow>,
    /// What the space's semantic nodes add (graph edges, conflict notes).
    pub overlay: Overlay,
}

impl Snapshot {
    /// BM25F inverse document frequency (a term in either field counts).
    pub fn any_idf(&self, term: u32) -> f32 {
        let n = self.docs.len() as f32;
        let df = self.any_df.get(&term).copied().unwrap_or(0) as f32;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Builds the read view from what a store loaded.
    pub fn build(parts: SnapshotParts, options: &RetrievalOptions) -> Self {
        let mut s = Snapshot::default();
        let n = parts.docs.len();
        for (i, (evidence, body_len, window_len)) in parts.docs.into_iter().enumerate() {
            s.by_event.insert(evidence.event_id, i as u32);
            s.body.len.push(body_len);
            s.window.len.push(window_len);
            s.docs.push(Doc {
                tokens: text::estimate_tokens(&evidence.row.text),
                evidence,
                spans: Vec::new(),
                terms: Vec::new(),
                window_tf: HashMap::new(),
            });
        }
        for (term, field, event_id, tf) in parts.postings {
            let Some(&doc) = s.by_event.get(&event_id) else {
                continue;
            };
            let next = s.vocab.len() as u32;
            let id = *s.vocab.entry(term).or_insert(next);
            let target = if field == crate::derive::FIELD_WINDOW {
                s.docs[doc as usize].window_tf.insert(id, tf);
                &mut s.window
            } else {
                s.docs[doc as usize].terms.push(id);
                &mut s.body
            };
            target.postings.entry(id).or_default().push((doc, tf));
        }
        for d in 0..n {
            let doc = &s.docs[d];
            let mut seen: Vec<u32> = doc.terms.clone();
            seen.extend(doc.window_tf.keys().copied());
            seen.sort_unstable();
            seen.dedup();
            for t in seen {
                *s.any_df.entry(t).or_default() += 1;
            }
        }
        for field in [&mut s.body, &mut s.window] {
            let total: u64 = field.len.iter().map(|&l| u64::from(l)).sum();
            field.avg_len = if n == 0 {
                1.0
            } else {
                (total as f32 / n as f32).max(1.0)
            };
        }
        for doc in &mut s.docs {
            let row = &doc.evidence.row;
            let header: Vec<u32> = text::terms(&format!(
                "{} {}",
                row.actor,
                time::date_words(row.event_time_ms)
            ))
            .iter()
            .filter_map(|t| s.vocab.get(t).copied())
            .collect();
            doc.spans = text::spans(&row.text, crate::derive::SPAN_MIN_CHARS)
                .into_iter()
                .map(|(a, b)| {
                    let mut ids: Vec<u32> = text::terms(&row.text[a..b])
                        .iter()
                        .filter_map(|t| s.vocab.get(t).copied())
                        .collect();
                    ids.extend_from_slice(&header);
                    ((a, b), ids)
                })
                .collect();
        }
        let mut edges = parts.edges;
        edges.extend(parts.overlay.edges);
        s.graph = build_graph(&s.docs, &edges, &s.by_event, options);
        s.conflicts = parts.overlay.notes;
        s.add_vectors(parts.vectors);
        s
    }

    /// Dense vectors (normalized), span vectors, learned sparse postings and token
    /// vectors of the docs.
    fn add_vectors(&mut self, rows: Vec<VectorRow>) {
        let n = self.docs.len();
        self.tokens = DocVectors::new(n, 0);
        let Some(dims) = rows.first().map(|r| r.dense.len()) else {
            self.spans = DocVectors::new(n, 0);
            return;
        };
        self.spans = DocVectors::new(n, dims);
        self.dims = dims;
        self.vectors = vec![0.0; dims * n];
        for row in rows {
            let Some(&doc) = self.by_event.get(&row.event_id) else {
                continue;
            };
            if row.dense.len() == dims {
                let norm = row
                    .dense
                    .iter()
                    .map(|x| x * x)
                    .sum::<f32>()
                    .sqrt()
                    .max(1e-12);
                let at = doc as usize * dims;
                for (slot, x) in self.vectors[at..at + dims].iter_mut().zip(&row.dense) {
                    *slot = x / norm;
                }
            }
            if let Some(spans) = row.spans {
                if spans.count() == self.docs[doc as usize].spans.len() {
                    self.spans.push(doc, spans);
                }
            }
            for (id, w) in row.sparse.unwrap_or_default() {
                if w > 0.0 {
                    self.learned.entry(id).or_default().push((doc, w));
                }
            }
            if let Some(tokens) = row.tokens {
                self.tokens.push(doc, tokens);
            }
        }
    }

    /// The best span of a doc by the cosine of its span vector with `query` (unit length):
    /// (span index, cosine); `None` when the doc has no span vectors.
    pub fn best_dense_span(&self, doc: u32, query: &[f32]) -> Option<(usize, f32)> {
        self.spans
            .cosines(doc, query)
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// Multi-vector MaxSim of `query` token vectors (unit length) against a doc's: the
    /// mean over query tokens of the best cosine with any of the doc's tokens (0 when
    /// either side has none or their dimensions differ).
    pub fn maxsim(&self, doc: u32, query: &[Vec<f32>]) -> f32 {
        let mut total = 0.0;
        for q in query {
            match self.tokens.cosines(doc, q).reduce(f32::max) {
                Some(best) => total += best,
                None => return 0.0,
            }
        }
        if query.is_empty() {
            0.0
        } else {
            total / query.len() as f32
        }
    }

    /// The dense vector of a doc, when it has one.
    pub fn vector(&self, doc: u32) -> Option<&[f32]> {
        let at = doc as usize * self.dims;
        (self.dims > 0).then(|| &self.vectors[at..at + self.dims])
    }
}

fn build_graph(
    docs: &[Doc],
    edges: &[(u64, String, i64)],
    by_event: &HashMap<u64, u32>,
    options: &RetrievalOptions,
) -> Graph {
    let n = docs.len();
    let mut nodes: HashMap<&str, u32> = HashMap::new();
    let mut pairs: Vec<(u32, u32, f32)> = Vec::new();
    // Adjacent turns: docs arrive in (context, turn order, id) order.
    for i in 1..n {
        if docs[i].evidence.row.context == docs[i - 1].evidence.row.context {
            pairs.push(((i - 1) as u32, i as u32, options.graph_next_weight));
        }
    }
    for (event_id, key, kind) in edges {
        let Some(&doc) = by_event.get(event_id) else {
            continue;
        };
        let weight = match *kind {
            EDGE_CONTEXT => options.graph_context_weight,
            EDGE_CONCEPT => options.graph_concept_weight,
            EDGE_NODE => options.graph_node_weight,
            _ => continue,
        };
        if weight <= 0.0 {
            continue;
        }
        let next = (n + nodes.len()) as u32;
        let node = *nodes.entry(key.as_str()).or_insert(next);
        pairs.push((doc, node, weight));
    }
    let total = n + nodes.len();
    let mut count = vec![0usize; total + 1];
    for &(a, b, _) in &pairs {
        count[a as usize + 1] += 1;
        count[b as usize + 1] += 1;
    }
    for i in 0..total {
        count[i + 1] += count[i];
    }
    let offsets = count.clone();
    let mut fill = count;
    let mut targets = vec![0u32; pairs.len() * 2];
    let mut weights = vec![0f32; pairs.len() * 2];
    let mut degree = vec![0f32; total];
    for &(a, b, w) in &pairs {
        for (from, to) in [(a, b), (b, a)] {
            let at = fill[from as usize];
            targets[at] = to;
            weights[at] = w;
            fill[from as usize] += 1;
            degree[from as usize] += w;
        }
    }
    Graph {
        offsets,
        targets,
        weights,
        degree,
    }
}
