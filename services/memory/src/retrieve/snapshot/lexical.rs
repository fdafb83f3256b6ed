//! The lexical part of a view: documents analyzed from their ledger rows (with the same
//! [`derive`] analysis the index build uses, so the SQLite and PostgreSQL stores feed one
//! pipeline identical inputs), the body field, the window field (each doc's neighbouring
//! turns, up to `window` on each side within its context: inserting a doc changes the
//! windows of its neighbours) and the document frequencies of BM25F.

use std::collections::{HashMap, HashSet};

use super::{apply_changes, merge_sorted, Doc, Snapshot};
use crate::build::LedgerRow;
use crate::derive::{derive, SPAN_MIN_CHARS};
use crate::{text, time, Evidence};

/// Analyzes rows the view does not hold yet into documents, interning their terms.
pub(super) fn new_docs(s: &mut Snapshot, rows: Vec<LedgerRow>) -> Vec<Doc> {
    let mut out: Vec<Doc> = Vec::with_capacity(rows.len());
    let mut seen = HashSet::new();
    for row in rows {
        let id = row.evidence.event_id;
        if s.by_event.contains_key(&id) || !seen.insert(id) {
            continue;
        }
        out.push(doc(&mut s.vocab, row.evidence));
    }
    out
}

fn intern(vocab: &mut HashMap<String, u32>, term: String) -> u32 {
    let next = vocab.len() as u32;
    *vocab.entry(term).or_insert(next)
}

/// One document. Its spans' terms and its actor and date terms are all terms of its own
/// body (the same words), so looking them up after interning the body finds each one.
fn doc(vocab: &mut HashMap<String, u32>, evidence: Evidence) -> Doc {
    let mut tf: HashMap<u32, u32> = HashMap::new();
    for term in derive(&evidence).terms {
        *tf.entry(intern(vocab, term)).or_default() += 1;
    }
    let mut body_tf: Vec<(u32, u32)> = tf.into_iter().collect();
    body_tf.sort_unstable();
    let row = &evidence.row;
    let ids = |text: &str| -> Vec<u32> {
        text::terms(text)
            .iter()
            .filter_map(|t| vocab.get(t).copied())
            .collect()
    };
    let header = ids(&format!(
        "{} {}",
        row.actor,
        time::date_words(row.event_time_ms)
    ));
    let spans = text::spans(&row.text, SPAN_MIN_CHARS)
        .into_iter()
        .map(|(a, b)| {
            let mut span = ids(&row.text[a..b]);
            span.extend_from_slice(&header);
            ((a, b), span)
        })
        .collect();
    Doc {
        tokens: text::estimate_tokens(&row.text),
        terms: body_tf.iter().map(|&(t, _)| t).collect(),
        spans,
        window_tf: HashMap::new(),
        body_tf,
        evidence,
    }
}

/// Indexes the docs just placed at `placed` (ascending): their body postings, the windows
/// of every doc within `window` turns of one of them, the document frequencies and the
/// average lengths. Returns the docs whose windows were recomputed.
pub(super) fn index(s: &mut Snapshot, placed: &[u32]) -> Vec<u32> {
    let mut body_adds: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
    for &d in placed {
        let doc = &s.docs[d as usize];
        let len: u32 = doc.body_tf.iter().map(|e| e.1).sum();
        for &(t, tf) in &doc.body_tf {
            body_adds.entry(t).or_default().push((d, tf));
        }
        s.body.len[d as usize] = len;
        s.body.total += u64::from(len);
    }
    for (t, adds) in body_adds {
        merge_sorted(s.body.postings.entry(t).or_default(), adds);
    }

    let affected = affected(s, placed);
    let mut changes: HashMap<u32, Vec<(u32, Option<u32>)>> = HashMap::new();
    let mut df: HashMap<u32, i64> = HashMap::new();
    // Every doc whose terms in either field may have changed, ascending.
    let mut touched: Vec<u32> = affected.iter().chain(placed).copied().collect();
    touched.sort_unstable();
    touched.dedup();
    for d in touched {
        let is_new = placed.binary_search(&d).is_ok();
        let before = if is_new {
            Vec::new()
        } else {
            field_terms(&s.docs[d as usize])
        };
        if affected.binary_search(&d).is_ok() {
            let (tf, len) = window_of(s, d as usize);
            let old = std::mem::replace(&mut s.docs[d as usize].window_tf, tf);
            let old_len = std::mem::replace(&mut s.window.len[d as usize], len);
            s.window.total = (s.window.total + u64::from(len)).saturating_sub(u64::from(old_len));
            let new = &s.docs[d as usize].window_tf;
            let mut terms: Vec<u32> = old.keys().chain(new.keys()).copied().collect();
            terms.sort_unstable();
            terms.dedup();
            for t in terms {
                let value = new.get(&t).copied();
                if old.get(&t).copied() != value {
                    changes.entry(t).or_default().push((d, value));
                }
            }
        }
        let after = field_terms(&s.docs[d as usize]);
        for t in &after {
            *df.entry(*t).or_default() += 1;
        }
        for t in &before {
            *df.entry(*t).or_default() -= 1;
        }
    }
    for (t, change) in changes {
        let list = s.window.postings.entry(t).or_default();
        apply_changes(list, &change);
        if list.is_empty() {
            s.window.postings.remove(&t);
        }
    }
    for (t, delta) in df {
        if delta == 0 {
            continue;
        }
        let count = s.any_df.entry(t).or_default();
        *count = u32::try_from(i64::from(*count) + delta).unwrap_or(0);
        if *count == 0 {
            s.any_df.remove(&t);
        }
    }
    s.body.average();
    s.window.average();
    affected
}

/// The distinct terms of a doc's body and window, sorted.
fn field_terms(doc: &Doc) -> Vec<u32> {
    let mut terms: Vec<u32> = doc.terms.clone();
    terms.extend(doc.window_tf.keys().copied());
    terms.sort_unstable();
    terms.dedup();
    terms
}

/// The docs whose windows change when docs land at `placed`: those within `window` turns
/// of one of them in the same context (the new docs included), ascending.
fn affected(s: &Snapshot, placed: &[u32]) -> Vec<u32> {
    let w = s.window_size;
    if w == 0 {
        return Vec::new();
    }
    let n = s.docs.len();
    let mut out = Vec::new();
    for &p in placed {
        let p = p as usize;
        let context = &s.docs[p].evidence.row.context;
        for d in p.saturating_sub(w)..(p + w + 1).min(n) {
            // Contexts are contiguous in context order, so a doc of the same context is
            // within the same run.
            if s.docs[d].evidence.row.context == *context {
                out.push(d as u32);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The window of doc `d`: the body terms of up to `window` neighbours on each side within
/// its context, as term frequencies, and their count.
fn window_of(s: &Snapshot, d: usize) -> (HashMap<u32, u32>, u32) {
    let w = s.window_size;
    let context = &s.docs[d].evidence.row.context;
    let same = |j: &usize| s.docs[*j].evidence.row.context == *context;
    let before = (0..d).rev().take_while(same).take(w);
    let after = (d + 1..s.docs.len()).take_while(same).take(w);
    let mut tf: HashMap<u32, u32> = HashMap::new();
    let mut len = 0u32;
    for j in before.chain(after) {
        for &(t, f) in &s.docs[j].body_tf {
            *tf.entry(t).or_default() += f;
            len += f;
        }
    }
    (tf, len)
}
