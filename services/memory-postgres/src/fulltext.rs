//! The full-text candidate list: BM25F over the ledger's body `tsvector` (a generated
//! column with a GIN index) and each generation's window `tsvector` (`memory_windows`,
//! refreshed by index batches), scored as SQLite FTS5's `bm25()` scores its body and
//! window columns.

use std::collections::HashMap;

use tokio_postgres::GenericClient;

use super::db::{from_int, to_int, PgResultExt};
use lumina_memory::Result;

/// Full-text length statistics of a view's rows, for [`fulltext`]'s BM25: the rows, the sum
/// of their body lexemes and each row's window lexemes. Kept up to date as the view is
/// refreshed ([`advance_stats`]), so a refresh reads the lengths of the new rows and of the
/// rows whose windows changed, not of every row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FulltextStats {
    /// The last event the statistics cover.
    until: u64,
    rows: u64,
    body: i64,
    /// Event id → distinct lexemes of its window (`memory_windows`; 0 without one).
    windows: HashMap<u64, i64>,
    window_sum: i64,
}

impl FulltextStats {
    /// (rows, average distinct lexemes per row over body and window; 1 without rows).
    pub(crate) fn bm25(&self) -> (f64, f64) {
        let avg = if self.rows == 0 {
            1.0
        } else {
            (self.body + self.window_sum) as f64 / self.rows as f64
        };
        (self.rows as f64, avg)
    }
}

/// `previous` brought to `until` in a generation: the rows after its position are counted
/// and the windows of the `changed` rows re-read. From the default (empty) statistics, every
/// row of the space up to `until`.
pub(crate) async fn advance_stats(
    c: &impl GenericClient,
    (tenant, generation, space): (&str, u64, &str),
    until: u64,
    previous: &FulltextStats,
    changed: &[u64],
) -> Result<FulltextStats> {
    let changed: Vec<i64> = changed
        .iter()
        .map(|&id| to_int(id, "event id"))
        .collect::<Result<_>>()?;
    let rows = c
        .query(
            "SELECT e.event_id, length(e.body_tsv), COALESCE(length(w.window_tsv), 0) \
             FROM memory_evidence e LEFT JOIN memory_windows w ON w.tenant = e.tenant \
             AND w.generation = $2 AND w.space = e.space AND w.event_id = e.event_id \
             WHERE e.tenant = $1 AND e.space = $3 AND e.event_id <= $4 \
             AND (e.event_id > $5 OR e.event_id = ANY($6))",
            &[
                &tenant,
                &to_int(generation, "generation")?,
                &space,
                &to_int(until, "event id")?,
                &to_int(previous.until, "event id")?,
                &changed,
            ],
        )
        .await
        .pg("full text stats")?;
    let mut stats = previous.clone();
    stats.until = until;
    for r in rows {
        let id = from_int(r.try_get(0).pg("full text stats")?, "event id")?;
        let body: i32 = r.try_get(1).pg("full text stats")?;
        let window: i32 = r.try_get(2).pg("full text stats")?;
        if id > previous.until {
            stats.rows += 1;
            stats.body += i64::from(body);
        }
        let old = stats.windows.insert(id, i64::from(window)).unwrap_or(0);
        stats.window_sum += i64::from(window) - old;
    }
    Ok(stats)
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
    /// [`FulltextStats::bm25`] of the view's rows.
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
    use lumina_memory::conformance::{sample_conversation, SPACE};
    use lumina_memory::{MemoryStore, RecallQuery};
    use lumina_testkit::postgres::PgServer;

    use super::*;
    use crate::{PgMemory, PgMemoryOptions};

    #[test]
    fn words_of_an_fts_query() {
        assert_eq!(query_words("\"dog\" OR \"water\""), vec!["dog", "water"]);
        assert!(query_words("").is_empty());
    }

    /// A fresh, migrated database and a store (tenant `t1`) over it, with the URL.
    async fn store() -> (PgMemory, String) {
        let url = tokio::task::spawn_blocking(|| {
            PgServer::shared()
                .unwrap()
                .create_unique_database("fulltext")
                .unwrap()
        })
        .await
        .unwrap();
        let journal = lumina_journal::postgres::PgJournal::connect(&url, 1).unwrap();
        journal.migrate().await.unwrap();
        let options = PgMemoryOptions {
            tenant: "t1".into(),
            pool_size: 2,
            ..PgMemoryOptions::default()
        };
        (PgMemory::connect(&url, options, None).unwrap(), url)
    }

    /// The statistics of a space's current view (refreshing it first if needed).
    async fn view_stats(
        store: &PgMemory,
    ) -> (lumina_memory::IndexStatus, std::sync::Arc<FulltextStats>) {
        let status = store.status(SPACE).await.unwrap();
        let source = crate::view::Source(store);
        let loaded = store
            .inner
            .views
            .view(&source, SPACE, status.generation, &status.indexed)
            .await
            .unwrap();
        (status, loaded.view.extra)
    }

    /// A refreshed view's statistics (the new rows' lengths added, the changed windows
    /// re-read) equal those read from every row.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refreshed_statistics_equal_statistics_from_scratch() {
        let (store, _) = store().await;
        store.append(sample_conversation(SPACE)).await.unwrap();
        store
            .recall(&RecallQuery::new(SPACE, "Biscuit"))
            .await
            .unwrap();
        let (_, before) = view_stats(&store).await;
        // Turns at the end of both sessions: the windows of their last turns change.
        let more: Vec<_> = sample_conversation(SPACE)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| [1, 3, 8].contains(i))
            .map(|(i, mut row)| {
                row.source_id = format!("more:{i}");
                row.turn_order += 10;
                row
            })
            .collect();
        store.append(more).await.unwrap();
        let recall = store
            .recall(&RecallQuery::new(SPACE, "Biscuit"))
            .await
            .unwrap();
        assert_eq!(recall.stats.view, lumina_memory::ViewLoad::Refreshed);
        let (status, after) = view_stats(&store).await;
        let c = store.client().await.unwrap();
        let scratch = advance_stats(
            &**c,
            ("t1", status.generation, SPACE),
            status.indexed.last_event_id,
            &FulltextStats::default(),
            &[],
        )
        .await
        .unwrap();
        assert_eq!(*after, scratch);
        assert_eq!(after.rows, 13);
        let changed = before
            .windows
            .iter()
            .filter(|(id, w)| after.windows.get(id) != Some(w))
            .count();
        assert!(changed > 0, "old windows changed: {before:?} {after:?}");
    }

    /// An index batch may write windows (and the ledger hold rows) past the event a view
    /// reads up to. Those rows must not be candidates nor count in the document frequency:
    /// with them a word could be in more rows than the view's statistics counted, the IDF's
    /// ratio went negative and recall failed under load in the cluster with "cannot take
    /// logarithm of a negative number".
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rows_past_the_view_are_neither_candidates_nor_counted() {
        let (store, url) = store().await;
        store.append(sample_conversation(SPACE)).await.unwrap();
        // Indexes all ten rows: every window of the generation exists.
        store
            .recall(&RecallQuery::new(SPACE, "Biscuit"))
            .await
            .unwrap();

        let (c, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let ids: Vec<i64> = c
            .query(
                "SELECT event_id FROM memory_evidence WHERE tenant = 't1' ORDER BY event_id",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let generation: i64 = c
            .query_one(
                "SELECT max(generation) FROM memory_windows WHERE tenant = 't1'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let generation = u64::try_from(generation).unwrap();
        // A view of the first four rows; "Biscuit" is in the fourth and the fifth, and in
        // the windows around them.
        let until = u64::try_from(ids[3]).unwrap();
        let stats = advance_stats(
            &c,
            ("t1", generation, SPACE),
            until,
            &FulltextStats::default(),
            &[],
        )
        .await
        .unwrap()
        .bm25();
        assert_eq!(stats.0, 4.0);
        let hits = fulltext(
            &c,
            "t1",
            &FulltextQuery {
                generation,
                space: SPACE,
                until,
                words: &["biscuit"],
                stats,
                window_weight: 0.5,
                limit: 50,
            },
        )
        .await
        .unwrap();
        assert!(!hits.is_empty());
        assert!(
            hits.iter().all(|(id, score)| *id <= until && *score > 0.0),
            "{hits:?} (view up to {until})"
        );
    }
}
