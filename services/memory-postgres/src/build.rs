//! The PostgreSQL store's side of the index job (`lumina_memory::build`, the one job of
//! every store): generations, checkpoints and the published pointer in their tables, each
//! batch in one transaction with its checkpoint and under the writer's fence. A space
//! whose indexed rows reach the exact-search threshold gets its HNSW index. One builder per
//! tenant runs at a time across the cluster (`lock.rs`); a query that finds another
//! instance building answers from the published index instead of waiting.

use async_trait::async_trait;

use super::lock::BuildLock;
use super::{index, ledger, PgMemory};
use lumina_memory::build::{IndexBackend, IndexBatch, LedgerRow, Position};
use lumina_memory::derive::{derive, edges};
use lumina_memory::embed::EmbeddingProvider;
use lumina_memory::{BuildLimits, LedgerHead, Result, SyncReport};

/// Rows indexed by one job run from which the planner statistics of the memory tables are
/// refreshed at its end.
const ANALYZE_AFTER_ROWS: u64 = 1_000;

#[async_trait]
impl IndexBackend for PgMemory {
    type BuilderLock = BuildLock;

    fn fingerprint(&self) -> &str {
        &self.inner.fingerprint
    }

    fn embedder(&self) -> Option<&dyn EmbeddingProvider> {
        self.inner.embedder.as_deref()
    }

    fn span_vectors(&self) -> bool {
        self.inner.options.index.span_vectors
    }

    fn build_limits(&self) -> BuildLimits {
        self.inner.options.build
    }

    fn maintenance(&self) -> &tokio::sync::Mutex<()> {
        &self.inner.maintenance
    }

    async fn lock_builder(&self) -> Result<BuildLock> {
        BuildLock::acquire(self.client().await?, self.tenant()).await
    }

    async fn try_lock_builder(&self) -> Result<Option<BuildLock>> {
        BuildLock::try_acquire(self.client().await?, self.tenant()).await
    }

    async fn unlock_builder(&self, lock: BuildLock) -> Result<()> {
        lock.release().await
    }

    /// After a bulk index run, `ANALYZE`s the tables the read path queries: until
    /// autovacuum gets to them, a bulk-loaded space has no statistics and the full-text
    /// query's plans are several times slower (measured on LoCoMo: p50 57 ms before, see
    /// docs/benchmarks.md). A failure (e.g. a role that may not analyze) is a warning: the
    /// data is already there.
    async fn after_run(&self, report: &SyncReport) {
        if report.rows_indexed < ANALYZE_AFTER_ROWS {
            return;
        }
        let result = match self.client().await {
            Ok(c) => c
                .batch_execute("ANALYZE memory_evidence, memory_windows, memory_vectors")
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(error) = result {
            tracing::warn!(%error, "could not refresh the memory tables' statistics");
        }
    }

    async fn position(&self, space: &str) -> Result<Position> {
        let c = self.client().await?;
        let tenant = self.tenant();
        let ledger = ledger::head(&**c, tenant, space).await?;
        let published = match index::publication(&**c, tenant).await? {
            Some((generation, fingerprint)) => {
                let indexed = index::checkpoint(&**c, tenant, generation, space).await?;
                Some((generation, fingerprint, indexed))
            }
            None => None,
        };
        Ok(Position { ledger, published })
    }

    async fn publication(&self) -> Result<Option<(u64, String)>> {
        let c = self.client().await?;
        index::publication(&**c, self.tenant()).await
    }

    async fn spaces(&self) -> Result<Vec<String>> {
        let c = self.client().await?;
        ledger::spaces(&**c, self.tenant()).await
    }

    async fn prefix(&self, generation: u64, space: &str) -> Result<(LedgerHead, Option<String>)> {
        let c = self.client().await?;
        let tenant = self.tenant();
        let cp = index::checkpoint(&**c, tenant, generation, space).await?;
        let chain = ledger::chain_at(&**c, tenant, space, cp.last_event_id).await?;
        Ok((cp, chain))
    }

    async fn building(&self, fingerprint: &str) -> Result<u64> {
        let tenant = self.tenant();
        let mut c = self.client().await?;
        match index::building(&**c, tenant).await? {
            Some((g, f)) if f == fingerprint => Ok(g),
            Some((g, _)) => {
                index::drop_generation(&mut c, tenant, g).await?;
                index::create_generation(&**c, tenant, fingerprint).await
            }
            None => index::create_generation(&**c, tenant, fingerprint).await,
        }
    }

    async fn pending(
        &self,
        generation: u64,
        space: &str,
        limit: usize,
    ) -> Result<(LedgerHead, Vec<LedgerRow>)> {
        let c = self.client().await?;
        let tenant = self.tenant();
        let cp = index::checkpoint(&**c, tenant, generation, space).await?;
        let rows = ledger::read(&**c, tenant, space, cp.last_event_id, None, limit).await?;
        Ok((cp, rows))
    }

    async fn apply(&self, batch: IndexBatch<'_>) -> Result<()> {
        let Some(last) = batch.rows.last() else {
            return Ok(());
        };
        let head = LedgerHead {
            last_event_id: last.evidence.event_id,
            chain: last.chain.clone(),
            rows: batch.before.rows + batch.rows.len() as u64,
        };
        let mut c = self.client().await?;
        index::apply_batch(
            &mut c,
            self.tenant(),
            self.inner.options.fence,
            index::Batch {
                generation: batch.generation,
                space: batch.space,
                last: &head,
                rows: batch
                    .rows
                    .iter()
                    .map(|r| (r.evidence.event_id, r.evidence.row.context.clone()))
                    .collect(),
                edges: batch
                    .rows
                    .iter()
                    .flat_map(|r| {
                        let e = &r.evidence;
                        edges(e, &derive(e))
                            .into_iter()
                            .map(|(node, kind)| (e.event_id, node, kind))
                    })
                    .collect(),
                vectors: batch.vectors,
                window: self.inner.options.index.window,
            },
        )
        .await?;
        Ok(())
    }

    async fn space_indexed(&self, generation: u64, space: &str, rows: u64) -> Result<()> {
        self.ensure_hnsw(generation, space, rows).await
    }

    async fn publish(&self, generation: u64, fingerprint: &str) -> Result<()> {
        {
            let mut c = self.client().await?;
            index::publish(&mut c, self.tenant(), generation, fingerprint).await?;
        }
        self.clear_views();
        Ok(())
    }
}
