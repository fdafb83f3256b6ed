//! The event/context/concept graph in CSR form. Its edges are kept as lists (node keys
//! interned once) and the CSR arrays are rebuilt from them after every change: a pass over
//! integers, in the order a build of all rows takes them (adjacent turns in doc order, the
//! rows' stored edges in load order, the semantic overlay's edges), so node numbers and
//! edge order — and with them Personalized PageRank's float sums — are the same either way.

use std::collections::HashMap;

use super::Doc;
use crate::derive::{EDGE_CONCEPT, EDGE_CONTEXT, EDGE_NODE};
use crate::retrieve::RetrievalOptions;

/// The graph: docs are nodes `0..n`, contexts and concepts follow.
#[derive(Debug, Clone, Default)]
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

/// The edges a view's graph is built from.
#[derive(Debug, Clone, Default)]
pub(super) struct Edges {
    /// Node key → key id.
    keys: HashMap<String, u32>,
    /// The rows' stored edges with a weight above 0: (doc, key id, weight), in load order.
    stored: Vec<(u32, u32, f32)>,
    /// The semantic overlay's edges: (event id, key id, kind, the event's doc once the view
    /// holds it), in the overlay's order.
    overlay: Vec<(u64, u32, i64, Option<u32>)>,
}

fn weight(kind: i64, o: &RetrievalOptions) -> Option<f32> {
    let w = match kind {
        EDGE_CONTEXT => o.graph_context_weight,
        EDGE_CONCEPT => o.graph_concept_weight,
        EDGE_NODE => o.graph_node_weight,
        _ => return None,
    };
    (w > 0.0).then_some(w)
}

impl Edges {
    fn key(&mut self, key: &str) -> u32 {
        if let Some(&id) = self.keys.get(key) {
            return id;
        }
        let id = self.keys.len() as u32;
        self.keys.insert(key.to_owned(), id);
        id
    }

    /// The semantic overlay's edges (their events need not be in the view yet).
    pub(super) fn set_overlay(&mut self, edges: Vec<(u64, String, i64)>) {
        self.overlay = edges
            .into_iter()
            .map(|(event_id, key, kind)| (event_id, self.key(&key), kind, None))
            .collect();
    }

    /// Adds the stored edges of new rows (those of events the view lacks, or of unknown
    /// kinds or weight 0, count for nothing).
    pub(super) fn add(
        &mut self,
        edges: &[(u64, String, i64)],
        by_event: &HashMap<u64, u32>,
        o: &RetrievalOptions,
    ) {
        for (event_id, key, kind) in edges {
            let (Some(&doc), Some(w)) = (by_event.get(event_id), weight(*kind, o)) else {
                continue;
            };
            let key = self.key(key);
            self.stored.push((doc, key, w));
        }
    }

    /// Attaches overlay edges whose events have joined the view.
    pub(super) fn resolve(&mut self, by_event: &HashMap<u64, u32>) {
        for (event_id, _, _, doc) in &mut self.overlay {
            if doc.is_none() {
                *doc = by_event.get(event_id).copied();
            }
        }
    }

    /// Renumbers the docs of every edge.
    pub(super) fn renumber(&mut self, map: impl Fn(&mut u32)) {
        self.stored.iter_mut().for_each(|e| map(&mut e.0));
        self.overlay
            .iter_mut()
            .filter_map(|e| e.3.as_mut())
            .for_each(map);
    }

    /// The CSR graph of `docs` (in context order) and these edges.
    pub(super) fn graph(&self, docs: &[Doc], o: &RetrievalOptions) -> Graph {
        let n = docs.len();
        let mut pairs: Vec<(u32, u32, f32)> = Vec::new();
        // Adjacent turns.
        for i in 1..n {
            if docs[i].evidence.row.context == docs[i - 1].evidence.row.context {
                pairs.push(((i - 1) as u32, i as u32, o.graph_next_weight));
            }
        }
        // Context, concept and node keys are numbered after the docs, in order of first use.
        let mut number = vec![u32::MAX; self.keys.len()];
        let mut nodes = 0usize;
        let overlay = self
            .overlay
            .iter()
            .filter_map(|&(_, key, kind, doc)| Some((doc?, key, weight(kind, o)?)));
        for (doc, key, w) in self.stored.iter().copied().chain(overlay) {
            let node = &mut number[key as usize];
            if *node == u32::MAX {
                *node = (n + nodes) as u32;
                nodes += 1;
            }
            pairs.push((doc, *node, w));
        }
        csr(n + nodes, &pairs)
    }
}

fn csr(total: usize, pairs: &[(u32, u32, f32)]) -> Graph {
    let mut count = vec![0usize; total + 1];
    for &(a, b, _) in pairs {
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
    for &(a, b, w) in pairs {
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
