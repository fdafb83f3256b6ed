//! Integration tests of lumina-journal: the conformance suite against the SQLite backend,
//! then SQLite-specific behaviour (files, durability, archive, path safety).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sqlite;

use std::sync::Arc;

use lumina_journal::conformance::StoreFixture;
use lumina_journal::sqlite::SqliteJournal;
use lumina_journal::JournalStore;
use tempfile::TempDir;

/// A store in its own temp dir, removed when the fixture drops (store first).
pub struct TempStore {
    pub store: Arc<SqliteJournal>,
    pub dir: TempDir,
}

impl TempStore {
    /// `<tmp>/data/sessions`, the `sessions_dir` the store was opened with.
    pub fn sessions_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("data").join("sessions")
    }

    /// A second store over the same files (as after a restart).
    pub fn reopen(&self) -> SqliteJournal {
        SqliteJournal::open(self.sessions_dir(), "t1").unwrap()
    }
}

impl StoreFixture for TempStore {
    fn store(&self) -> Arc<dyn JournalStore> {
        self.store.clone()
    }
}

/// A fresh SQLite store for tenant `t1`.
pub async fn sqlite_store() -> TempStore {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("data").join("sessions");
    let store = Arc::new(SqliteJournal::open(sessions, "t1").unwrap());
    TempStore { store, dir }
}

mod conformance {
    lumina_journal::journal_conformance_suite!(super::sqlite_store());
}
