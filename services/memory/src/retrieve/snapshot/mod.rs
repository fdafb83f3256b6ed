//! An in-memory read view of one space's published index generation: documents with their
//! evidence, the sparse index (two BM25 fields), the graph in CSR form and the vectors.
//! Built from what a store loads — the indexed ledger rows with their vectors and graph
//! edges ([`Rows`]) — so every store shares the same query code, and kept up to date
//! incrementally: [`Snapshot::extend`] adds the rows indexed after the view's ledger
//! position and leaves the view a build of all rows would give (`retrieve::view` caches a
//! view per space and chooses between the two).
//!
//! - `lexical.rs`: documents (analysis of new rows only), the body and window fields,
//!   document frequencies, spans;
//! - `order.rs`: docs in context order, renumbered when new docs land between old ones;
//! - `graph.rs`: the edge lists and the CSR graph;
//! - `vectors.rs`: dense, span and token vectors and learned sparse postings.

#[cfg(test)]
mod canonical;
mod graph;
mod lexical;
mod order;
#[cfg(test)]
mod tests;
mod vectors;

use std::collections::{HashMap, HashSet};

pub use graph::Graph;
pub use vectors::DocVectors;

use super::RetrievalOptions;
use crate::build::LedgerRow;
use crate::embed::codec::VectorRow;
use crate::semantic::overlay::{ConflictNote, Overlay};
use crate::Evidence;

/// One document: the evidence plus its scoring spans.
#[derive(Debug, Clone)]
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
    /// Term frequencies of the body by term id: what the doc adds to its neighbours'
    /// windows (kept so that a refresh never analyzes an old row again).
    body_tf: Vec<(u32, u32)>,
}

/// One BM25 field.
#[derive(Debug, Clone, Default)]
pub struct Field {
    /// Term id → (doc, term frequency), by doc.
    pub postings: HashMap<u32, Vec<(u32, u32)>>,
    /// Field length per doc, in terms.
    pub len: Vec<u32>,
    /// Average field length.
    pub avg_len: f32,
    /// The sum of `len`.
    total: u64,
}

impl Field {
    /// BM25 inverse document frequency of a term among `n` docs.
    pub fn idf(&self, term: u32, n: usize) -> f32 {
        let df = self.postings.get(&term).map_or(0, Vec::len) as f32;
        (1.0 + (n as f32 - df + 0.5) / (df + 0.5)).ln()
    }

    /// Sets the average length from the total (1 for an empty view).
    fn average(&mut self) {
        let n = self.len.len();
        self.avg_len = if n == 0 {
            1.0
        } else {
            (self.total as f32 / n as f32).max(1.0)
        };
    }
}

/// A space's read view.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The documents, in context order (context, turn order, event id).
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
    /// Learned sparse postings (model vocabulary id → (doc, weight)), by doc, when the
    /// model has them.
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
    /// The edges the graph is built from.
    edges: graph::Edges,
    /// Turns on each side whose terms form a doc's window (the index option `window`).
    window_size: usize,
    /// The dense dimensions, decided by the first vector row the view received.
    dense_dims: Option<usize>,
}

/// What a store loads for a view: indexed ledger rows after a position, with their
/// vectors and graph edges.
#[derive(Debug, Default)]
pub struct Rows {
    /// The ledger rows, in ledger order.
    pub rows: Vec<LedgerRow>,
    /// The model's vectors of those rows, by event id.
    pub vectors: Vec<VectorRow>,
    /// The stored graph edges of those rows, (event id, node, edge kind), ordered by
    /// event id, node (bytewise) and kind.
    pub edges: Vec<(u64, String, i64)>,
}

impl Snapshot {
    /// BM25F inverse document frequency (a term in either field counts).
    pub fn any_idf(&self, term: u32) -> f32 {
        let n = self.docs.len() as f32;
        let df = self.any_df.get(&term).copied().unwrap_or(0) as f32;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Builds the read view of a space's indexed rows, with what its semantic nodes add
    /// (`overlay`). `window` is the index option of the same name.
    pub fn build(rows: Rows, overlay: Overlay, window: usize, options: &RetrievalOptions) -> Self {
        let mut s = Snapshot {
            window_size: window,
            conflicts: overlay.notes,
            ..Snapshot::default()
        };
        s.edges.set_overlay(overlay.edges);
        s.extend(rows, options);
        s
    }

    /// Adds rows indexed after the ones the view holds (their event ids are larger): only
    /// they are analyzed; the windows of the docs next to them, the fields' statistics and
    /// the graph follow. The view is then the one [`Snapshot::build`] gives for all the
    /// rows. Rows the view already holds are skipped. Returns the event ids of the docs
    /// added and of those whose window was recomputed (the docs within `window` turns of
    /// an added one), ascending.
    pub fn extend(&mut self, rows: Rows, options: &RetrievalOptions) -> Vec<u64> {
        let Rows {
            rows,
            vectors,
            edges,
        } = rows;
        let docs = lexical::new_docs(self, rows);
        let new: HashSet<u64> = docs.iter().map(|d| d.evidence.event_id).collect();
        let placed = order::insert(self, docs);
        let windows = lexical::index(self, &placed);
        vectors::add(
            self,
            vectors
                .into_iter()
                .filter(|v| new.contains(&v.event_id))
                .collect(),
        );
        let edges: Vec<_> = edges.into_iter().filter(|e| new.contains(&e.0)).collect();
        self.edges.add(&edges, &self.by_event, options);
        self.edges.resolve(&self.by_event);
        self.graph = self.edges.graph(&self.docs, options);
        let mut changed: Vec<u64> = windows
            .iter()
            .chain(&placed)
            .map(|&d| self.docs[d as usize].evidence.event_id)
            .collect();
        changed.sort_unstable();
        changed.dedup();
        changed
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

/// Keeps a list sorted by doc up to date: `changes` (by doc, each doc once) set a doc's
/// value (`Some`) or remove it (`None`).
fn apply_changes<T: Copy>(list: &mut Vec<(u32, T)>, changes: &[(u32, Option<T>)]) {
    if changes.len() <= 8 {
        for &(doc, value) in changes {
            match (list.binary_search_by_key(&doc, |e| e.0), value) {
                (Ok(i), Some(v)) => list[i].1 = v,
                (Ok(i), None) => {
                    list.remove(i);
                }
                (Err(i), Some(v)) => list.insert(i, (doc, v)),
                (Err(_), None) => {}
            }
        }
        return;
    }
    let old = std::mem::take(list);
    list.reserve(old.len() + changes.len());
    let mut pending = changes.iter().peekable();
    for (doc, value) in old {
        while let Some(&&(d, v)) = pending.peek() {
            if d >= doc {
                break;
            }
            list.extend(v.map(|v| (d, v)));
            pending.next();
        }
        match pending.peek() {
            Some(&&(d, v)) if d == doc => {
                list.extend(v.map(|v| (d, v)));
                pending.next();
            }
            _ => list.push((doc, value)),
        }
    }
    list.extend(pending.filter_map(|&(d, v)| v.map(|v| (d, v))));
}

/// Merges entries of new docs into a list sorted by doc (entries of one doc keep their
/// order; `adds` is sorted by doc).
fn merge_sorted<T>(list: &mut Vec<(u32, T)>, adds: Vec<(u32, T)>) {
    let Some(first) = adds.first().map(|a| a.0) else {
        return;
    };
    let at = list.partition_point(|e| e.0 <= first);
    if at == list.len() {
        list.extend(adds);
        return;
    }
    let tail = list.split_off(at);
    list.reserve(tail.len() + adds.len());
    let mut adds = adds.into_iter().peekable();
    for entry in tail {
        while let Some(add) = adds.next_if(|a| a.0 <= entry.0) {
            list.push(add);
        }
        list.push(entry);
    }
    list.extend(adds);
}
