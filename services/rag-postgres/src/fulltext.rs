//! Full-text search: BM25 over the chunks' `tsvector`s, scored as SQLite FTS5's `bm25()`
//! scores the local store's index (k1 = 1.2, b = 0.75, IDF `ln((N - df + 0.5) / (df + 0.5))`
//! floored at 1e-6), so fusion sees comparable lists from both stores.
//!
//! What differs from FTS5 (docs/rag.md#search): the analysis is PostgreSQL's `english`
//! configuration (Snowball stemming, stopwords dropped) rather than FTS5's
//! `porter unicode61 remove_diacritics 2` (Porter stemming, stopwords kept, diacritics
//! folded); a chunk's length is the chunker's token estimate (`tokens`) rather than FTS5's
//! token count; and the candidates are the chunks holding a query word, so a word's document
//! frequency is counted among them — exact, since every chunk holding the word is one.

use lumina_rag::{ChunkKey, Result};
use tokio_postgres::GenericClient;

use super::{scored_key, sql_limit, PgResultExt};

/// `$1` tenant, `$2` project, `$3` the words as an any-of `tsquery` text, `$4` the words
/// (for their lexemes), `$5` the limit. The query's lexemes are picked out of each matching
/// `tsvector` in C (`setweight` marks them, `ts_filter` keeps them: stored vectors carry no
/// weights) rather than by unnesting every lexeme; a lexeme's frequency is its positions.
const BM25: &str = "
WITH q AS (SELECT to_tsquery('english', $3) AS query),
lexes AS (
    SELECT array_agg(lex) AS a
    FROM unnest(tsvector_to_array(to_tsvector('english', $4))) AS lex
),
stats AS (
    SELECT count(*)::float8 AS n, greatest(COALESCE(avg(tokens), 1), 1)::float8 AS avgdl
    FROM rag_chunks WHERE tenant = $1 AND project = $2
),
docs AS MATERIALIZED (
    SELECT c.chunk_id, c.path, c.idx, c.tokens::float8 AS dl, c.text_tsv
    FROM rag_chunks c, q
    WHERE c.tenant = $1 AND c.project = $2 AND c.text_tsv @@ q.query
),
per AS MATERIALIZED (
    SELECT d.chunk_id, u.lexeme AS lex, array_length(u.positions, 1)::float8 AS f
    FROM docs d, lexes l, unnest(ts_filter(setweight(d.text_tsv, 'A', l.a), '{a}')) u
),
dfs AS (SELECT lex, count(*)::float8 AS df FROM per GROUP BY lex)
SELECT d.path, d.idx,
       sum(greatest(ln((s.n - dfs.df + 0.5) / (dfs.df + 0.5)), 1e-6)
           * per.f * 2.2 / (per.f + 1.2 * (0.25 + 0.75 * d.dl / s.avgdl)))::float8 AS score
FROM per JOIN dfs ON dfs.lex = per.lex JOIN docs d ON d.chunk_id = per.chunk_id, stats s
GROUP BY d.chunk_id, d.path, d.idx
ORDER BY score DESC, d.path, d.idx
LIMIT $5";

/// The query's words: letters and digits only (lowercased), so nothing of `tsquery`'s
/// syntax (`& | ! ( ) : * < > '`) gets through — they are joined with `|` here.
fn words(terms: &[String]) -> Vec<String> {
    terms
        .iter()
        .flat_map(|t| lumina_memory::text::words(t))
        .filter(|w| w.chars().all(char::is_alphanumeric))
        .collect()
}

/// Up to `limit` chunks holding any of `terms`, best first, with their BM25 scores.
pub(crate) async fn search(
    c: &impl GenericClient,
    tenant: &str,
    project: &str,
    terms: &[String],
    max: usize,
) -> Result<Vec<(ChunkKey, f64)>> {
    let words = words(terms);
    if words.is_empty() || max == 0 {
        return Ok(Vec::new());
    }
    // Not a cached prepared statement: the generic plan (no parameter values) cannot use
    // the words' selectivity.
    let rows = c
        .query(
            BM25,
            &[
                &tenant,
                &project,
                &words.join(" | "),
                &words.join(" "),
                &sql_limit(max),
            ],
        )
        .await
        .pg("full text query")?;
    rows.iter().map(|r| scored_key(r, "full text")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_carry_no_syntax() {
        let terms: Vec<String> = ["keys*", "NEAR(keys", "col:keys", "a|b", "it's", "!x"]
            .iter()
            .map(|t| t.to_string())
            .collect();
        assert_eq!(
            words(&terms),
            ["keys", "near", "keys", "col", "keys", "a", "b", "its", "x"]
        );
    }
}
