//! Evidence selection: one item per source event, chosen greedily by relevance plus the
//! query terms it newly covers (a monotone submodular objective, so greedy is within
//! 1 − 1/e of the best set), under the evidence count and the token budget.

use std::collections::HashSet;

use super::snapshot::Snapshot;
use super::{Candidate, RetrievalOptions};
use crate::RecallQuery;

/// Candidates beyond this many times `max_items` are not considered.
const POOL_FACTOR: usize = 4;

/// Chooses the evidence, best first. `ranked` is sorted by score (best first) and holds
/// each doc once.
pub(super) fn select(
    snap: &Snapshot,
    ranked: &[(u32, Candidate)],
    terms: &[u32],
    query: &RecallQuery,
    o: &RetrievalOptions,
) -> Vec<(u32, Candidate)> {
    let n = snap.docs.len();
    let idf: Vec<(u32, f32)> = terms.iter().map(|&t| (t, snap.body.idf(t, n))).collect();
    let total_idf: f32 = idf.iter().map(|x| x.1).sum::<f32>().max(1e-12);
    let top_score = ranked.first().map_or(1.0, |r| r.1.score).max(1e-12);
    let mut pool: Vec<&(u32, Candidate)> = ranked
        .iter()
        .take(
            query
                .max_items
                .saturating_mul(POOL_FACTOR)
                .max(query.max_items),
        )
        .collect();
    let mut covered: HashSet<u32> = HashSet::new();
    let mut seen_events: HashSet<u64> = HashSet::new();
    let mut budget = query.token_budget;
    let mut out = Vec::new();
    while out.len() < query.max_items && !pool.is_empty() {
        let mut best: Option<(usize, f32)> = None;
        for (i, (doc, c)) in pool.iter().enumerate() {
            let d = &snap.docs[*doc as usize];
            if d.tokens > budget || seen_events.contains(&d.evidence.event_id) {
                continue;
            }
            let gain: f32 = idf
                .iter()
                .filter(|(t, _)| !covered.contains(t) && d.terms.contains(t))
                .map(|x| x.1)
                .sum();
            let value = c.score / top_score + o.coverage_weight * gain / total_idf;
            if best.is_none_or(|(_, v)| value > v) {
                best = Some((i, value));
            }
        }
        let Some((i, _)) = best else {
            break;
        };
        let (doc, c) = *pool.remove(i);
        let d = &snap.docs[doc as usize];
        budget -= d.tokens;
        seen_events.insert(d.evidence.event_id);
        covered.extend(idf.iter().map(|x| x.0).filter(|t| d.terms.contains(t)));
        out.push((doc, c));
    }
    out
}
