//! Docs are kept in context order (context, turn order, event id): adjacent turns are graph
//! edges, windows are runs of neighbours, and ties in ranking go to the lower doc index.
//! New docs are placed by binary search; the old docs after the first of them move up, so
//! every doc index the view holds (event map, postings, learned postings, edges) is
//! renumbered: one pass over integers from the first moved doc on, no analysis. Appends to
//! the context that sorts last move nothing.

use super::{Doc, Snapshot};

fn key(d: &Doc) -> (&str, i64, u64) {
    let row = &d.evidence.row;
    (row.context.as_str(), row.turn_order, d.evidence.event_id)
}

/// Places new docs in context order; returns their indices, ascending. Their fields'
/// lengths are 0 and they have no vectors yet.
pub(super) fn insert(s: &mut Snapshot, mut new: Vec<Doc>) -> Vec<u32> {
    if new.is_empty() {
        return Vec::new();
    }
    new.sort_by(|a, b| key(a).cmp(&key(b)));
    // before[j]: how many old docs sort before new doc j (non-decreasing).
    let before: Vec<usize> = new
        .iter()
        .map(|d| {
            let k = key(d);
            s.docs.partition_point(|o| key(o) < k)
        })
        .collect();
    let first = before[0];
    let old_n = s.docs.len();
    // Old doc `first + i` moves up by the number of new docs placed before it.
    let mut remap: Vec<u32> = Vec::with_capacity(old_n - first);
    let mut j = 0;
    for i in first..old_n {
        while j < before.len() && before[j] <= i {
            j += 1;
        }
        remap.push((i + j) as u32);
    }
    if first < old_n {
        renumber(s, first as u32, &remap);
    }
    let placed: Vec<u32> = before
        .iter()
        .enumerate()
        .map(|(j, &b)| (b + j) as u32)
        .collect();
    splice(&mut s.docs, before.iter().copied().zip(new));
    splice(&mut s.body.len, before.iter().map(|&b| (b, 0)));
    splice(&mut s.window.len, before.iter().map(|&b| (b, 0)));
    s.tokens.insert_docs(&before);
    s.spans.insert_docs(&before);
    if s.dims > 0 {
        splice_rows(&mut s.vectors, s.dims, &before);
    }
    for &p in &placed {
        s.by_event.insert(s.docs[p as usize].evidence.event_id, p);
    }
    placed
}

/// Renumbers every doc index from `first` on: doc `first + i` becomes `remap[i]`.
fn renumber(s: &mut Snapshot, first: u32, remap: &[u32]) {
    let map = |d: &mut u32| {
        if *d >= first {
            *d = remap[(*d - first) as usize];
        }
    };
    s.by_event.values_mut().for_each(map);
    for list in s
        .body
        .postings
        .values_mut()
        .chain(s.window.postings.values_mut())
    {
        let at = list.partition_point(|e| e.0 < first);
        list[at..].iter_mut().for_each(|e| map(&mut e.0));
    }
    for list in s.learned.values_mut() {
        let at = list.partition_point(|e| e.0 < first);
        list[at..].iter_mut().for_each(|e| map(&mut e.0));
    }
    s.edges.renumber(map);
}

/// Inserts items into `v`, each before the old element at its index (`items` by index).
pub(super) fn splice<T>(v: &mut Vec<T>, items: impl IntoIterator<Item = (usize, T)>) {
    let mut items = items.into_iter().peekable();
    let Some(&(first, _)) = items.peek() else {
        return;
    };
    let tail = v.split_off(first);
    for (i, old) in tail.into_iter().enumerate() {
        while let Some((_, item)) = items.next_if(|(at, _)| *at <= first + i) {
            v.push(item);
        }
        v.push(old);
    }
    v.extend(items.map(|(_, item)| item));
}

/// Inserts a row of `dims` zeros before each old row at the indices `before` (sorted).
fn splice_rows(v: &mut Vec<f32>, dims: usize, before: &[usize]) {
    let Some(&first) = before.first() else {
        return;
    };
    let tail = v.split_off(first * dims);
    let mut at = before.iter().peekable();
    for (i, row) in tail.chunks_exact(dims).enumerate() {
        while at.next_if(|&&b| b <= first + i).is_some() {
            v.resize(v.len() + dims, 0.0);
        }
        v.extend_from_slice(row);
    }
    for _ in at {
        v.resize(v.len() + dims, 0.0);
    }
}
