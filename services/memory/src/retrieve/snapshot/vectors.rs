//! The model's part of a view: dense unit vectors (row-major, one row per doc), span and
//! token vectors (i8-quantized, several per doc) and learned sparse postings.

use std::collections::HashMap;

use super::{merge_sorted, Snapshot};
use crate::embed::codec::{Quantized, VectorRow, SCALE};

/// Several i8-quantized unit vectors per doc (`codec::Quantized`), of one dimension.
#[derive(Debug, Clone, Default)]
pub struct DocVectors {
    dims: usize,
    data: Vec<i8>,
    /// Per doc: (first vector, count) in `data`.
    ranges: Vec<(usize, usize)>,
}

impl DocVectors {
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

    /// Makes room for new docs (without vectors), each before the old doc at its index in
    /// `before` (sorted).
    pub(super) fn insert_docs(&mut self, before: &[usize]) {
        super::order::splice(&mut self.ranges, before.iter().map(|&b| (b, (0, 0))));
    }

    /// The cosines of `query` (unit length, `dims` values) with each of a doc's vectors,
    /// in order; empty when the doc has none or the dimensions differ.
    pub(super) fn cosines<'a>(
        &'a self,
        doc: u32,
        query: &'a [f32],
    ) -> impl Iterator<Item = f32> + 'a {
        let d = self.dims;
        let data = if query.len() == d { self.of(doc) } else { &[] };
        data.chunks_exact(d.max(1)).map(move |v| {
            query
                .iter()
                .zip(v)
                .map(|(a, &b)| a * f32::from(b))
                .sum::<f32>()
                / SCALE
        })
    }

    /// A doc's vectors, `dims` values each.
    pub(super) fn of(&self, doc: u32) -> &[i8] {
        let (start, count) = self.ranges.get(doc as usize).copied().unwrap_or((0, 0));
        let d = self.dims;
        if count == 0 {
            return &[];
        }
        &self.data[start * d..(start + count) * d]
    }
}

/// Adds the vector rows of docs the view holds: dense vectors (normalized), span vectors
/// (when there is one per span), learned sparse postings and token vectors. The first row
/// a view ever receives decides the dense dimensions.
pub(super) fn add(s: &mut Snapshot, rows: Vec<VectorRow>) {
    let Some(first) = rows.first() else {
        return;
    };
    if s.dense_dims.is_none() {
        let dims = first.dense.len();
        s.dense_dims = Some(dims);
        s.dims = dims;
        s.vectors = vec![0.0; dims * s.docs.len()];
        s.spans.dims = dims;
    }
    let dims = s.dims;
    let mut learned: HashMap<u32, Vec<(u32, f32)>> = HashMap::new();
    for row in rows {
        let Some(&doc) = s.by_event.get(&row.event_id) else {
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
            for (slot, x) in s.vectors[at..at + dims].iter_mut().zip(&row.dense) {
                *slot = x / norm;
            }
        }
        if let Some(spans) = row.spans {
            if spans.count() == s.docs[doc as usize].spans.len() {
                s.spans.push(doc, spans);
            }
        }
        for (id, w) in row.sparse.unwrap_or_default() {
            if w > 0.0 {
                learned.entry(id).or_default().push((doc, w));
            }
        }
        if let Some(tokens) = row.tokens {
            s.tokens.push(doc, tokens);
        }
    }
    for (id, mut adds) in learned {
        adds.sort_by_key(|a| a.0);
        merge_sorted(s.learned.entry(id).or_default(), adds);
    }
}
