//! What this store loads for the read views of `lumina_memory::retrieve::view` (which caches
//! them, refreshes them incrementally and loads each space's once at a time): the indexed
//! ledger rows after a position with their vectors and edges, each a range scan on
//! `event_id`; the semantic overlay; and, beside each view, the full-text statistics of
//! the same rows.

use async_trait::async_trait;
use lumina_memory::retrieve::snapshot::Rows;
use lumina_memory::retrieve::view::ViewSource;
use lumina_memory::semantic::job::NodeFilter;
use lumina_memory::semantic::overlay::{overlay, Overlay};
use lumina_memory::Result;

use super::{fulltext, index, ledger, semantic, PgMemory};

#[async_trait]
impl ViewSource for PgMemory {
    /// [`fulltext::fulltext_stats`] of the view's rows.
    type Extra = (f64, f64);

    async fn revision(&self, space: &str) -> Result<u64> {
        let c = self.client().await?;
        Ok(semantic::compile_state(&**c, self.tenant(), space)
            .await?
            .revision)
    }

    async fn overlay(&self, space: &str) -> Result<Overlay> {
        let c = self.client().await?;
        let nodes = semantic::load_nodes(&**c, self.tenant(), space, NodeFilter::All).await?;
        let conflicts = semantic::load_conflicts(&**c, self.tenant(), space).await?;
        Ok(overlay(&nodes, &conflicts))
    }

    async fn rows(&self, generation: u64, space: &str, after: u64, until: u64) -> Result<Rows> {
        let c = self.client().await?;
        let tenant = self.tenant();
        Ok(Rows {
            rows: ledger::read(&**c, tenant, space, after, Some(until), usize::MAX).await?,
            vectors: index::vectors(&**c, tenant, generation, space, (after, until)).await?,
            edges: index::edges(&**c, tenant, generation, space, (after, until)).await?,
        })
    }

    async fn extra(&self, generation: u64, space: &str, until: u64) -> Result<(f64, f64)> {
        let c = self.client().await?;
        fulltext::fulltext_stats(&**c, self.tenant(), generation, space, until).await
    }
}
