//! What this store loads for the read views of `lumina_memory::retrieve::view` (which caches
//! them, refreshes them incrementally and loads each space's once at a time): the indexed
//! ledger rows after a position with their vectors and edges, each a range scan on
//! `event_id`; the semantic overlay; and, beside each view, the full-text statistics of
//! the same rows (brought up to date with the lengths of the new rows and of the rows whose
//! windows changed).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use lumina_memory::embed::codec::{or_skip, Quantized, VectorRow};
use lumina_memory::retrieve::snapshot::Rows;
use lumina_memory::retrieve::view::ViewSource;
use lumina_memory::semantic::job::NodeFilter;
use lumina_memory::semantic::overlay::{overlay, Overlay};
use lumina_memory::Result;
use tokio_postgres::GenericClient;

use super::db::{from_int, parse_vector, to_int, PgResultExt};
use super::fulltext::{self, FulltextStats};
use super::{ledger, semantic, PgMemory};

/// The store as the source of its read views (not part of its public interface).
pub(crate) struct Source<'a>(pub(crate) &'a PgMemory);

#[async_trait]
impl ViewSource for Source<'_> {
    /// The full-text statistics of the view's rows.
    type Extra = Arc<FulltextStats>;

    async fn revision(&self, space: &str) -> Result<u64> {
        let c = self.0.client().await?;
        Ok(semantic::compile_state(&**c, self.0.tenant(), space)
            .await?
            .revision)
    }

    async fn overlay(&self, space: &str) -> Result<Overlay> {
        let c = self.0.client().await?;
        let nodes = semantic::load_nodes(&**c, self.0.tenant(), space, NodeFilter::All).await?;
        let conflicts = semantic::load_conflicts(&**c, self.0.tenant(), space).await?;
        Ok(overlay(&nodes, &conflicts))
    }

    async fn rows(&self, generation: u64, space: &str, after: u64, until: u64) -> Result<Rows> {
        let c = self.0.client().await?;
        let tenant = self.0.tenant();
        Ok(Rows {
            rows: ledger::read(&**c, tenant, space, after, Some(until), usize::MAX).await?,
            vectors: vectors(&**c, tenant, generation, space, (after, until)).await?,
            edges: edges(&**c, tenant, generation, space, (after, until)).await?,
        })
    }

    async fn extra(
        &self,
        generation: u64,
        space: &str,
        until: u64,
        previous: Option<(&Arc<FulltextStats>, &[u64])>,
    ) -> Result<Arc<FulltextStats>> {
        let c = self.0.client().await?;
        let empty = FulltextStats::default();
        let (previous, changed) = previous.map_or((&empty, &[][..]), |(p, c)| (&**p, c));
        let at = (self.0.tenant(), generation, space);
        Ok(Arc::new(
            fulltext::advance_stats(&**c, at, until, previous, changed).await?,
        ))
    }
}

/// A space's vectors in a generation, of the events with `after < event_id <= until`, by
/// event id.
async fn vectors(
    c: &impl GenericClient,
    tenant: &str,
    generation: u64,
    space: &str,
    (after, until): (u64, u64),
) -> Result<Vec<VectorRow>> {
    let range = [to_int(after, "event id")?, to_int(until, "event id")?];
    let rows = in_range(
        c,
        "SELECT event_id, embedding::text, tokens FROM memory_vectors \
             WHERE tenant = $1 AND generation = $2 AND space = $3 \
             AND event_id > $4 AND event_id <= $5 ORDER BY event_id",
        (tenant, generation, space),
        range,
        "load vectors",
    )
    .await?;
    let mut windows = event_windows(c, tenant, generation, space, range).await?;
    let mut sparse = sparse_postings(c, tenant, generation, space, range).await?;
    rows.iter()
        .map(|r| {
            let text: String = r.try_get(1).pg("vector row")?;
            let event_id = from_int(r.try_get(0).pg("vector row")?, "event id")?;
            let tokens: Option<Vec<u8>> = r.try_get(2).pg("vector row")?;
            Ok(VectorRow {
                event_id,
                dense: parse_vector(&text)?,
                sparse: sparse.remove(&event_id),
                tokens: tokens.and_then(|b| or_skip(event_id, Quantized::from_bytes(&b))),
                spans: windows
                    .remove(&event_id)
                    .map(|v| Quantized::from_vectors(&v)),
            })
        })
        .collect()
}

/// A space's learned sparse weights in a generation, of the events in `range` (after, until],
/// by event, sorted by term. The table's key leads with the term, so this reads the space's
/// postings in the generation and keeps the range (only models with learned sparse weights
/// have any).
async fn sparse_postings(
    c: &impl GenericClient,
    tenant: &str,
    generation: u64,
    space: &str,
    range: [i64; 2],
) -> Result<HashMap<u64, Vec<(u32, f32)>>> {
    let rows = in_range(
        c,
        "SELECT event_id, term, weight FROM memory_sparse_postings \
             WHERE tenant = $1 AND generation = $2 AND space = $3 \
             AND event_id > $4 AND event_id <= $5 ORDER BY event_id, term",
        (tenant, generation, space),
        range,
        "load sparse postings",
    )
    .await?;
    let mut out: HashMap<u64, Vec<(u32, f32)>> = HashMap::new();
    for r in rows {
        let event_id = from_int(r.try_get(0).pg("sparse posting row")?, "event id")?;
        let term: i64 = r.try_get(1).pg("sparse posting row")?;
        let term = u32::try_from(term)
            .map_err(|_| lumina_memory::Error::Corrupt(format!("term {term}")))?;
        out.entry(event_id)
            .or_default()
            .push((term, r.try_get(2).pg("sparse posting row")?));
    }
    Ok(out)
}

/// A space's graph edges in a generation, of the events with `after < event_id <= until`,
/// ordered by event id, node (bytewise) and kind.
async fn edges(
    c: &impl GenericClient,
    tenant: &str,
    generation: u64,
    space: &str,
    (after, until): (u64, u64),
) -> Result<Vec<(u64, String, i64)>> {
    let range = [to_int(after, "event id")?, to_int(until, "event id")?];
    let rows = in_range(
        c,
        "SELECT event_id, node, kind FROM memory_edges \
         WHERE tenant = $1 AND generation = $2 AND space = $3 \
         AND event_id > $4 AND event_id <= $5 \
         ORDER BY event_id, node COLLATE \"C\", kind",
        (tenant, generation, space),
        range,
        "load edges",
    )
    .await?;
    rows.iter()
        .map(|r| {
            let kind: i16 = r.try_get(2).pg("edge row")?;
            Ok((
                from_int(r.try_get(0).pg("edge row")?, "event id")?,
                r.try_get(1).pg("edge row")?,
                i64::from(kind),
            ))
        })
        .collect()
}

/// A space's span vectors in a generation, of the events in `range` (after, until], by
/// event, in span order.
async fn event_windows(
    c: &impl GenericClient,
    tenant: &str,
    generation: u64,
    space: &str,
    range: [i64; 2],
) -> Result<HashMap<u64, Vec<Vec<f32>>>> {
    let rows = in_range(
        c,
        "SELECT event_id, embedding::text FROM memory_event_windows \
             WHERE tenant = $1 AND generation = $2 AND space = $3 \
             AND event_id > $4 AND event_id <= $5 ORDER BY event_id, span",
        (tenant, generation, space),
        range,
        "load event windows",
    )
    .await?;
    let mut out: HashMap<u64, Vec<Vec<f32>>> = HashMap::new();
    for r in rows {
        let event_id = from_int(r.try_get(0).pg("event window row")?, "event id")?;
        let text: String = r.try_get(1).pg("event window row")?;
        out.entry(event_id).or_default().push(parse_vector(&text)?);
    }
    Ok(out)
}

/// The rows of `sql`, whose parameters are `$1` tenant, `$2` generation, `$3` space and the
/// event-id range `$4 < event_id <= $5`.
async fn in_range(
    c: &impl GenericClient,
    sql: &str,
    (tenant, generation, space): (&str, u64, &str),
    range: [i64; 2],
    what: &str,
) -> Result<Vec<tokio_postgres::Row>> {
    c.query(
        sql,
        &[
            &tenant,
            &to_int(generation, "generation")?,
            &space,
            &range[0],
            &range[1],
        ],
    )
    .await
    .pg(what)
}
