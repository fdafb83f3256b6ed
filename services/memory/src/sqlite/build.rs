//! The index job: alignment checks, catch-up of new ledger rows, and resumable rebuilds
//! into a new generation with atomic publication.
//!
//! The ledger is only ever read here. A rebuild is needed when the published fingerprint
//! differs from the store's (schema, analyzer, window, embedding model) or when a space's
//! checkpoint is not a prefix of its ledger (its chain hash does not match); otherwise new
//! rows are indexed into the published generation, each batch atomically with its
//! checkpoint.

use tracing::info;

use super::{Inner, SqliteMemory};
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

/// The alignment state of one space (blocking).
pub(super) fn status(inner: &Inner, space: &str) -> Result<IndexStatus> {
    let ledger = inner.ledger().head(space)?;
    let index = inner.index();
    let (generation, fingerprint) = index.publication()?.unwrap_or((0, String::new()));
    let indexed = if generation == 0 {
        LedgerHead::default()
    } else {
        index.checkpoint(generation, space)?
    };
    Ok(IndexStatus {
        space: space.to_owned(),
        generation,
        fingerprint,
        expected_fingerprint: inner.fingerprint.clone(),
        indexed,
        ledger,
    })
}

/// The alignment check of the read path: a fast check without the maintenance lock, then
/// catch-up or rebuild under it when needed.
pub(super) async fn align(store: &SqliteMemory, space: &str) -> Result<Aligned> {
    let owned = space.to_owned();
    let state = store.blocking(move |inner| status(inner, &owned)).await?;
    if state.aligned() {
        return Ok(Aligned {
            generation: state.generation,
            indexed: state.indexed,
            rows: 0,
            rebuilt: false,
        });
    }
    let _guard = store.inner.maintenance.lock().await;
    let report = sync_locked(
        store,
        BuildLimits {
            stop_after_rows: None,
            ..store.inner.options.build
        },
    )
    .await?;
    let owned = space.to_owned();
    let state = store.blocking(move |inner| status(inner, &owned)).await?;
    Ok(Aligned {
        generation: state.generation,
        indexed: state.indexed,
        rows: report.rows_indexed,
        rebuilt: report.rebuilt,
    })
}

/// One run of the index job over every space.
pub(super) async fn sync(store: &SqliteMemory, limits: BuildLimits) -> Result<SyncReport> {
    let _guard = store.inner.maintenance.lock().await;
    sync_locked(store, limits).await
}

async fn sync_locked(store: &SqliteMemory, limits: BuildLimits) -> Result<SyncReport> {
    let fingerprint = store.inner.fingerprint.clone();
    let published = store.blocking(|inner| inner.index().publication()).await?;
    let generation = match published {
        Some((g, f)) if f == fingerprint => g,
        _ => return rebuild(store, limits).await,
    };
    let spaces = store.blocking(|inner| inner.ledger().spaces()).await?;
    let mut report = SyncReport {
        generation,
        ..SyncReport::default()
    };
    let mut used = 0usize;
    for space in spaces {
        let owned = space.clone();
        let prefix_ok = store
            .blocking(move |inner| {
                let cp = inner.index().checkpoint(generation, &owned)?;
                Ok(inner.ledger().chain_at(&owned, cp.last_event_id)? == Some(cp.chain))
            })
            .await?;
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
async fn rebuild(store: &SqliteMemory, limits: BuildLimits) -> Result<SyncReport> {
    let fingerprint = store.inner.fingerprint.clone();
    let fp = fingerprint.clone();
    let generation = store
        .blocking(move |inner| {
            let mut index = inner.index();
            match index.building()? {
                Some((g, f)) if f == fp => Ok(g),
                Some((g, _)) => {
                    index.drop_generation(g)?;
                    index.create_generation(&fp)
                }
                None => index.create_generation(&fp),
            }
        })
        .await?;
    info!(generation, fingerprint = %fingerprint, "building index generation");
    let spaces = store.blocking(|inner| inner.ledger().spaces()).await?;
    let mut report = SyncReport {
        generation,
        rebuilt: true,
        ..SyncReport::default()
    };
    let mut budget_used = 0usize;
    for space in spaces {
        let (rows, paused) =
            index_space(store, generation, &space, limits, &mut budget_used).await?;
        report.rows_indexed += rows;
        if paused {
            report.paused = true;
            return Ok(report);
        }
    }
    store
        .blocking(move |inner| {
            inner.index().publish(generation, &fingerprint)?;
            inner.snapshots.lock().map(|mut s| s.clear()).ok();
            remove_other_vector_files(inner);
            Ok(())
        })
        .await?;
    info!(
        generation,
        rows = report.rows_indexed,
        "index generation published"
    );
    report.published = true;
    Ok(report)
}

/// Indexes a space's rows after the generation's checkpoint, batch by batch. Returns the
/// rows indexed and whether `stop_after_rows` (counted across the run in `used`) stopped it.
async fn index_space(
    store: &SqliteMemory,
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
        let owned = space.to_owned();
        let batch = store
            .blocking(move |inner| {
                let cp = inner.index().checkpoint(generation, &owned)?;
                inner.ledger().read(&owned, cp.last_event_id, take)
            })
            .await?;
        if batch.is_empty() {
            return Ok((rows, false));
        }
        let vectors = vector_rows(
            store.inner.embedder.as_deref(),
            batch.iter().map(|r| &r.evidence).collect(),
            store.inner.options.index.span_vectors,
        )
        .await?;
        let n = batch.len();
        let owned = space.to_owned();
        store
            .blocking(move |inner| {
                inner.index().apply_batch(
                    generation,
                    &owned,
                    &batch,
                    &vectors,
                    inner.options.index.window,
                )
            })
            .await?;
        rows += n as u64;
        *used += n;
    }
}

/// After a publication: the vector files of other models belong to retired generations.
/// (A failure to remove one is logged: it is only disk space.)
fn remove_other_vector_files(inner: &Inner) {
    let ours = inner
        .embedder
        .as_ref()
        .map(|e| super::index::retrieval_file_name(e.model_id(), e.dims()));
    let Ok(entries) = std::fs::read_dir(&inner.dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let base = name
            .trim_end_matches("-wal")
            .trim_end_matches("-shm")
            .to_owned();
        if base.starts_with("retrieval-")
            && base.ends_with(".sqlite")
            && Some(&base) != ours.as_ref()
        {
            if let Err(error) = std::fs::remove_file(entry.path()) {
                tracing::warn!(file = %name, %error, "could not remove an old vector file");
            }
        }
    }
}
