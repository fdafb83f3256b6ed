//! Search: BM25 full text and, with an embedder, dense cosine, fused by reciprocal rank
//! (docs/rag.md#search).
//!
//! The query's words (lowercased, stopwords dropped unless nothing else is left) go to the
//! store's full-text index as an any-of query; its top [`RagOptions::candidates`] and the
//! dense retriever's are fused: `score(chunk) = Σ w / (rrf_k + rank)` over the retrievers
//! that found it (ranks from 1; `w` is 1 for full text, `dense_weight` for dense). An embedder that fails leaves the search full-text only
//! (reported in [`SearchResult::dense_error`]).
//!
//! [`RagOptions::candidates`]: crate::RagOptions::candidates

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;

use crate::citation::Citation;
use crate::store::ChunkKey;
use crate::{Error, Rag, Result, MAX_K};

/// One search hit: a chunk, its citation and its exact span.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// `[path#chunk-N]`.
    pub citation: String,
    /// The file, relative to the project root.
    pub path: String,
    /// The 1-based chunk index.
    pub chunk: u32,
    /// Byte span `[start, end)` in the file's text (the file itself for text formats, its
    /// extracted text for HTML, PDF and .docx).
    pub start: usize,
    /// See `start`.
    pub end: usize,
    /// 1-based first and last line of the span.
    pub line_start: u32,
    /// See `line_start`.
    pub line_end: u32,
    /// The file's format (`text`, `html`, `pdf`, `docx`).
    pub format: String,
    /// The fused score (higher is better).
    pub score: f64,
    /// Rank in the full-text results (1-based), if found there.
    pub text_rank: Option<usize>,
    /// Rank in the dense results (1-based), if found there.
    pub dense_rank: Option<usize>,
    /// The chunk's text.
    pub text: String,
}

/// What a search found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SearchResult {
    /// Best first, at most `k`.
    pub hits: Vec<Hit>,
    /// The embedding model the dense retriever used, if any.
    pub dense_model: Option<String>,
    /// Why the dense retriever was left out, if it failed.
    pub dense_error: Option<String>,
    /// Files in the project's index.
    pub files: usize,
}

/// The query's search terms: content words, or every word when only stopwords were given;
/// each once, in order.
pub(crate) fn query_terms(query: &str) -> Vec<String> {
    let mut terms = lumina_memory::text::content_words(query);
    if terms.is_empty() {
        terms = lumina_memory::text::words(query);
    }
    let mut seen = std::collections::HashSet::new();
    terms.retain(|t| seen.insert(t.clone()));
    terms
}

/// Weighted reciprocal-rank fusion of ranked lists (each with its weight) (best first): keys with their fused score and
/// per-list ranks, best first (ties by key).
pub(crate) fn fuse(
    lists: &[(&[(ChunkKey, f64)], f64)],
    k: f64,
) -> Vec<(ChunkKey, f64, Vec<Option<usize>>)> {
    let mut fused: HashMap<ChunkKey, (f64, Vec<Option<usize>>)> = HashMap::new();
    for (l, (list, weight)) in lists.iter().enumerate() {
        for (rank, (key, _)) in list.iter().enumerate() {
            let entry = fused
                .entry(key.clone())
                .or_insert_with(|| (0.0, vec![None; lists.len()]));
            // A key listed twice in one list counts once, at its best rank.
            if entry.1[l].is_none() {
                entry.0 += weight / (k + (rank + 1) as f64);
                entry.1[l] = Some(rank + 1);
            }
        }
    }
    let mut out: Vec<_> = fused.into_iter().map(|(key, (s, r))| (key, s, r)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

impl Rag {
    /// The `k` best chunks for `query` in the project of `project_root`.
    pub async fn search(&self, project_root: &Path, query: &str, k: usize) -> Result<SearchResult> {
        if query.trim().is_empty() {
            return Err(Error::Invalid("the query is empty".into()));
        }
        if k == 0 || k > MAX_K {
            return Err(Error::Invalid(format!(
                "k must be between 1 and {MAX_K}, got {k}"
            )));
        }
        let (project, _) = Self::project(project_root)?;
        let files = self.store.files(&project).await?;
        let mut result = SearchResult {
            files: files.len(),
            ..SearchResult::default()
        };
        if files.is_empty() {
            return Ok(result);
        }
        let formats: HashMap<&str, &str> = files
            .iter()
            .map(|f| (f.path.as_str(), f.format.as_str()))
            .collect();
        let candidates = self.options.candidates.max(k);
        let text = self
            .store
            .search_text(&project, &query_terms(query), candidates)
            .await?;
        let mut dense = Vec::new();
        if let Some(embedder) = &self.embedder {
            result.dense_model = Some(embedder.model_id().to_string());
            match embedder.embed(&[query.to_string()]).await {
                Ok(mut v) if v.len() == 1 => {
                    let q = v.remove(0);
                    dense = self
                        .store
                        .search_vector(&project, embedder.model_id(), &q, candidates)
                        .await?;
                }
                Ok(v) => {
                    result.dense_error = Some(format!(
                        "the embedder returned {} vectors for 1 text",
                        v.len()
                    ))
                }
                Err(err) => {
                    tracing::warn!(project = %project, error = %err, "rag query embedding failed; full text only");
                    result.dense_error = Some(err.to_string());
                }
            }
        }
        for (key, score, ranks) in fuse(
            &[(&text, 1.0), (&dense, self.options.dense_weight)],
            self.options.rrf_k,
        )
        .into_iter()
        {
            if result.hits.len() >= k {
                break;
            }
            // A chunk replaced between the ranking and this read is left out.
            let Some(stored) = self.store.chunk(&project, &key.path, key.index).await? else {
                continue;
            };
            let c = stored.chunk;
            result.hits.push(Hit {
                citation: Citation::new(&key.path, c.index).to_string(),
                format: formats
                    .get(key.path.as_str())
                    .copied()
                    .unwrap_or("text")
                    .to_string(),
                path: key.path,
                chunk: c.index,
                start: c.start,
                end: c.end,
                line_start: c.line_start,
                line_end: c.line_end,
                score,
                text_rank: ranks.first().copied().flatten(),
                dense_rank: ranks.get(1).copied().flatten(),
                text: c.text,
            });
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use pretty_assertions::assert_eq;

    use super::*;

    fn key(p: &str, i: u32) -> ChunkKey {
        ChunkKey {
            path: p.into(),
            index: i,
        }
    }

    #[test]
    fn rrf_rewards_agreement() {
        let text = vec![(key("a", 1), 9.0), (key("b", 1), 8.0), (key("c", 1), 7.0)];
        let dense = vec![(key("c", 1), 0.9), (key("d", 1), 0.8)];
        let fused = fuse(&[(&text, 1.0), (&dense, 1.0)], 60.0);
        let order: Vec<&str> = fused.iter().map(|f| f.0.path.as_str()).collect();
        // c: 1/63 + 1/61 beats a: 1/61; b (1/62) and d (1/62) tie and go by key.
        assert_eq!(order, ["c", "a", "b", "d"]);
        assert_eq!(fused[0].2, vec![Some(3), Some(1)]);
        assert_eq!(fused[3].2, vec![None, Some(2)]);
    }

    #[test]
    fn terms_drop_stopwords_unless_nothing_is_left() {
        assert_eq!(
            query_terms("What is the capital of France?"),
            ["capital", "france"]
        );
        assert_eq!(query_terms("what is it"), ["what", "is", "it"]);
        assert_eq!(query_terms("foo foo bar"), ["foo", "bar"]);
    }
}
