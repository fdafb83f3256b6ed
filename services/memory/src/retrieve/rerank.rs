//! Applies a [`Reranker`] to the ranked candidates: the best `top_n` are sent as
//! documents (`actor: text`, as the embedding model sees an event) and put in the
//! reranker's order. They keep the pipeline's scores, reassigned by position (the best
//! score to the reranker's first), so evidence selection — which weighs score against
//! query-term coverage — sees the same score distribution in the new order. Any failure
//! keeps the pipeline's order with a warning.

use std::time::Duration;

use super::snapshot::Snapshot;
use super::Candidate;
use crate::derive::embedding_text;
use crate::rerank::Reranker;
use crate::RecallStats;

/// A bound on the whole call, in case a reranker's own timeout does not hold (the remote
/// client's default is 2 s).
const HARD_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) async fn apply(
    reranker: &dyn Reranker,
    snap: &Snapshot,
    query: &str,
    ranked: &mut [(u32, Candidate)],
    stats: &mut RecallStats,
) {
    let n = reranker.top_n().min(ranked.len());
    if n < 2 {
        return;
    }
    let documents: Vec<String> = ranked[..n]
        .iter()
        .map(|(doc, _)| embedding_text(&snap.docs[*doc as usize].evidence))
        .collect();
    let scores = match tokio::time::timeout(HARD_TIMEOUT, reranker.rerank(query, &documents)).await
    {
        Ok(Ok(scores)) => scores,
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "memory reranker failed; keeping the pipeline's order");
            return;
        }
        Err(_) => {
            tracing::warn!("memory reranker timed out; keeping the pipeline's order");
            return;
        }
    };
    reorder(&mut ranked[..n], &scores);
    stats.reranked = n;
}

/// Puts `top` in the order of `scores` (`(index, relevance)`; out-of-range and repeated
/// indices are ignored; unscored candidates follow in their own order) and reassigns the
/// original scores by position.
fn reorder(top: &mut [(u32, Candidate)], scores: &[(usize, f32)]) {
    let mut relevance: Vec<Option<f32>> = vec![None; top.len()];
    for &(i, s) in scores {
        if let Some(slot) = relevance.get_mut(i) {
            if slot.is_none() && s.is_finite() {
                *slot = Some(s);
            }
        }
    }
    let mut order: Vec<usize> = (0..top.len()).collect();
    // Scored first, by relevance (ties keep the pipeline's order); then the rest.
    order.sort_by(|&a, &b| match (relevance[a], relevance[b]) {
        (Some(x), Some(y)) => y.total_cmp(&x).then(a.cmp(&b)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(&b),
    });
    let scores_by_rank: Vec<f32> = top.iter().map(|(_, c)| c.score).collect();
    let before: Vec<(u32, Candidate)> = top.to_vec();
    for (rank, &from) in order.iter().enumerate() {
        let (doc, mut c) = before[from];
        c.score = scores_by_rank[rank];
        c.rerank = relevance[from];
        top[rank] = (doc, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(score: f32) -> Candidate {
        Candidate {
            score,
            ..Candidate::default()
        }
    }

    #[test]
    fn reorders_by_relevance_and_keeps_the_score_distribution() {
        let mut top = vec![
            (10, cand(3.0)),
            (11, cand(2.0)),
            (12, cand(1.0)),
            (13, cand(0.5)),
        ];
        // 13 first, then 11; 10 and 12 unscored; junk indices ignored.
        reorder(&mut top, &[(3, 0.9), (1, 0.4), (7, 1.0), (3, 0.1)]);
        let got: Vec<(u32, f32, Option<f32>)> =
            top.iter().map(|(d, c)| (*d, c.score, c.rerank)).collect();
        assert_eq!(
            got,
            vec![
                (13, 3.0, Some(0.9)),
                (11, 2.0, Some(0.4)),
                (10, 1.0, None),
                (12, 0.5, None)
            ]
        );
    }
}
