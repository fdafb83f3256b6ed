//! Integration tests of lumina-rag: the store conformance suite against the SQLite store
//! (store contract, corpus recall@5 with exact citations, incremental re-ingestion, dense
//! fusion), then the generated PDF and .docx through the real parsers, the SQLite file's
//! place and reopening, and the two tools as the agent calls them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod formats;
mod tools;

use std::sync::Arc;

use lumina_config::AppRoot;
use lumina_rag::conformance::StoreFixture;
use lumina_rag::sqlite::SqliteRag;
use lumina_rag::RagStore;
use tempfile::TempDir;

/// A store under its own temp AppRoot, removed when the fixture drops.
pub struct TempStore {
    pub store: Arc<SqliteRag>,
    pub dir: TempDir,
}

impl StoreFixture for TempStore {
    fn store(&self) -> Arc<dyn RagStore> {
        self.store.clone()
    }
}

pub async fn sqlite_store() -> TempStore {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteRag::new(AppRoot::new(dir.path())));
    TempStore { store, dir }
}

mod conformance {
    lumina_rag::rag_conformance_suite!(super::sqlite_store());
}
