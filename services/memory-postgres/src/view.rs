//! What this store loads for the read views of `lumina_memory::retrieve::view` (which caches
//! them, refreshes them incrementally and loads each space's once at a time): the indexed
//! ledger rows after a position with their vectors and edges, each a range scan on
//! `event_id`; the semantic overlay; and, beside each view, the full-text statistics of
//! the same rows (brought up to date with the lengths of the new rows and of the rows whose
//! windows changed).

use std::sync::Arc;

use async_trait::async_trait;
use lumina_memory::retrieve::snapshot::Rows;
use lumina_memory::retrieve::view::ViewSource;
use lumina_memory::semantic::job::NodeFilter;
use lumina_memory::semantic::overlay::{overlay, Overlay};
use lumina_memory::Result;

use super::fulltext::{self, FulltextStats};
use super::{index, ledger, semantic, PgMemory};

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
            vectors: index::vectors(&**c, tenant, generation, space, (after, until)).await?,
            edges: index::edges(&**c, tenant, generation, space, (after, until)).await?,
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
