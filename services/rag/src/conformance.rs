//! The conformance suite every [`RagStore`] backend passes, unchanged: the store contract
//! itself, then ingestion and search through [`Rag`] on the generated corpus
//! ([`crate::corpus`]) — recall@5 over its known answers, citations that resolve to their
//! exact chunks, incremental re-ingestion.
//!
//! A backend's tests expand [`rag_conformance_suite!`](crate::rag_conformance_suite) with an
//! async factory yielding a fresh, empty store per test (anything implementing
//! [`StoreFixture`]). The calling crate needs `tokio` (`macros`, `rt-multi-thread`).

// A test suite: panicking is how it reports a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use pretty_assertions::assert_eq;

use crate::chunk::{self, Chunk, ChunkOptions};
use crate::store::{ChunkKey, ChunkVector, FileRecord, RagStore};
use crate::{Citation, Error, Rag, RagOptions};

/// The project every store check writes to.
pub const PROJECT: &str = "0123456789abcdef";
/// A project that must see none of [`PROJECT`]'s data.
pub const OTHER_PROJECT: &str = "fedcba9876543210";

/// What a conformance factory yields: a fresh store, plus whatever must outlive the test.
pub trait StoreFixture: Send + 'static {
    /// The store under test.
    fn store(&self) -> Arc<dyn RagStore>;
}

impl StoreFixture for Arc<dyn RagStore> {
    fn store(&self) -> Arc<dyn RagStore> {
        Arc::clone(self)
    }
}

/// Expands to one `#[tokio::test]` per conformance check, each on `$factory.await`.
#[macro_export]
macro_rules! rag_conformance_suite {
    ($factory:expr) => {
        $crate::rag_conformance_suite!(@checks $factory;
            put_read_and_replace_files,
            remove_file_removes_everything,
            full_text_ranks_and_is_injection_safe,
            vectors_follow_their_chunks,
            projects_are_isolated,
            invalid_writes_are_refused,
            corpus_recall_and_exact_citations,
            reingestion_is_incremental,
            dense_retrieval_fuses_with_full_text,
        );
    };
    (@checks $factory:expr; $($check:ident),+ $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let fixture = $factory.await;
                let store = $crate::conformance::StoreFixture::store(&fixture);
                $crate::conformance::$check(store).await;
            }
        )+
    };
}

fn record(path: &str, hash: &str, chunks: &[Chunk]) -> FileRecord {
    FileRecord {
        path: path.into(),
        content_hash: hash.into(),
        format: "text".into(),
        bytes: 100,
        chunks: chunks.len() as u32,
        ingested_at_ms: 1_700_000_000_000,
    }
}

fn chunks_of(text: &str, target: usize) -> Vec<Chunk> {
    chunk::chunk(
        text,
        ChunkOptions {
            target_tokens: target,
            overlap_tokens: 2,
        },
    )
}

fn key(path: &str, index: u32) -> ChunkKey {
    ChunkKey {
        path: path.into(),
        index,
    }
}

fn terms(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// Files, chunks and their spans read back as written; a second put replaces all of it.
pub async fn put_read_and_replace_files(store: Arc<dyn RagStore>) {
    assert_eq!(store.files(PROJECT).await.unwrap(), vec![]);
    assert_eq!(store.file(PROJECT, "a.md").await.unwrap(), None);
    let text = "Alpha bravo charlie.\n\nDelta echo foxtrot golf.\n\nHotel india juliet kilo.";
    let chunks = chunks_of(text, 5);
    assert!(chunks.len() >= 3);
    let file = record("a.md", "h1", &chunks);
    store.put_file(PROJECT, &file, &chunks).await.unwrap();
    assert_eq!(store.files(PROJECT).await.unwrap(), vec![file.clone()]);
    assert_eq!(store.file(PROJECT, "a.md").await.unwrap(), Some(file));
    for c in &chunks {
        let stored = store
            .chunk(PROJECT, "a.md", c.index)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.path, "a.md");
        assert_eq!(&stored.chunk, c);
        assert_eq!(&text[c.start..c.end], stored.chunk.text);
    }
    let first_id = store.chunk(PROJECT, "a.md", 1).await.unwrap().unwrap().id;
    // Replace with one chunk: the others are gone, from the index too.
    let replacement = chunks_of("Zulu yankee.", 100);
    let file2 = record("a.md", "h2", &replacement);
    store.put_file(PROJECT, &file2, &replacement).await.unwrap();
    assert_eq!(store.file(PROJECT, "a.md").await.unwrap(), Some(file2));
    assert_eq!(store.chunk(PROJECT, "a.md", 2).await.unwrap(), None);
    let new = store.chunk(PROJECT, "a.md", 1).await.unwrap().unwrap();
    assert_eq!(new.chunk.text, "Zulu yankee.");
    assert_ne!(new.id, first_id, "replaced chunks get new ids");
    assert_eq!(
        store
            .search_text(PROJECT, &terms(&["delta"]), 10)
            .await
            .unwrap(),
        vec![]
    );
    let found = store
        .search_text(PROJECT, &terms(&["zulu"]), 10)
        .await
        .unwrap();
    assert_eq!(
        found.iter().map(|f| f.0.clone()).collect::<Vec<_>>(),
        [key("a.md", 1)]
    );
}

/// Removing a file removes its chunks, vectors and index entries.
pub async fn remove_file_removes_everything(store: Arc<dyn RagStore>) {
    let chunks = chunks_of("Papa quebec romeo.", 100);
    store
        .put_file(PROJECT, &record("b.txt", "h", &chunks), &chunks)
        .await
        .unwrap();
    let id = store.chunk(PROJECT, "b.txt", 1).await.unwrap().unwrap().id;
    store
        .put_vectors(
            PROJECT,
            "m",
            &[ChunkVector {
                chunk_id: id,
                vector: vec![1.0, 0.0],
            }],
        )
        .await
        .unwrap();
    assert!(store.remove_file(PROJECT, "b.txt").await.unwrap());
    assert!(!store.remove_file(PROJECT, "b.txt").await.unwrap());
    assert_eq!(store.files(PROJECT).await.unwrap(), vec![]);
    assert_eq!(store.chunk(PROJECT, "b.txt", 1).await.unwrap(), None);
    assert_eq!(
        store
            .search_text(PROJECT, &terms(&["papa"]), 5)
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        store
            .search_vector(PROJECT, "m", &[1.0, 0.0], 5)
            .await
            .unwrap(),
        vec![]
    );
}

/// BM25: more matching terms and rarer terms rank higher; stemming applies; limits hold;
/// query syntax in terms is matched literally, never interpreted.
pub async fn full_text_ranks_and_is_injection_safe(store: Arc<dyn RagStore>) {
    let docs = [
        (
            "d1.md",
            "The rotation of signing keys happens weekly. Keys are stored in the vault.",
        ),
        (
            "d2.md",
            "Backups are rotated monthly. The vault is audited.",
        ),
        ("d3.md", "Nothing about that here: lunch menus and parking."),
        (
            "d4.md",
            "Signing ceremonies: keys, keys, keys, and rotating signing keys again.",
        ),
    ];
    for (path, text) in docs {
        let chunks = chunks_of(text, 100);
        store
            .put_file(PROJECT, &record(path, "h", &chunks), &chunks)
            .await
            .unwrap();
    }
    let found = store
        .search_text(PROJECT, &terms(&["signing", "keys", "rotated"]), 10)
        .await
        .unwrap();
    let paths: Vec<&str> = found.iter().map(|f| f.0.path.as_str()).collect();
    assert_eq!(paths.len(), 3, "{found:?}");
    assert!(
        paths[..2].contains(&"d1.md") && paths[..2].contains(&"d4.md"),
        "{found:?}"
    );
    assert_eq!(paths[2], "d2.md", "stemming: rotated ~ rotation");
    assert!(
        found.windows(2).all(|w| w[0].1 >= w[1].1),
        "scores descend: {found:?}"
    );
    assert_eq!(
        store
            .search_text(PROJECT, &terms(&["keys"]), 1)
            .await
            .unwrap()
            .len(),
        1
    );
    for hostile in [
        "\"",
        "AND",
        "keys*",
        "NEAR(keys",
        "col:keys",
        "-",
        "^keys",
        ")(",
    ] {
        // Never an error; literal matching only.
        store
            .search_text(PROJECT, &terms(&[hostile]), 5)
            .await
            .unwrap();
    }
    assert_eq!(store.search_text(PROJECT, &[], 5).await.unwrap(), vec![]);
}

/// Vectors attach to chunk ids: missing ones are listed, stored ones searched by cosine,
/// a replaced file's vectors go with it, and vectors for stale ids are ignored.
pub async fn vectors_follow_their_chunks(store: Arc<dyn RagStore>) {
    let chunks = chunks_of("One.\n\nTwo.\n\nThree.", 1);
    assert_eq!(chunks.len(), 6, "{chunks:?}"); // words and full stops
    store
        .put_file(PROJECT, &record("v.md", "h", &chunks), &chunks)
        .await
        .unwrap();
    let missing = store.missing_vectors(PROJECT, "m", 100).await.unwrap();
    assert_eq!(missing.len(), 6);
    assert_eq!(
        missing.iter().map(|c| c.chunk.index).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(
        store.missing_vectors(PROJECT, "m", 2).await.unwrap().len(),
        2
    );
    let vectors: Vec<ChunkVector> = missing
        .iter()
        .map(|c| ChunkVector {
            chunk_id: c.id,
            vector: vec![c.chunk.index as f32, 1.0, 0.0],
        })
        .collect();
    store.put_vectors(PROJECT, "m", &vectors).await.unwrap();
    // Idempotent.
    store.put_vectors(PROJECT, "m", &vectors).await.unwrap();
    assert_eq!(
        store.missing_vectors(PROJECT, "m", 100).await.unwrap(),
        vec![]
    );
    assert_eq!(
        store
            .missing_vectors(PROJECT, "other", 100)
            .await
            .unwrap()
            .len(),
        6
    );
    let near = store
        .search_vector(PROJECT, "m", &[1.0, 1.0, 0.0], 2)
        .await
        .unwrap();
    assert_eq!(
        near.iter().map(|n| n.0.clone()).collect::<Vec<_>>(),
        [key("v.md", 1), key("v.md", 2)]
    );
    assert!((near[0].1 - 1.0).abs() < 1e-6, "{near:?}");
    assert_eq!(
        store
            .search_vector(PROJECT, "other", &[1.0, 1.0, 0.0], 2)
            .await
            .unwrap(),
        vec![]
    );
    // Replace the file: its vectors go; the old ids no longer take vectors.
    let replacement = chunks_of("Four.", 100);
    store
        .put_file(PROJECT, &record("v.md", "h2", &replacement), &replacement)
        .await
        .unwrap();
    assert_eq!(
        store
            .search_vector(PROJECT, "m", &[1.0, 1.0, 0.0], 10)
            .await
            .unwrap(),
        vec![]
    );
    store.put_vectors(PROJECT, "m", &vectors).await.unwrap();
    assert_eq!(
        store
            .search_vector(PROJECT, "m", &[1.0, 1.0, 0.0], 10)
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        store.missing_vectors(PROJECT, "m", 10).await.unwrap().len(),
        1
    );
}

/// Nothing written to one project is visible in another.
pub async fn projects_are_isolated(store: Arc<dyn RagStore>) {
    let chunks = chunks_of("Secret sierra tango.", 100);
    store
        .put_file(PROJECT, &record("s.md", "h", &chunks), &chunks)
        .await
        .unwrap();
    let id = store.chunk(PROJECT, "s.md", 1).await.unwrap().unwrap().id;
    store
        .put_vectors(
            PROJECT,
            "m",
            &[ChunkVector {
                chunk_id: id,
                vector: vec![1.0],
            }],
        )
        .await
        .unwrap();
    assert_eq!(store.files(OTHER_PROJECT).await.unwrap(), vec![]);
    assert_eq!(store.file(OTHER_PROJECT, "s.md").await.unwrap(), None);
    assert_eq!(store.chunk(OTHER_PROJECT, "s.md", 1).await.unwrap(), None);
    assert_eq!(
        store
            .search_text(OTHER_PROJECT, &terms(&["sierra"]), 5)
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        store
            .search_vector(OTHER_PROJECT, "m", &[1.0], 5)
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        store.missing_vectors(OTHER_PROJECT, "m", 5).await.unwrap(),
        vec![]
    );
    assert!(!store.remove_file(OTHER_PROJECT, "s.md").await.unwrap());
    // Vectors for another project's chunk id are ignored.
    store
        .put_vectors(
            OTHER_PROJECT,
            "m",
            &[ChunkVector {
                chunk_id: id,
                vector: vec![1.0],
            }],
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .search_vector(OTHER_PROJECT, "m", &[1.0], 5)
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(store.files(PROJECT).await.unwrap().len(), 1);
}

/// Chunk lists that do not match the record, and bad project ids, are refused.
pub async fn invalid_writes_are_refused(store: Arc<dyn RagStore>) {
    let chunks = chunks_of("a b c", 1);
    let mut file = record("x.md", "h", &chunks);
    file.chunks = 2;
    assert!(matches!(
        store.put_file(PROJECT, &file, &chunks).await,
        Err(Error::Invalid(_))
    ));
    let mut shuffled = chunks.clone();
    shuffled.swap(0, 1);
    assert!(matches!(
        store
            .put_file(PROJECT, &record("x.md", "h", &shuffled), &shuffled)
            .await,
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        store.files("../etc").await,
        Err(Error::Invalid(_))
    ));
    assert_eq!(store.files(PROJECT).await.unwrap(), vec![]);
}

/// A project directory with the generated corpus; its questions.
fn corpus_project(dir: &Path) -> crate::corpus::Corpus {
    crate::corpus::write(dir, 2).unwrap()
}

/// The share of questions with a relevant chunk among the top 5, and every hit's citation
/// resolved to its stored chunk, checked against the file.
async fn recall_at_5(rag: &Rag, root: &Path, corpus: &crate::corpus::Corpus) -> f64 {
    let mut found = 0;
    for q in &corpus.questions {
        let result = rag.search(root, &q.question, 5).await.unwrap();
        assert!(result.hits.len() <= 5);
        for hit in &result.hits {
            let citation: Citation = hit.citation.parse().unwrap();
            assert_eq!(citation, Citation::new(&hit.path, hit.chunk));
            let stored = rag.resolve(root, &citation).await.unwrap().unwrap();
            assert_eq!(stored.chunk.text, hit.text, "{}", hit.citation);
            assert_eq!((stored.chunk.start, stored.chunk.end), (hit.start, hit.end));
            // The span is exact: in the file itself for text formats, in the extracted text
            // for the others.
            let bytes = std::fs::read(root.join(&hit.path)).unwrap();
            let format = crate::extract::Format::of(Path::new(&hit.path)).unwrap();
            let text = crate::extract::extract(format, &bytes, &hit.path).unwrap();
            assert_eq!(&text[hit.start..hit.end], hit.text, "{}", hit.citation);
            if format.spans_are_file_spans() {
                assert_eq!(&bytes[hit.start..hit.end], hit.text.as_bytes());
            }
            assert_eq!(
                hit.line_start as usize,
                text[..hit.start].matches('\n').count() + 1
            );
            assert_eq!(
                hit.line_end as usize,
                text[..hit.end].matches('\n').count() + 1
            );
        }
        if result.hits.iter().any(|h| q.answered_by(&h.path, &h.text)) {
            found += 1;
        } else {
            eprintln!(
                "miss: {} (answer in {}); got {:?}",
                q.question,
                q.path,
                result.hits.iter().map(|h| &h.citation).collect::<Vec<_>>()
            );
        }
    }
    found as f64 / corpus.questions.len() as f64
}

/// On the generated corpus (every format), full-text search finds a chunk holding the
/// answer within the top 5 for at least 90 % of the questions, and every citation resolves
/// to its exact chunk.
pub async fn corpus_recall_and_exact_citations(store: Arc<dyn RagStore>) {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus_project(dir.path());
    let rag = Rag::new(store, None, RagOptions::default());
    let report = rag.ingest(dir.path(), &[".".into()]).await.unwrap();
    assert_eq!(report.skipped, vec![]);
    assert_eq!(report.added.len(), corpus.files.len());
    let recall = recall_at_5(&rag, dir.path(), &corpus).await;
    assert!(recall >= 0.9, "recall@5 = {recall}");
}

/// Re-ingesting unchanged files writes nothing; a changed file's chunks are replaced, a
/// deleted file's removed, a new file's added — and search follows.
pub async fn reingestion_is_incremental(store: Arc<dyn RagStore>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let corpus = corpus_project(root);
    let rag = Rag::new(Arc::clone(&store), None, RagOptions::default());
    let first = rag.ingest(root, &["docs".into()]).await.unwrap();
    assert_eq!(first.files_seen, corpus.files.len());
    assert!(first.chunks_written > corpus.files.len());
    let (project, _) = Rag::project(root).unwrap();
    let before = store.files(&project).await.unwrap();
    let ids_before = store
        .chunk(&project, &corpus.files[0], 1)
        .await
        .unwrap()
        .unwrap()
        .id;

    let again = rag.ingest(root, &["docs".into()]).await.unwrap();
    assert_eq!(
        (again.files_seen, again.unchanged, again.chunks_written),
        (corpus.files.len(), corpus.files.len(), 0)
    );
    assert_eq!(
        (again.added.len(), again.updated.len(), again.removed.len()),
        (0, 0, 0)
    );
    assert_eq!(
        store.files(&project).await.unwrap(),
        before,
        "nothing rewritten"
    );
    assert_eq!(
        store
            .chunk(&project, &corpus.files[0], 1)
            .await
            .unwrap()
            .unwrap()
            .id,
        ids_before
    );

    // Change one, delete one, add one.
    let changed = &corpus.files[0];
    std::fs::write(
        root.join(changed),
        "# Replaced\n\nThe quokka census counted 412 animals.",
    )
    .unwrap();
    let deleted = &corpus.files[1];
    std::fs::remove_file(root.join(deleted)).unwrap();
    std::fs::write(root.join("docs/new.txt"), "Wombat burrows are cube-shaped.").unwrap();
    std::fs::write(root.join("docs/ignored.bin"), [0u8, 1, 2]).unwrap();
    let third = rag.ingest(root, &["docs".into()]).await.unwrap();
    assert_eq!(third.updated, vec![changed.clone()]);
    assert_eq!(third.removed, vec![deleted.clone()]);
    assert_eq!(third.added, vec!["docs/new.txt".to_string()]);
    assert_eq!(third.unchanged, corpus.files.len() - 2);
    assert_eq!(third.chunks_written, 2);
    let hits = rag.search(root, "quokka census", 5).await.unwrap().hits;
    assert_eq!(hits[0].citation, format!("[{changed}#chunk-1]"));
    assert_eq!(
        hits[0].text,
        "# Replaced\n\nThe quokka census counted 412 animals."
    );
    assert_eq!(store.chunk(&project, changed, 2).await.unwrap(), None);
    assert!(rag
        .search(root, "wombat burrows", 5)
        .await
        .unwrap()
        .hits
        .iter()
        .any(|h| h.path == "docs/new.txt"));
    assert_eq!(store.file(&project, deleted).await.unwrap(), None);

    // Naming a deleted file directly removes it too; naming a missing one is reported.
    std::fs::remove_file(root.join("docs/new.txt")).unwrap();
    let fourth = rag
        .ingest(root, &["docs/new.txt".into(), "nowhere.md".into()])
        .await
        .unwrap();
    assert_eq!(fourth.removed, vec!["docs/new.txt".to_string()]);
    assert_eq!(fourth.skipped.len(), 1);
    assert_eq!(fourth.skipped[0].path, "nowhere.md");
    // Outside the project: refused.
    assert!(matches!(
        rag.ingest(root, &["../".into()]).await,
        Err(Error::Path(_))
    ));
    assert!(matches!(
        rag.ingest(root, &[]).await,
        Err(Error::Invalid(_))
    ));
}

/// With an embedder, ingestion stores a vector per chunk (and only for new chunks when run
/// again), search reports the dense retriever and fuses both lists. The embedder here is the
/// feature-hashing stand-in: on ≈1,000-token chunks it is mostly noise, so fused recall is
/// only held to a floor (docs/benchmarks.md has the measured figures).
pub async fn dense_retrieval_fuses_with_full_text(store: Arc<dyn RagStore>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let corpus = corpus_project(root);
    let embedder = Arc::new(lumina_memory::embed::HashEmbeddings::new(256));
    let rag = Rag::new(Arc::clone(&store), Some(embedder), RagOptions::default());
    let report = rag.ingest(root, &[".".into()]).await.unwrap();
    assert_eq!(report.embedding_error, None);
    assert_eq!(report.vectors_written, report.chunks_written);
    let again = rag.ingest(root, &[".".into()]).await.unwrap();
    assert_eq!((again.chunks_written, again.vectors_written), (0, 0));
    let result = rag
        .search(root, &corpus.questions[0].question, 5)
        .await
        .unwrap();
    assert_eq!(
        result.dense_model.as_deref(),
        Some(rag.embedding_model().unwrap())
    );
    assert!(result.hits.iter().any(|h| h.dense_rank.is_some()));
    assert!(result.hits.iter().any(|h| h.text_rank.is_some()));
    let recall = recall_at_5(&rag, root, &corpus).await;
    assert!(recall >= 0.6, "fused recall@5 = {recall}");
}
