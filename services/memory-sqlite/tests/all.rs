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
