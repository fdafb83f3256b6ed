//! Integration tests of lumina-memory-sqlite: the store conformance suite of
//! `lumina-memory` against the SQLite store, then SQLite-specific behaviour (ledger
//! immutability, fingerprints and rebuilds, resumable index builds, a killed build) and the
//! reranker of the read path over this store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod rerank;
mod sqlite;

use std::sync::Arc;

use lumina_memory::conformance::StoreFixture;
use lumina_memory::MemoryStore;
use lumina_memory_sqlite::{SqliteMemory, SqliteOptions};
use tempfile::TempDir;

/// A store in its own temp dir (the AppRoot), removed when the fixture drops.
pub struct TempStore {
    pub store: Arc<SqliteMemory>,
    pub dir: TempDir,
}

/// A second store over the files of `dir` with other options (as after a restart or a
/// configuration change).
pub fn reopen(dir: &TempDir, options: SqliteOptions) -> SqliteMemory {
    SqliteMemory::open(dir.path(), options, None).unwrap()
}

impl StoreFixture for TempStore {
    fn store(&self) -> Arc<dyn MemoryStore> {
        self.store.clone()
    }

    fn reopen(&self) -> Arc<dyn MemoryStore> {
        Arc::new(reopen(&self.dir, SqliteOptions::default()))
    }
}

/// A fresh SQLite store with default options.
pub async fn sqlite_store() -> TempStore {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteMemory::open(dir.path(), SqliteOptions::default(), None).unwrap());
    TempStore { store, dir }
}

mod conformance {
    lumina_memory::memory_conformance_suite!(super::sqlite_store());
}

/// The conformance check of refreshed views with a model of every output (dense, learned
/// sparse, token vectors) and span vectors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refreshed_views_with_vectors_rank_like_built_ones() {
    use lumina_memory::conformance::{multi_output_model, refreshed_views_rank_like_built_ones};
    let dir = tempfile::tempdir().unwrap();
    let open = || -> Arc<dyn MemoryStore> {
        Arc::new(
            SqliteMemory::open(
                dir.path(),
                SqliteOptions::default(),
                Some(multi_output_model()),
            )
            .unwrap(),
        )
    };
    refreshed_views_rank_like_built_ones(open(), &open).await;
}
