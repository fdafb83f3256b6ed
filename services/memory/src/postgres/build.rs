//! The index job of the PostgreSQL store: alignment checks, catch-up of new ledger rows
//! and resumable rebuilds into a new generation with atomic publication. The same
//! algorithm as the SQLite store's (`sqlite/build.rs`): a rebuild is needed when the
//! published fingerprint differs from the store's or a space's checkpoint is not a prefix
//! of its ledger; otherwise new rows are indexed into the published generation, each
//! batch in one transaction with its checkpoint and under the writer's fence. A space
//! whose indexed rows reach the exact-search threshold gets its HNSW index. One builder per
//! tenant runs at a time across the cluster (`lock.rs`); a query that finds another
//! instance building answers from the published index instead of waiting.

use tracing::info;

use super::lock::BuildLock;
use super::{index, ledger, PgMemory};
use crate::derive::{derive, edges};
use crate::embed::codec::vector_rows;
use crate::{BuildLimits, IndexStatus, LedgerHead, Result, SyncReport};

/// What the alignment check found and did.
#[derive(Debug, Clone)]
pub(super) struct Aligned {
    pub generation: u64,
    pub indexed: LedgerHead,
    pub rows: u64,
    pub rebuilt: bool,
}

/// The alignment state of one space.
pub(super) async fn status(store: &PgMemory, space: &str) -> Result<IndexStatus> {
    let c = store.client().await?;
    let tenant = store.tenant();
    let ledger = ledger::head(&**c, tenant, space).await?;
    let (generation, fingerprint) = index::publication(&**c, tenant)
        .await?
        .unwrap_or((0, String::new()));
    let indexed = if generation == 0 {
        LedgerHead::default()
    } else {
        index::checkpoint(&**c, tenant, generation, space).await?
    };
    Ok(IndexStatus {
        space: space.to_owned(),
        generation,
        fingerprint,
        expected_fingerprint: store.inner.fingerprint.clone(),
        indexed,
        ledger,
    })
}

/// The alignment check of the read path: a fast check without the maintenance lock, then
/// catch-up or rebuild under it when needed.
pub(super) async fn align(store: &PgMemory, space: &str) -> Result<Aligned> {
    let state = status(store, space).await?;
    if state.aligned() {
        return Ok(Aligned {
            generation: state.generation,
            indexed: state.indexed,
            rows: 0,
            rebuilt: false,
        });
    }
    let _guard = store.inner.maintenance.lock().await;
    // Another instance is building: answer from what is published now rather than wait.
    let Some(lock) = BuildLock::try_acquire(store.client().await?, store.tenant()).await? else {
        return Ok(Aligned {
            generation: state.generation,
            indexed: state.indexed,
            rows: 0,
            rebuilt: false,
        });
    };
    let report = sync_locked(
        store,
        BuildLimits {
            stop_after_rows: None,
            ..store.inner.options.build
        },
    )
    .await?;
    lock.release().await?;
    refresh_statistics(store, &report).await;
    let state = status(store, space).await?;
    Ok(Aligned {
        generation: state.generation,
        indexed: state.indexed,
        rows: report.rows_indexed,
        rebuilt: report.rebuilt,
    })
}

/// One run of the index job over every space of the tenant.
pub(super) async fn sync(store: &PgMemory, limits: BuildLimits) -> Result<SyncReport> {
    let _guard = store.inner.maintenance.lock().await;
    let lock = BuildLock::acquire(store.client().await?, store.tenant()).await?;
    let report = sync_locked(store, limits).await?;
    lock.release().await?;
    refresh_statistics(store, &report).await;
    Ok(report)
}

/// Rows indexed by one job run from which the planner statistics of the memory tables are
/// refreshed at its end.
const ANALYZE_AFTER_ROWS: u64 = 1_000;

/// After a bulk index run, `ANALYZE`s the tables the read path queries: until autovacuum
/// gets to them, a bulk-loaded space has no statistics and the full-text query's plans are
/// several times slower (measured on LoCoMo: p50 57 ms before, see docs/benchmarks.md).
/// A failure (e.g. a role that may not analyze) is a warning: the data is already there.
async fn refresh_statistics(store: &PgMemory, report: &SyncReport) {
    if report.rows_indexed < ANALYZE_AFTER_ROWS {
        return;
    }
    let result = match store.client().await {
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

async fn sync_locked(store: &PgMemory, limits: BuildLimits) -> Result<SyncReport> {
    let tenant = store.tenant();
    let (published, spaces) = {
        let c = store.client().await?;
        (
            index::publication(&**c, tenant).await?,
            ledger::spaces(&**c, tenant).await?,
        )
    };
    let generation = match published {
        Some((g, f)) if f == store.inner.fingerprint => g,
        _ => return rebuild(store, limits).await,
    };
    let mut report = SyncReport {
        generation,
        ..SyncReport::default()
    };
    let mut used = 0usize;
    for space in spaces {
        let prefix_ok = {
            let c = store.client().await?;
            let cp = index::checkpoint(&**c, tenant, generation, &space).await?;
            ledger::chain_at(&**c, tenant, &space, cp.last_event_id).await? == Some(cp.chain)
        };
        if !prefix_ok {
            info!(space = %space, "indexed ledger prefix does not match, rebuilding");
            return rebuild(store, limits).await;
        }
        let (rows, paused) = index_space(store, generation, &space, limits, &mut used).await?;
        report.rows_indexed += rows;
        if paused {
            report.paused = true;
            return Ok(report);
        }
    }
    Ok(report)
}

/// Builds (or resumes building) a generation for the current fingerprint and publishes it
/// when every space has reached its ledger head.
async fn rebuild(store: &PgMemory, limits: BuildLimits) -> Result<SyncReport> {
    let tenant = store.tenant();
    let fingerprint = store.inner.fingerprint.clone();
    let (generation, spaces) = {
        let mut c = store.client().await?;
        let generation = match index::building(&**c, tenant).await? {
            Some((g, f)) if f == fingerprint => g,
            Some((g, _)) => {
                index::drop_generation(&mut c, tenant, g).await?;
                index::create_generation(&**c, tenant, &fingerprint).await?
            }
            None => index::create_generation(&**c, tenant, &fingerprint).await?,
        };
        (generation, ledger::spaces(&**c, tenant).await?)
    };
    info!(tenant, generation, fingerprint = %fingerprint, "building memory index generation");
    let mut report = SyncReport {
        generation,
        rebuilt: true,
        ..SyncReport::default()
    };
    let mut used = 0usize;
    for space in spaces {
        let (rows, paused) = index_space(store, generation, &space, limits, &mut used).await?;
        report.rows_indexed += rows;
        if paused {
            report.paused = true;
            return Ok(report);
        }
    }
    {
        let mut c = store.client().await?;
        index::publish(&mut c, tenant, generation, &fingerprint).await?;
    }
    store.clear_snapshots();
    info!(
        tenant,
        generation,
        rows = report.rows_indexed,
        "memory index generation published"
    );
    report.published = true;
    Ok(report)
}

/// Indexes a space's rows after the generation's checkpoint, batch by batch. Returns the
/// rows indexed and whether `stop_after_rows` (counted across the run in `used`) stopped it.
async fn index_space(
    store: &PgMemory,
    generation: u64,
    space: &str,
    limits: BuildLimits,
    used: &mut usize,
) -> Result<(u64, bool)> {
    let tenant = store.tenant();
    let mut rows = 0u64;
    loop {
        let take = match limits.stop_after_rows {
            Some(stop) if *used >= stop => return Ok((rows, true)),
            Some(stop) => limits.batch_rows.max(1).min(stop - *used),
            None => limits.batch_rows.max(1),
        };
        let (before, batch) = {
            let c = store.client().await?;
            let cp = index::checkpoint(&**c, tenant, generation, space).await?;
            let batch = ledger::read(&**c, tenant, space, cp.last_event_id, None, take).await?;
            (cp, batch)
        };
        let Some(last) = batch.last() else {
            store.ensure_hnsw(generation, space, before.rows).await?;
            return Ok((rows, false));
        };
        let vectors = vector_rows(
            store.inner.embedder.as_deref(),
            batch.iter().map(|r| &r.evidence).collect(),
            store.inner.options.index.span_vectors,
        )
        .await?;
        let n = batch.len();
        let head = LedgerHead {
            last_event_id: last.evidence.event_id,
            chain: last.chain.clone(),
            rows: before.rows + n as u64,
        };
        {
            let mut c = store.client().await?;
            index::apply_batch(
                &mut c,
                tenant,
                store.inner.options.fence,
                index::Batch {
                    generation,
                    space,
                    last: &head,
                    rows: batch
                        .iter()
                        .map(|r| (r.evidence.event_id, r.evidence.row.context.clone()))
                        .collect(),
                    edges: batch
                        .iter()
                        .flat_map(|r| {
                            let e = &r.evidence;
                            edges(e, &derive(e))
                                .into_iter()
                                .map(|(node, kind)| (e.event_id, node, kind))
                        })
                        .collect(),
                    vectors,
                    window: store.inner.options.index.window,
                },
            )
            .await?;
        }
        rows += n as u64;
        *used += n;
    }
}
