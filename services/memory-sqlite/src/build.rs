//! The SQLite store's side of the index job (`lumina_memory::build`, the one job of every
//! store): the published generation and checkpoints in `index.sqlite`, the ledger rows
//! from `ledger.sqlite`, each step on tokio's blocking pool. There is one process per
//! AppRoot, so the builder lock is the store's maintenance lock alone. A publication also
//! drops the cached read views and the vector files of other models.

use async_trait::async_trait;

use super::{Inner, SqliteMemory};
use lumina_memory::build::{IndexBackend, IndexBatch, LedgerRow, Position};
use lumina_memory::embed::EmbeddingProvider;
use lumina_memory::{BuildLimits, LedgerHead, Result, SyncReport};

#[async_trait]
impl IndexBackend for SqliteMemory {
    type BuilderLock = ();

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

    async fn lock_builder(&self) -> Result<()> {
        Ok(())
    }

    async fn try_lock_builder(&self) -> Result<Option<()>> {
        Ok(Some(()))
    }

    async fn unlock_builder(&self, _lock: ()) -> Result<()> {
        Ok(())
    }

    async fn after_run(&self, _report: &SyncReport) {}

    async fn position(&self, space: &str) -> Result<Position> {
        let space = space.to_owned();
        self.blocking(move |inner| {
            let ledger = inner.ledger().head(&space)?;
            let index = inner.index();
            let published = match index.publication()? {
                Some((generation, fingerprint)) => {
                    let indexed = index.checkpoint(generation, &space)?;
                    Some((generation, fingerprint, indexed))
                }
                None => None,
            };
            Ok(Position { ledger, published })
        })
        .await
    }

    async fn publication(&self) -> Result<Option<(u64, String)>> {
        self.blocking(|inner| inner.index().publication()).await
    }

    async fn spaces(&self) -> Result<Vec<String>> {
        self.blocking(|inner| inner.ledger().spaces()).await
    }

    async fn prefix(&self, generation: u64, space: &str) -> Result<(LedgerHead, Option<String>)> {
        let space = space.to_owned();
        self.blocking(move |inner| {
            let cp = inner.index().checkpoint(generation, &space)?;
            let chain = inner.ledger().chain_at(&space, cp.last_event_id)?;
            Ok((cp, chain))
        })
        .await
    }

    async fn building(&self, fingerprint: &str) -> Result<u64> {
        let fp = fingerprint.to_owned();
        self.blocking(move |inner| {
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
        .await
    }

    async fn pending(
        &self,
        generation: u64,
        space: &str,
        limit: usize,
    ) -> Result<(LedgerHead, Vec<LedgerRow>)> {
        let space = space.to_owned();
        self.blocking(move |inner| {
            let cp = inner.index().checkpoint(generation, &space)?;
            let rows = inner.ledger().read(&space, cp.last_event_id, limit)?;
            Ok((cp, rows))
        })
        .await
    }

    async fn apply(&self, batch: IndexBatch<'_>) -> Result<()> {
        // The index re-reads the checkpoint in its own connection (`IndexDb::apply_batch`).
        let IndexBatch {
            generation,
            space,
            rows,
            vectors,
            ..
        } = batch;
        let space = space.to_owned();
        self.blocking(move |inner| {
            inner.index().apply_batch(
                generation,
                &space,
                &rows,
                &vectors,
                inner.options.index.window,
            )
        })
        .await
    }

    async fn space_indexed(&self, _generation: u64, _space: &str, _rows: u64) -> Result<()> {
        Ok(())
    }

    async fn publish(&self, generation: u64, fingerprint: &str) -> Result<()> {
        let fingerprint = fingerprint.to_owned();
        self.blocking(move |inner| {
            inner.index().publish(generation, &fingerprint)?;
            inner.views.clear();
            remove_other_vector_files(inner);
            Ok(())
        })
        .await
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
