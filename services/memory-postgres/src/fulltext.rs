//! The full-text candidate list: BM25F over the ledger's body `tsvector` (a generated
//! column with a GIN index) and each generation's window `tsvector` (`memory_windows`,
//! refreshed by index batches), scored as SQLite FTS5's `bm25()` scores its body and
//! window columns.

use tokio_postgres::GenericClient;

use super::db::{from_int, to_int, PgResultExt};
use lumina_memory::Result;

/// Full-text length statistics of a space's rows up to `until` in a generation: (rows,
/// average distinct lexemes per row over body and window), for [`fulltext`]'s BM25.
pub(crate) async fn fulltext_stats(
    c: &impl GenericClient,
    tenant: &str,
    generation: u64,
    space: &str,
    until: u64,
) -> Result<(f64, f64)> {
    let row = c
        .query_one(
            "SELECT count(*)::float8, \
             COALESCE(avg(length(e.body_tsv) + COALESCE(length(w.window_tsv), 0)), 1)::float8 \
             FROM memory_evidence e LEFT JOIN memory_windows w ON w.tenant = e.tenant \
             AND w.generation = $2 AND w.space = e.space AND w.event_id = e.event_id \
             WHERE e.tenant = $1 AND e.space = $3 AND e.event_id <= $4",
            &[
                &tenant,
                &to_int(generation, "generation")?,
                &space,
                &to_int(until, "event id")?,
            ],
        )
        .await
        .pg("full text stats")?;
    Ok((
        row.try_get(0).pg("full text stats")?,
        row.try_get(1).pg("full text stats")?,
    ))
}

/// BM25F over the ledger's body `tsvector` and the generation's window `tsvector`, as
/// SQLite FTS5's `bm25()` with column weights (k1 = 1.2, b = 0.75, IDF floored at 1e-6;
/// PostgreSQL's own ranking functions have no inverse document frequency). The GIN
/// indexes find the rows whose body or window holds any query word; every row holding a
/// word is among them, so a word's document frequency is the number of those rows whose
/// body or window holds it (counted from the term frequencies, with no second match).
/// The query's lexemes are picked out of each `tsvector` in C (`setweight` marks them,
/// `ts_filter` keeps them: the stored vectors carry no weights) rather than by unnesting
/// every lexeme, which halves the query's time. Lengths are distinct lexemes. Only rows up to
/// the view's last indexed event count (a generation's windows may already cover later
/// ones), and the IDF's logarithm is never taken of a ratio at or below 1 (the floor
/// applies there anyway): a word in more rows than the statistics counted scores the floor
/// instead of failing the query.
const FULLTEXT_BM25: &str = "
WITH terms AS (
    SELECT lex FROM unnest(tsvector_to_array(to_tsvector('english', $3))) AS lex
),
matched AS (
    SELECT event_id FROM memory_evidence
    WHERE tenant = $1 AND space = $2 AND event_id <= $4
      AND body_tsv @@ to_tsquery('english', $5)
    UNION
    SELECT event_id FROM memory_windows
    WHERE tenant = $1 AND generation = $6 AND space = $2 AND event_id <= $4
      AND window_tsv @@ to_tsquery('english', $5)
),
docs AS MATERIALIZED (
    SELECT m.event_id, e.body_tsv, COALESCE(w.window_tsv, ''::tsvector) AS window_tsv
    FROM matched m
    JOIN memory_evidence e ON e.tenant = $1 AND e.space = $2 AND e.event_id = m.event_id
    LEFT JOIN memory_windows w ON w.tenant = $1 AND w.generation = $6 AND w.space = $2
         AND w.event_id = m.event_id
),
lexes AS (SELECT array_agg(lex) AS a FROM terms),
tf AS (
    SELECT d.event_id, u.lexeme AS lex, array_length(u.positions, 1)::float8 AS n
    FROM docs d, lexes l, unnest(ts_filter(setweight(d.body_tsv, 'A', l.a), '{a}')) u
    UNION ALL
    SELECT d.event_id, u.lexeme, $9::float8 * array_length(u.positions, 1)
    FROM docs d, lexes l, unnest(ts_filter(setweight(d.window_tsv, 'A', l.a), '{a}')) u
),
per AS MATERIALIZED (SELECT event_id, lex, sum(n) AS f FROM tf GROUP BY event_id, lex),
dfs AS (SELECT lex, count(*)::float8 AS df FROM per GROUP BY lex),
lens AS (
    SELECT event_id, (length(body_tsv) + length(window_tsv))::float8 AS dl FROM docs
)
SELECT per.event_id,
       sum(greatest(ln(greatest(($7::float8 - dfs.df + 0.5) / (dfs.df + 0.5), 1.0)), 1e-6)
           * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * dl / $8::float8)))::float4 AS s
FROM per JOIN lens ON lens.event_id = per.event_id JOIN dfs ON dfs.lex = per.lex
GROUP BY per.event_id
ORDER BY s DESC, per.event_id
LIMIT $10";

/// A full-text query: the query words and the snapshot-time statistics.
pub(crate) struct FulltextQuery<'a> {
    pub generation: u64,
    pub space: &'a str,
    /// The last indexed event id.
    pub until: u64,
    pub words: &'a [&'a str],
    /// [`fulltext_stats`] of the same rows.
    pub stats: (f64, f64),
    pub window_weight: f64,
    pub limit: usize,
}

/// Top `limit` full-text matches (event id, BM25F), best first.
pub(crate) async fn fulltext(
    c: &impl GenericClient,
    tenant: &str,
    q: &FulltextQuery<'_>,
) -> Result<Vec<(u64, f32)>> {
    if q.words.is_empty() {
        return Ok(Vec::new());
    }
    // Not a cached prepared statement: PostgreSQL's generic plan for it (no parameter
    // values) is several times slower than the plan for the query's own words and space.
    let rows = c
        .query(
            FULLTEXT_BM25,
            &[
                &tenant,
                &q.space,
                &q.words.join(" "),
                &to_int(q.until, "event id")?,
                &q.words.join(" | "),
                &to_int(q.generation, "generation")?,
                &q.stats.0,
                &q.stats.1.max(1.0),
                &q.window_weight,
                &i64::try_from(q.limit).unwrap_or(i64::MAX),
            ],
        )
        .await
        .pg("full text query")?;
    rows.iter()
        .map(|r| {
            let id = from_int(r.try_get(0).pg("full text row")?, "event id")?;
            let score: f32 = r.try_get(1).pg("full text row")?;
            Ok((id, score))
        })
        .collect()
}
