//! The lexical part of a snapshot, derived from the ledger rows a generation covers: the
//! same documents and BM25F postings (body and window fields) the SQLite index stores,
//! computed with the same [`derive`] analysis, in the same order, so both backends feed
//! one read pipeline identical inputs. PostgreSQL keeps the full-text (`tsvector` + GIN),
//! graph edge and vector tables; the BM25F postings are rebuilt in memory when a snapshot
//! loads, which costs one analysis pass over the space.

use std::collections::BTreeMap;

use lumina_memory::derive::{derive, FIELD_BODY, FIELD_WINDOW};
use lumina_memory::embed::codec::VectorRow;
use lumina_memory::retrieve::snapshot::SnapshotParts;
use lumina_memory::semantic::overlay::Overlay;
use lumina_memory::Evidence;

/// Builds the snapshot parts of one space from its indexed ledger rows (any order) and
/// its vectors. `window` is the index option of the same name.
pub(crate) fn snapshot_parts(
    mut rows: Vec<Evidence>,
    vectors: Vec<VectorRow>,
    edges: Vec<(u64, String, i64)>,
    window: usize,
) -> SnapshotParts {
    // Context order: (context, turn order, event id), as the SQLite store loads its docs.
    rows.sort_by(|a, b| {
        (a.row.context.as_str(), a.row.turn_order, a.event_id).cmp(&(
            b.row.context.as_str(),
            b.row.turn_order,
            b.event_id,
        ))
    });
    let derived: Vec<_> = rows.iter().map(derive).collect();
    // (term, field, event id) -> tf, ordered like the SQLite postings' primary key.
    let mut postings: BTreeMap<(String, i64, u64), u32> = BTreeMap::new();
    let mut docs = Vec::with_capacity(rows.len());
    for (i, (e, d)) in rows.iter().zip(&derived).enumerate() {
        for t in &d.terms {
            *postings
                .entry((t.clone(), FIELD_BODY, e.event_id))
                .or_default() += 1;
        }
        let mut window_len = 0u32;
        if window > 0 {
            // Neighbours within the same context, up to `window` on each side.
            let same = |j: &usize| rows[*j].row.context == e.row.context;
            let before = (0..i).rev().take_while(same).take(window);
            let after = (i + 1..rows.len()).take_while(same).take(window);
            for j in before.chain(after) {
                for t in &derived[j].terms {
                    *postings
                        .entry((t.clone(), FIELD_WINDOW, e.event_id))
                        .or_default() += 1;
                    window_len += 1;
                }
            }
        }
        let body_len = u32::try_from(d.terms.len()).unwrap_or(u32::MAX);
        docs.push((e.clone(), body_len, window_len));
    }
    SnapshotParts {
        docs,
        postings: postings
            .into_iter()
            .map(|((term, field, id), tf)| (term, field, id, tf))
            .collect(),
        edges,
        vectors,
        overlay: Overlay::default(),
    }
}

/// The words of an FTS5 query (`"a" OR "b" OR "c"`, whose words are alphanumeric: see
/// `derive::fts_query`), safe to join into a PostgreSQL `tsquery` (`a | b | c`).
pub(crate) fn query_words(fts: &str) -> Vec<&str> {
    fts.split(" OR ")
        .map(|w| w.trim().trim_matches('"'))
        .filter(|w| !w.is_empty() && w.chars().all(char::is_alphanumeric))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_of_an_fts_query() {
        assert_eq!(query_words("\"dog\" OR \"water\""), vec!["dog", "water"]);
        assert!(query_words("").is_empty());
    }
}
