//! The PostgreSQL store: the conformance suite on a fresh database per test (the shared
//! test server), then tenant isolation, ledger immutability, fencing, resumable builds and
//! the exact/HNSW threshold.

use std::sync::Arc;

use lumina_memory::conformance::{sample_conversation, StoreFixture, SPACE};
use lumina_memory::embed::{EmbeddingProvider, HashEmbeddings};
use lumina_memory::{BuildLimits, Error, MemoryStore, NewEvidence, RecallQuery, RetrievalOptions};
use lumina_memory_postgres::{PgMemory, PgMemoryOptions};
use lumina_testkit::postgres::PgServer;
use pretty_assertions::assert_eq;

/// A fresh, migrated database on the shared server: (URL, database name).
pub async fn fresh_database() -> (String, String) {
    let url = tokio::task::spawn_blocking(|| {
        PgServer::shared()
            .unwrap()
            .create_unique_database("memory")
            .unwrap()
    })
    .await
    .unwrap();
    let journal = lumina_journal::postgres::PgJournal::connect(&url, 1).unwrap();
    journal.migrate().await.unwrap();
    let name = url.rsplit('/').next().unwrap().to_owned();
    (url, name)
}

/// The options a store was made with: its tenant and threshold (what these tests vary).
fn store_options(store: &PgMemory) -> PgMemoryOptions {
    let threshold = if store.tenant() == "hnsw" { 50 } else { 50_000 };
    PgMemoryOptions {
        exact_threshold: threshold,
        ..options(store.tenant())
    }
}

fn options(tenant: &str) -> PgMemoryOptions {
    PgMemoryOptions {
        tenant: tenant.to_owned(),
        pool_size: 4,
        ..PgMemoryOptions::default()
    }
}

/// A store on its own database.
pub struct PgStore {
    pub store: Arc<PgMemory>,
    pub url: String,
    pub database: String,
}

impl StoreFixture for PgStore {
    fn store(&self) -> Arc<dyn MemoryStore> {
        self.store.clone()
    }

    fn reopen(&self) -> Arc<dyn MemoryStore> {
        Arc::new(PgMemory::connect(&self.url, options("t1"), None).unwrap())
    }
}

/// A fresh PostgreSQL store (tenant `t1`) on a fresh database.
pub async fn pg_store() -> PgStore {
    let (url, database) = fresh_database().await;
    let store = Arc::new(PgMemory::connect(&url, options("t1"), None).unwrap());
    PgStore {
        store,
        url,
        database,
    }
}

mod build_lock;

mod conformance {
    lumina_memory::memory_conformance_suite!(super::pg_store());
}

fn psql(database: &str, sql: &str) -> anyhow::Result<String> {
    PgServer::shared().unwrap().psql(database, sql)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_with_the_same_space_never_meet() {
    let fixture = pg_store().await;
    let a = fixture.store.clone();
    let b = PgMemory::connect(&fixture.url, options("t2"), None).unwrap();
    a.append(sample_conversation(SPACE)).await.unwrap();
    let mut other = sample_conversation(SPACE);
    for e in &mut other {
        e.text = format!("{} (tenant two)", e.text);
    }
    b.append(other[..3].to_vec()).await.unwrap();

    assert_eq!(a.head(SPACE).await.unwrap().rows, 10);
    assert_eq!(b.head(SPACE).await.unwrap().rows, 3);
    assert_eq!(b.spaces().await.unwrap(), vec![SPACE.to_owned()]);
    let a_ids: Vec<u64> = a
        .read(SPACE, 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.event_id)
        .collect();
    assert!(b.get(SPACE, &a_ids).await.unwrap().is_empty());
    assert!(b
        .read(SPACE, 0, 100)
        .await
        .unwrap()
        .iter()
        .all(|e| e.row.text.ends_with("(tenant two)")));

    let recall = b
        .recall(&RecallQuery::new(SPACE, "Is the dog afraid of water?"))
        .await
        .unwrap();
    assert!(recall.items.iter().all(|i| !a_ids.contains(&i.event_id)));
    let recall = a
        .recall(&RecallQuery::new(SPACE, "sourdough starter"))
        .await
        .unwrap();
    assert!(!recall.items.is_empty());
    assert!(recall.items.iter().all(|i| a_ids.contains(&i.event_id)));
    // Each tenant has its own generations.
    assert!(b.status(SPACE).await.unwrap().aligned());
    assert!(a.status(SPACE).await.unwrap().aligned());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_is_immutable_in_the_database() {
    let fixture = pg_store().await;
    fixture
        .store
        .append(sample_conversation(SPACE))
        .await
        .unwrap();
    for sql in [
        "UPDATE memory_evidence SET text = 'changed'",
        "DELETE FROM memory_evidence",
        "TRUNCATE memory_evidence",
    ] {
        let err = psql(&fixture.database, sql).unwrap_err();
        assert!(format!("{err:#}").contains("immutable"), "{sql}: {err:#}");
    }
    assert_eq!(fixture.store.head(SPACE).await.unwrap().rows, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_fences_are_refused() {
    let fixture = pg_store().await;
    let old = PgMemory::connect(
        &fixture.url,
        PgMemoryOptions {
            fence: 1,
            ..options("t1")
        },
        None,
    )
    .unwrap();
    let new = PgMemory::connect(
        &fixture.url,
        PgMemoryOptions {
            fence: 2,
            ..options("t1")
        },
        None,
    )
    .unwrap();
    let rows = sample_conversation(SPACE);
    old.append(rows[..2].to_vec()).await.unwrap();
    new.append(rows[2..4].to_vec()).await.unwrap();
    match old.append(rows[4..].to_vec()).await {
        Err(Error::Fenced {
            fence: 1,
            current: 2,
            ..
        }) => {}
        other => panic!("expected Fenced, got {other:?}"),
    }
    // The stale writer's index job is refused too; the current one's proceeds.
    assert!(matches!(
        old.sync(BuildLimits::default()).await,
        Err(Error::Fenced { .. })
    ));
    new.sync(BuildLimits::default()).await.unwrap();
    assert_eq!(new.head(SPACE).await.unwrap().rows, 4);
    // Another space has its own fence.
    let mut elsewhere = rows[4].clone();
    elsewhere.space = "project-z".into();
    old.append(vec![elsewhere]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_builds_resume_and_publish_once() {
    let fixture = pg_store().await;
    let store = &fixture.store;
    store.append(sample_conversation(SPACE)).await.unwrap();
    let first = store
        .sync(BuildLimits {
            batch_rows: 3,
            stop_after_rows: Some(4),
        })
        .await
        .unwrap();
    assert!(first.paused && first.rebuilt && !first.published);
    assert_eq!(first.rows_indexed, 4);
    assert_eq!(store.status(SPACE).await.unwrap().generation, 0);
    let second = store.sync(BuildLimits::default()).await.unwrap();
    assert_eq!(
        (second.generation, second.rows_indexed),
        (first.generation, 6)
    );
    assert!(second.published);
    assert!(store.status(SPACE).await.unwrap().aligned());
    let rows = psql(
        &fixture.database,
        "SELECT count(*) FROM memory_generations WHERE tenant = 't1'",
    )
    .unwrap();
    assert_eq!(rows, "1");
}

/// A synthetic set: `n` facts "<name> keeps a <colour> <thing> in <place>", each asked
/// about once. Returns the rows and (question, source id) pairs.
fn synthetic(space: &str, n: usize) -> (Vec<NewEvidence>, Vec<(String, String)>) {
    const NAMES: &[&str] = &["Ana", "Ben", "Cora", "Dan", "Eli", "Fay", "Gus", "Hana"];
    const COLOURS: &[&str] = &["red", "blue", "green", "amber", "violet", "white"];
    const THINGS: &[&str] = &[
        "kayak",
        "guitar",
        "bicycle",
        "telescope",
        "lantern",
        "notebook",
        "camera",
    ];
    const PLACES: &[&str] = &[
        "garage", "attic", "cellar", "office", "shed", "studio", "barn", "loft", "porch",
    ];
    let (mut rows, mut questions) = (Vec::new(), Vec::new());
    for i in 0..n {
        let (name, colour) = (NAMES[i % NAMES.len()], COLOURS[i % COLOURS.len()]);
        let (thing, place) = (THINGS[i % THINGS.len()], PLACES[(i / 3) % PLACES.len()]);
        let source_id = format!("f{i}");
        rows.push(NewEvidence {
            space: space.to_owned(),
            context: format!("session-{}", i / 10),
            session_id: format!("session-{}", i / 10),
            actor: name.to_owned(),
            event_time_ms: 1_700_000_000_000 + i as i64 * 60_000,
            turn_order: (i % 10) as i64,
            text: format!("I keep my {colour} {thing} in the {place}."),
            source_id: source_id.clone(),
            source_offset: i as i64,
        });
        questions.push((
            format!("Where does {name} keep the {colour} {thing}?"),
            source_id,
        ));
    }
    (rows, questions)
}

async fn recall_at(store: &PgMemory, space: &str, questions: &[(String, String)], k: usize) -> f64 {
    let mut hits = 0usize;
    for (q, source) in questions {
        let mut query = RecallQuery::new(space, q.as_str());
        query.max_items = k;
        query.token_budget = usize::MAX;
        let recall = store.recall(&query).await.unwrap();
        if recall.items.iter().any(|i| &i.source_id == source) {
            hits += 1;
        }
    }
    100.0 * hits as f64 / questions.len() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossing_the_hnsw_threshold_keeps_recall() {
    let (url, database) = fresh_database().await;
    let embedder: Arc<dyn EmbeddingProvider> = Arc::new(HashEmbeddings::new(64));
    let exact = PgMemory::connect(&url, options("exact"), Some(embedder.clone())).unwrap();
    let hnsw = PgMemory::connect(
        &url,
        PgMemoryOptions {
            exact_threshold: 50,
            ..options("hnsw")
        },
        Some(embedder),
    )
    .unwrap();
    let (rows, questions) = synthetic(SPACE, 400);
    for store in [&exact, &hnsw] {
        store.append(rows.clone()).await.unwrap();
        store.sync(BuildLimits::default()).await.unwrap();
    }
    assert!(!exact.uses_hnsw(SPACE).await.unwrap());
    assert!(hnsw.uses_hnsw(SPACE).await.unwrap());
    // The partial expression index matches the query shape of the read path.
    let plan = psql(
        &database,
        &format!(
            "SET enable_seqscan = off; EXPLAIN SELECT event_id FROM memory_vectors \
             WHERE tenant = 'hnsw' AND generation = 1 AND space = '{SPACE}' \
             ORDER BY embedding::vector(64) <=> (SELECT embedding::vector(64) \
             FROM memory_vectors LIMIT 1) LIMIT 10"
        ),
    )
    .unwrap();
    assert!(plan.contains("memory_hnsw_"), "{plan}");

    // The whole pipeline, then dense retrieval alone (no lexical lists, graph or sparse
    // span score), where the HNSW candidate list decides everything. The stores differ
    // only in query-time options, so they read the same published generations.
    let dense_only = RetrievalOptions {
        fulltext_weight: 0.0,
        sparse_weight: 0.0,
        dense_weight: 1.0,
        graph_weight: 0.0,
        span_sparse: 0.0,
        coverage_weight: 0.0,
        ..RetrievalOptions::default()
    };
    for (label, retrieval) in [("full", RetrievalOptions::default()), ("dense", dense_only)] {
        let with = |store: &PgMemory| {
            PgMemory::connect(
                &url,
                PgMemoryOptions {
                    retrieval: retrieval.clone(),
                    ..store_options(store)
                },
                Some(Arc::new(HashEmbeddings::new(64))),
            )
            .unwrap()
        };
        let (exact, hnsw) = (with(&exact), with(&hnsw));
        // The HNSW store's dense list comes from the index, the exact one's from the scan.
        for store in [&exact, &hnsw] {
            let recall = store
                .recall(&RecallQuery::new(SPACE, questions[0].0.as_str()))
                .await
                .unwrap();
            assert!(recall.stats.dense > 0, "{label}: {:?}", recall.stats);
        }
        for k in [1, 5] {
            let exact_recall = recall_at(&exact, SPACE, &questions, k).await;
            let hnsw_recall = recall_at(&hnsw, SPACE, &questions, k).await;
            println!("synthetic {label} R@{k}: exact {exact_recall:.1}, hnsw {hnsw_recall:.1}");
            assert!(exact_recall > 20.0, "{label} exact R@{k} {exact_recall}");
            assert!(
                (exact_recall - hnsw_recall).abs() <= 2.0,
                "{label} R@{k}: exact {exact_recall} vs hnsw {hnsw_recall}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_fences_refuse_semantic_writes_and_tenants_stay_apart() {
    use lumina_memory::conformance::{node_json, profile_conversation, ScriptedModel};
    use lumina_memory::CompileLimits;

    let fixture = pg_store().await;
    let connect = |tenant: &str, fence: u64| {
        PgMemory::connect(
            &fixture.url,
            PgMemoryOptions {
                fence,
                ..options(tenant)
            },
            None,
        )
        .unwrap()
    };
    let (old, new) = (connect("t1", 1), connect("t1", 2));
    let rows = profile_conversation(SPACE);
    let ids: Vec<u64> = old
        .append(rows[..4].to_vec())
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.evidence.event_id)
        .collect();
    new.append(rows[4..].to_vec()).await.unwrap();
    let berlin = node_json(
        "fact",
        ("user", "lives in", "Berlin"),
        &[(ids[0], "I live in Berlin")],
    );
    let model = ScriptedModel::new();
    model.nodes(vec![berlin.clone()]).nodes(vec![berlin]);
    match old.compile(SPACE, &model, CompileLimits::default()).await {
        Err(Error::Fenced {
            fence: 1,
            current: 2,
            ..
        }) => {}
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert!(matches!(
        old.reset_semantic(SPACE).await,
        Err(Error::Fenced { .. })
    ));
    assert!(new.nodes(SPACE).await.unwrap().is_empty());
    assert_eq!(new.semantic_status(SPACE).await.unwrap().last_event_id, 0);
    let report = new
        .compile(SPACE, &model, CompileLimits::default())
        .await
        .unwrap();
    assert_eq!(report.accepted, 1);

    // Another tenant with the same space name sees none of it, and cannot cite it.
    let other = connect("t2", 0);
    assert!(other.nodes(SPACE).await.unwrap().is_empty());
    assert_eq!(other.semantic_status(SPACE).await.unwrap().last_event_id, 0);
    other.append(rows[..1].to_vec()).await.unwrap();
    let foreign = ScriptedModel::new();
    foreign.nodes(vec![node_json(
        "fact",
        ("user", "lives in", "Berlin"),
        &[(ids[0], "I live in Berlin")],
    )]);
    let report = other
        .compile(SPACE, &foreign, CompileLimits::default())
        .await
        .unwrap();
    assert_eq!((report.accepted, report.rejected), (0, 1));
    assert_eq!(new.nodes(SPACE).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learned_sparse_and_token_vectors_score_candidates() {
    use lumina_memory::conformance::{
        multi_output_model, recall_uses_learned_sparse_and_token_vectors,
    };
    let (url, database) = fresh_database().await;
    let open = || -> Arc<dyn MemoryStore> {
        Arc::new(PgMemory::connect(&url, options("t1"), Some(multi_output_model())).unwrap())
    };
    recall_uses_learned_sparse_and_token_vectors(open(), async { open() }).await;
    // The weights are postings by vocabulary id.
    let postings = psql(
        &database,
        "SELECT count(*) > 10, bool_and(weight > 0) FROM memory_sparse_postings",
    )
    .unwrap();
    assert_eq!(postings.trim(), "t|t");
}

/// The conformance check of refreshed views with a model of every output (dense, learned
/// sparse, token vectors) and span vectors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refreshed_views_with_vectors_rank_like_built_ones() {
    use lumina_memory::conformance::{multi_output_model, refreshed_views_rank_like_built_ones};
    let (url, _database) = fresh_database().await;
    let open = || -> Arc<dyn MemoryStore> {
        Arc::new(PgMemory::connect(&url, options("t1"), Some(multi_output_model())).unwrap())
    };
    refreshed_views_rank_like_built_ones(open(), &open).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn span_vectors_score_the_closest_sentence() {
    let (url, database) = fresh_database().await;
    let open = |tenant: &str, spans: bool| -> Arc<dyn MemoryStore> {
        let mut o = options(tenant);
        o.index.span_vectors = spans;
        Arc::new(PgMemory::connect(&url, o, Some(Arc::new(HashEmbeddings::new(64)))).unwrap())
    };
    lumina_memory::conformance::span_vectors_score_the_closest_sentence(
        open("with", true),
        open("without", false),
    )
    .await;
    // The event's two sentences are its event windows, at half precision.
    let stored = psql(
        &database,
        "SELECT tenant, count(*), min(pg_typeof(embedding)::text) FROM memory_event_windows \
         GROUP BY tenant",
    )
    .unwrap();
    assert_eq!(stored.trim(), "with|2|halfvec");
}

/// A bulk index run refreshes the planner statistics of the tables the read path queries
/// (without them the full-text query's plans are several times slower).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_index_run_refreshes_planner_statistics() {
    let (url, database) = fresh_database().await;
    let analyzed = || {
        psql(
            &database,
            "SELECT count(*) FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL \
             AND relname IN ('memory_evidence', 'memory_windows', 'memory_vectors')",
        )
        .unwrap()
        .trim()
        .to_owned()
    };
    let store = PgMemory::connect(&url, options("t1"), None).unwrap();
    store.append(synthetic(SPACE, 100).0).await.unwrap();
    store.sync(BuildLimits::default()).await.unwrap();
    assert_eq!(analyzed(), "0", "a small run leaves it to autovacuum");
    store
        .append(synthetic(SPACE, 1_100).0.split_off(100))
        .await
        .unwrap();
    store.sync(BuildLimits::default()).await.unwrap();
    assert_eq!(analyzed(), "3");
}

/// The event/context/concept graph is stored per generation (`memory_edges`), and a
/// model change builds the next generation's edges beside it until it is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_edges_are_stored_per_generation() {
    let (url, database) = fresh_database().await;
    let store = PgMemory::connect(&url, options("t1"), None).unwrap();
    store.append(sample_conversation(SPACE)).await.unwrap();
    store.sync(BuildLimits::default()).await.unwrap();
    let edges = psql(
        &database,
        "SELECT kind, count(*) FROM memory_edges WHERE generation = 1 GROUP BY kind ORDER BY kind",
    )
    .unwrap();
    // One context edge per event; concepts (names, numbers, months) of the texts.
    let mut lines = edges.lines();
    assert_eq!(lines.next(), Some("1|10"), "{edges}");
    assert!(lines.next().is_some_and(|l| l.starts_with("2|")), "{edges}");
    let biscuit = psql(
        &database,
        "SELECT count(*) FROM memory_edges WHERE kind = 2 AND node = 'k:biscuit'",
    )
    .unwrap();
    assert_eq!(biscuit.trim(), "2");
    // A rebuild (another model) publishes generation 2 and drops generation 1's edges.
    let other =
        PgMemory::connect(&url, options("t1"), Some(Arc::new(HashEmbeddings::new(8)))).unwrap();
    other.sync(BuildLimits::default()).await.unwrap();
    let generations = psql(
        &database,
        "SELECT DISTINCT generation FROM memory_edges ORDER BY 1",
    )
    .unwrap();
    assert_eq!(generations.trim(), "2");
}
