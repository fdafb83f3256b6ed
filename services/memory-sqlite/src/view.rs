//! What this store loads for the read views of `lumina_memory::retrieve::view` (which caches
//! them, refreshes them incrementally and loads each space's once at a time): the indexed
//! ledger rows after a position (`ledger.sqlite`) with their edges (`index.sqlite`) and
//! vectors (the model's file), each a range scan on the event id, and the semantic overlay.
//! The view derives its postings and windows from the rows, as the PostgreSQL store's does.

use async_trait::async_trait;
use rusqlite::params;

use super::db::{from_sql_int, to_sql_int, DbResultExt};
use super::index::{table, vectors_table, IndexDb};
use super::SqliteMemory;
use lumina_memory::embed::codec::{decode_sparse, or_skip, Quantized, VectorRow};
use lumina_memory::retrieve::snapshot::Rows;
use lumina_memory::retrieve::view::ViewSource;
use lumina_memory::semantic::job::NodeFilter;
use lumina_memory::semantic::overlay::{overlay, Overlay};
use lumina_memory::Result;

/// The store as the source of its read views (not part of its public interface).
pub(crate) struct Source<'a>(pub(crate) &'a SqliteMemory);

#[async_trait]
impl ViewSource for Source<'_> {
    type Extra = ();

    async fn revision(&self, space: &str) -> Result<u64> {
        let space = space.to_owned();
        self.0
            .blocking(move |inner| Ok(inner.index().compile_state(&space)?.revision))
            .await
    }

    async fn overlay(&self, space: &str) -> Result<Overlay> {
        let space = space.to_owned();
        self.0
            .blocking(move |inner| {
                let index = inner.index();
                let nodes = index.load_nodes(&space, NodeFilter::All)?;
                let conflicts = index.load_conflicts(&space)?;
                Ok(overlay(&nodes, &conflicts))
            })
            .await
    }

    async fn rows(&self, generation: u64, space: &str, after: u64, until: u64) -> Result<Rows> {
        let space = space.to_owned();
        self.0
            .blocking(move |inner| {
                let rows = inner.ledger().range(&space, after, until)?;
                let index = inner.index();
                Ok(Rows {
                    rows,
                    vectors: index.vectors(generation, &space, after, until)?,
                    edges: index.edges(generation, &space, after, until)?,
                })
            })
            .await
    }

    async fn extra(
        &self,
        _generation: u64,
        _space: &str,
        _until: u64,
        _previous: Option<(&(), &[u64])>,
    ) -> Result<()> {
        Ok(())
    }
}

impl IndexDb {
    /// The graph edges of a space's events with `after < event_id <= until` in a
    /// generation, by event id, node (bytewise) and kind.
    fn edges(
        &self,
        generation: u64,
        space: &str,
        after: u64,
        until: u64,
    ) -> Result<Vec<(u64, String, i64)>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT src, dst, kind FROM {} WHERE space = ?1 AND src > ?2 AND src <= ?3 \
                 ORDER BY src, dst, kind",
                table(generation, "edges")
            ))
            .db("prepare load edges")?;
        let rows = stmt
            .query_map(
                params![
                    space,
                    to_sql_int(after, "event id")?,
                    to_sql_int(until, "event id")?
                ],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get(2)?)),
            )
            .db("load edges")?;
        rows.map(|r| {
            let (src, dst, kind) = r.db("edge row")?;
            Ok((from_sql_int(src, "event id")?, dst, kind))
        })
        .collect()
    }

    /// The vectors of a space's events with `after < event_id <= until` in a generation,
    /// by event id (none without a model).
    fn vectors(
        &self,
        generation: u64,
        space: &str,
        after: u64,
        until: u64,
    ) -> Result<Vec<VectorRow>> {
        if !self.vectors {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT event_id, vector, sparse, tokens, spans FROM {} \
                 WHERE event_id > ?1 AND event_id <= ?2 AND space = ?3 ORDER BY event_id",
                vectors_table(generation)
            ))
            .db("prepare load vectors")?;
        let rows = stmt
            .query_map(
                params![
                    to_sql_int(after, "event id")?,
                    to_sql_int(until, "event id")?,
                    space
                ],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, Vec<u8>>(1)?,
                        r.get::<_, Option<Vec<u8>>>(2)?,
                        r.get::<_, Option<Vec<u8>>>(3)?,
                        r.get::<_, Option<Vec<u8>>>(4)?,
                    ))
                },
            )
            .db("load vectors")?;
        rows.map(|r| {
            let (id, blob, sparse, tokens, spans) = r.db("vector row")?;
            let event_id = from_sql_int(id, "event id")?;
            let decoded =
                |b: Option<Vec<u8>>| b.and_then(|b| or_skip(event_id, Quantized::from_bytes(&b)));
            Ok(VectorRow {
                event_id,
                dense: blob
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
                sparse: sparse.and_then(|b| or_skip(event_id, decode_sparse(&b))),
                tokens: decoded(tokens),
                spans: decoded(spans),
            })
        })
        .collect()
    }
}
