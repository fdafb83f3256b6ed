//! The index job, one for every store: alignment checks, catch-up of new ledger rows, and
//! resumable rebuilds into a new generation with atomic publication.
//!
//! The ledger is only ever read here. A rebuild is needed when the published fingerprint
//! differs from the store's (schema, analyzer, window, embedding model) or when a space's
//! checkpoint is not a prefix of its ledger (its chain hash does not match); otherwise new
//! rows are indexed into the published generation, each batch atomically with its
//! checkpoint. A store supplies its storage through [`IndexBackend`]: the SQLite store
//! (`lumina-memory-sqlite`) and the PostgreSQL store (`lumina-memory-postgres`, which adds
//! a cluster-wide builder lock, HNSW indexes and planner statistics through the hooks) run
//! this same job.

use async_trait::async_trait;
use tracing::info;

use crate::embed::codec::{vector_rows, VectorRow};
use crate::embed::EmbeddingProvider;
use crate::{BuildLimits, Evidence, IndexStatus, LedgerHead, Result, SyncReport};

/// A ledger row with its chain hash (the hash chain of its space up to itself).
#[derive(Debug, Clone)]
pub struct LedgerRow {
    /// The evidence.
    pub evidence: Evidence,
    /// The chain hash after this row.
    pub chain: String,
}

/// Where a space's index stands: its ledger head, and the published generation with its
/// fingerprint and the space's checkpoint in it (`None` before the first publication).
#[derive(Debug, Clone)]
pub struct Position {
    /// The ledger head of the space.
    pub ledger: LedgerHead,
    /// The published generation, its fingerprint and the space's checkpoint in it.
    pub published: Option<(u64, String, LedgerHead)>,
}

/// A batch of new ledger rows to index into a generation, with their vectors.
#[derive(Debug)]
pub struct IndexBatch<'a> {
    /// The generation being written.
    pub generation: u64,
    /// The space of the rows.
    pub space: &'a str,
    /// The space's checkpoint in the generation before this batch.
    pub before: &'a LedgerHead,
    /// The rows, in ledger order (never empty).
    pub rows: Vec<LedgerRow>,
    /// Their vectors ([`vector_rows`]).
    pub vectors: Vec<VectorRow>,
}

/// The storage one store gives the index job. Generations are numbered; one is published
/// (the read path uses it), at most one other is being built.
#[async_trait]
pub trait IndexBackend: Send + Sync {
    /// Held while the job runs (the PostgreSQL store's cluster-wide builder lock).
    type BuilderLock: Send;

    /// The fingerprint this store builds.
    fn fingerprint(&self) -> &str;
    /// The embedding model, when the store has one.
    fn embedder(&self) -> Option<&dyn EmbeddingProvider>;
    /// Whether span vectors are built ([`crate::derive::IndexOptions::span_vectors`]).
    fn span_vectors(&self) -> bool;
    /// The batch size of the alignment job run by queries.
    fn build_limits(&self) -> BuildLimits;
    /// Serializes the job within this process.
    fn maintenance(&self) -> &tokio::sync::Mutex<()>;

    /// Takes the builder lock, waiting for it.
    async fn lock_builder(&self) -> Result<Self::BuilderLock>;
    /// Takes the builder lock, or `None` when another builder holds it.
    async fn try_lock_builder(&self) -> Result<Option<Self::BuilderLock>>;
    /// Releases the builder lock.
    async fn unlock_builder(&self, lock: Self::BuilderLock) -> Result<()>;
    /// After a job run that took the builder lock (e.g. refreshing planner statistics).
    async fn after_run(&self, report: &SyncReport);

    /// The ledger head and published position of a space.
    async fn position(&self, space: &str) -> Result<Position>;
    /// The published generation and its fingerprint.
    async fn publication(&self) -> Result<Option<(u64, String)>>;
    /// Spaces that hold evidence, sorted.
    async fn spaces(&self) -> Result<Vec<String>>;
    /// The checkpoint of a space in a generation, and the chain hash of the space's ledger
    /// at that checkpoint's event (`None` when the ledger has no such row).
    async fn prefix(&self, generation: u64, space: &str) -> Result<(LedgerHead, Option<String>)>;
    /// The generation being built for `fingerprint`: the unpublished one when it has that
    /// fingerprint (a resumed build), else a new one (an unpublished generation of another
    /// fingerprint is dropped first).
    async fn building(&self, fingerprint: &str) -> Result<u64>;
    /// The checkpoint of a space in a generation and at most `limit` ledger rows after it.
    async fn pending(
        &self,
        generation: u64,
        space: &str,
        limit: usize,
    ) -> Result<(LedgerHead, Vec<LedgerRow>)>;
    /// Indexes a batch and advances the space's checkpoint, atomically.
    async fn apply(&self, batch: IndexBatch<'_>) -> Result<()>;
    /// A space has reached its ledger head in a generation with `rows` indexed rows.
    async fn space_indexed(&self, generation: u64, space: &str, rows: u64) -> Result<()>;
    /// Publishes a built generation (and drops what it retires).
    async fn publish(&self, generation: u64, fingerprint: &str) -> Result<()>;
}

/// What the alignment check found and did.
#[derive(Debug, Clone)]
pub struct Aligned {
    /// The published generation queries read.
    pub generation: u64,
    /// The space's checkpoint in it.
    pub indexed: LedgerHead,
    /// Rows indexed by this check.
    pub rows: u64,
    /// Whether this check rebuilt the index.
    pub rebuilt: bool,
}

/// The alignment state of one space.
pub async fn status<B: IndexBackend + ?Sized>(store: &B, space: &str) -> Result<IndexStatus> {
    let position = store.position(space).await?;
    let (generation, fingerprint, indexed) =
        position
            .published
            .unwrap_or((0, String::new(), LedgerHead::default()));
    Ok(IndexStatus {
        space: space.to_owned(),
        generation,
        fingerprint,
        expected_fingerprint: store.fingerprint().to_owned(),
        indexed,
        ledger: position.ledger,
    })
}

/// The alignment check of the read path: a fast check without the maintenance lock, then
/// catch-up or rebuild under it when needed. When another builder holds the builder lock,
/// the query answers from what is published now rather than wait.
pub async fn align<B: IndexBackend + ?Sized>(store: &B, space: &str) -> Result<Aligned> {
    let state = status(store, space).await?;
    let unchanged = |state: IndexStatus| Aligned {
        generation: state.generation,
        indexed: state.indexed,
        rows: 0,
        rebuilt: false,
    };
    if state.aligned() {
        return Ok(unchanged(state));
    }
    let _guard = store.maintenance().lock().await;
    let Some(lock) = store.try_lock_builder().await? else {
        return Ok(unchanged(state));
    };
    let limits = BuildLimits {
        stop_after_rows: None,
        ..store.build_limits()
    };
    let report = sync_locked(store, limits).await?;
    store.unlock_builder(lock).await?;
    store.after_run(&report).await;
    let state = status(store, space).await?;
    Ok(Aligned {
        generation: state.generation,
        indexed: state.indexed,
        rows: report.rows_indexed,
        rebuilt: report.rebuilt,
    })
}

/// One run of the index job over every space.
pub async fn sync<B: IndexBackend + ?Sized>(store: &B, limits: BuildLimits) -> Result<SyncReport> {
    let _guard = store.maintenance().lock().await;
    let lock = store.lock_builder().await?;
    let report = sync_locked(store, limits).await?;
    store.unlock_builder(lock).await?;
    store.after_run(&report).await;
    Ok(report)
}

async fn sync_locked<B: IndexBackend + ?Sized>(
    store: &B,
    limits: BuildLimits,
) -> Result<SyncReport> {
    let generation = match store.publication().await? {
        Some((g, f)) if f == store.fingerprint() => g,
        _ => return rebuild(store, limits).await,
    };
    let spaces = store.spaces().await?;
    let mut report = SyncReport {
        generation,
        ..SyncReport::default()
    };
    let mut used = 0usize;
    for space in spaces {
        let (checkpoint, chain) = store.prefix(generation, &space).await?;
        if chain != Some(checkpoint.chain) {
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
async fn rebuild<B: IndexBackend + ?Sized>(store: &B, limits: BuildLimits) -> Result<SyncReport> {
    let fingerprint = store.fingerprint().to_owned();
    let generation = store.building(&fingerprint).await?;
    let spaces = store.spaces().await?;
    info!(generation, fingerprint = %fingerprint, "building memory index generation");
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
    store.publish(generation, &fingerprint).await?;
    info!(
        generation,
        rows = report.rows_indexed,
        "memory index generation published"
    );
    report.published = true;
    Ok(report)
}

/// Indexes a space's rows after the generation's checkpoint, batch by batch. Returns the
/// rows indexed and whether `stop_after_rows` (counted across the run in `used`) stopped it.
async fn index_space<B: IndexBackend + ?Sized>(
    store: &B,
    generation: u64,
    space: &str,
    limits: BuildLimits,
    used: &mut usize,
) -> Result<(u64, bool)> {
    let mut rows = 0u64;
    loop {
        let take = match limits.stop_after_rows {
            Some(stop) if *used >= stop => return Ok((rows, true)),
            Some(stop) => limits.batch_rows.max(1).min(stop - *used),
            None => limits.batch_rows.max(1),
        };
        let (before, batch) = store.pending(generation, space, take).await?;
        if batch.is_empty() {
            store.space_indexed(generation, space, before.rows).await?;
            return Ok((rows, false));
        }
        let vectors = vector_rows(
            store.embedder(),
            batch.iter().map(|r| &r.evidence).collect(),
            store.span_vectors(),
        )
        .await?;
        let n = batch.len();
        store
            .apply(IndexBatch {
                generation,
                space,
                before: &before,
                rows: batch,
                vectors,
            })
            .await?;
        rows += n as u64;
        *used += n;
    }
}
