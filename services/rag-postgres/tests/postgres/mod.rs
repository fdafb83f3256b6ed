//! The PostgreSQL store: the conformance suite on a fresh database per test (the shared
//! test server), then what only this backend has — tenants, and several writers.

use std::sync::Arc;

use lumina_rag::chunk::{self, ChunkOptions};
use lumina_rag::conformance::{StoreFixture, PROJECT};
use lumina_rag::{ChunkVector, FileRecord, RagStore};
use lumina_rag_postgres::{PgRag, PgRagOptions};
use lumina_testkit::postgres::PgServer;
use pretty_assertions::assert_eq;

/// A fresh, migrated database on the shared server: (URL, database name).
pub async fn fresh_database() -> (String, String) {
    let url = tokio::task::spawn_blocking(|| {
        PgServer::shared()
            .unwrap()
            .create_unique_database("rag")
            .unwrap()
    })
    .await
    .unwrap();
    let journal = lumina_journal::postgres::PgJournal::connect(&url, 1).unwrap();
    journal.migrate().await.unwrap();
    let name = url.rsplit('/').next().unwrap().to_owned();
    (url, name)
}

fn options(tenant: &str) -> PgRagOptions {
    PgRagOptions {
        tenant: tenant.to_owned(),
        pool_size: 2,
        ..PgRagOptions::default()
    }
}

/// A store of tenant `t1` on its own database.
pub struct PgStore {
    pub store: Arc<PgRag>,
    pub url: String,
    pub database: String,
}

impl StoreFixture for PgStore {
    fn store(&self) -> Arc<dyn RagStore> {
        self.store.clone()
    }
}

pub async fn pg_store() -> PgStore {
    let (url, database) = fresh_database().await;
    let store = Arc::new(PgRag::connect(&url, options("t1")).unwrap());
    PgStore {
        store,
        url,
        database,
    }
}

mod conformance {
    lumina_rag::rag_conformance_suite!(super::pg_store());
}

fn psql(database: &str, sql: &str) -> String {
    PgServer::shared().unwrap().psql(database, sql).unwrap()
}

fn file(path: &str, text: &str) -> (FileRecord, Vec<lumina_rag::Chunk>) {
    let chunks = chunk::chunk(
        text,
        ChunkOptions {
            target_tokens: 100,
            overlap_tokens: 2,
        },
    );
    let record = FileRecord {
        path: path.into(),
        content_hash: format!("{:x}", text.len()),
        format: "text".into(),
        bytes: text.len() as u64,
        chunks: chunks.len() as u32,
        ingested_at_ms: 1_700_000_000_000,
    };
    (record, chunks)
}

/// Two tenants with the same project id and paths: each sees only its own files, chunks,
/// full-text and vector hits, and cannot attach vectors to the other's chunk ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_with_the_same_project_never_meet() {
    let fixture = pg_store().await;
    let a = fixture.store.clone();
    let b = PgRag::connect(&fixture.url, options("t2")).unwrap();
    let (ra, ca) = file("notes.md", "The launch code for the rocket is 4417.");
    let (rb, cb) = file("notes.md", "Tenant two keeps its lunch menu here.");
    a.put_file(PROJECT, &ra, &ca).await.unwrap();
    b.put_file(PROJECT, &rb, &cb).await.unwrap();
    let a_id = a.chunk(PROJECT, "notes.md", 1).await.unwrap().unwrap().id;
    a.put_vectors(
        PROJECT,
        "m",
        &[ChunkVector {
            chunk_id: a_id,
            vector: vec![1.0, 0.0],
        }],
    )
    .await
    .unwrap();

    assert_eq!(a.files(PROJECT).await.unwrap(), vec![ra]);
    assert_eq!(b.files(PROJECT).await.unwrap(), vec![rb]);
    assert_eq!(
        b.chunk(PROJECT, "notes.md", 1)
            .await
            .unwrap()
            .unwrap()
            .chunk
            .text,
        "Tenant two keeps its lunch menu here."
    );
    let launch = vec!["launch".to_owned(), "code".to_owned()];
    assert_eq!(b.search_text(PROJECT, &launch, 5).await.unwrap(), vec![]);
    assert_eq!(a.search_text(PROJECT, &launch, 5).await.unwrap().len(), 1);
    assert_eq!(
        b.search_vector(PROJECT, "m", &[1.0, 0.0], 5).await.unwrap(),
        vec![]
    );
    assert_eq!(b.missing_vectors(PROJECT, "m", 5).await.unwrap().len(), 1);
    // Tenant two naming tenant one's chunk id: ignored.
    b.put_vectors(
        PROJECT,
        "m",
        &[ChunkVector {
            chunk_id: a_id,
            vector: vec![0.0, 1.0],
        }],
    )
    .await
    .unwrap();
    let hits = a.search_vector(PROJECT, "m", &[1.0, 0.0], 5).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert!((hits[0].1 - 1.0).abs() < 1e-6, "{hits:?}");
    assert!(b.remove_file(PROJECT, "notes.md").await.unwrap());
    assert_eq!(a.files(PROJECT).await.unwrap().len(), 1);
    assert_eq!(
        psql(
            &fixture.database,
            "SELECT tenant, count(*) FROM rag_chunks GROUP BY tenant ORDER BY tenant"
        ),
        "t1|1"
    );
}

/// Removing a file cascades to its chunks and vectors in the database; vectors of another
/// dimension than the query's are not compared (pgvector would refuse them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removal_cascades_and_dimensions_never_mix() {
    let fixture = pg_store().await;
    let store = &fixture.store;
    let (record, chunks) = file("a.md", "Alpha bravo charlie.");
    store.put_file(PROJECT, &record, &chunks).await.unwrap();
    let id = store.chunk(PROJECT, "a.md", 1).await.unwrap().unwrap().id;
    store
        .put_vectors(
            PROJECT,
            "m",
            &[ChunkVector {
                chunk_id: id,
                vector: vec![1.0, 0.0, 0.0],
            }],
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .search_vector(PROJECT, "m", &[1.0, 0.0], 5)
            .await
            .unwrap(),
        vec![]
    );
    // A zero query vector scores 0, as in the SQLite store.
    let zero = store
        .search_vector(PROJECT, "m", &[0.0, 0.0, 0.0], 5)
        .await
        .unwrap();
    assert_eq!(zero.len(), 1);
    assert_eq!(zero[0].1, 0.0);
    assert!(store.remove_file(PROJECT, "a.md").await.unwrap());
    assert_eq!(
        psql(
            &fixture.database,
            "SELECT (SELECT count(*) FROM rag_chunks) || '/' || (SELECT count(*) FROM rag_vectors)"
        ),
        "0/0"
    );
}

/// Several writers replacing the same file at once (two instances ingesting one project)
/// take turns: no error, and the file ends whole — one writer's chunks, never a mix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_replacements_of_one_file_take_turns() {
    let fixture = pg_store().await;
    let texts: Vec<String> = (0..6)
        .map(|i| {
            (0..40)
                .map(|w| format!("writer{i} word{w}."))
                .collect::<Vec<_>>()
                .join("\n\n")
        })
        .collect();
    let mut tasks = Vec::new();
    for text in texts.clone() {
        let store = PgRag::connect(&fixture.url, options("t1")).unwrap();
        tasks.push(tokio::spawn(async move {
            let (record, chunks) = file("same.md", &text);
            for _ in 0..3 {
                store.put_file(PROJECT, &record, &chunks).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let store = &fixture.store;
    let record = store.file(PROJECT, "same.md").await.unwrap().unwrap();
    let first = store.chunk(PROJECT, "same.md", 1).await.unwrap().unwrap();
    let writer = texts
        .iter()
        .position(|t| t.starts_with(&first.chunk.text[..8]))
        .unwrap();
    let (expected, chunks) = file("same.md", &texts[writer]);
    assert_eq!(record, expected);
    for c in &chunks {
        let stored = store
            .chunk(PROJECT, "same.md", c.index)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&stored.chunk, c);
    }
    assert_eq!(
        store
            .chunk(PROJECT, "same.md", record.chunks + 1)
            .await
            .unwrap(),
        None
    );
}
