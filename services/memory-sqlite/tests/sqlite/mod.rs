//! SQLite-specific behaviour: files, ledger immutability, fingerprints and rebuilds,
//! resumable index builds.

use std::path::Path;

use lumina_memory::conformance::{sample_conversation, OTHER_SPACE, SPACE};
use lumina_memory::derive::IndexOptions;
use lumina_memory::{BuildLimits, MemoryStore, RecallQuery};
use lumina_memory_sqlite::SqliteOptions;
use pretty_assertions::assert_eq;
use sha2::{Digest, Sha256};

mod killed;

use super::{reopen, sqlite_store, TempStore};

fn file_hash(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

fn window(w: usize) -> SqliteOptions {
    SqliteOptions {
        index: IndexOptions {
            window: w,
            ..IndexOptions::default()
        },
        ..SqliteOptions::default()
    }
}

fn generation_tables(index: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(index).unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'g*_docs' ORDER BY name")
        .unwrap();
    let rows = stmt.query_map([], |r| r.get(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

fn recall_ids(recall: &lumina_memory::Recall) -> Vec<(u64, String)> {
    recall
        .items
        .iter()
        .map(|i| (i.event_id, i.source_id.clone()))
        .collect()
}

#[tokio::test]
async fn files_live_under_the_app_root() {
    let fixture = sqlite_store().await;
    let fabric = fixture.dir.path().join("data/memory/fabric");
    assert_eq!(fixture.store.ledger_path(), fabric.join("ledger.sqlite"));
    assert_eq!(fixture.store.index_path(), fabric.join("index.sqlite"));
    assert!(fabric.join("ledger.sqlite").exists() && fabric.join("index.sqlite").exists());
}

#[tokio::test]
async fn evidence_cannot_be_updated_or_deleted() {
    let fixture = sqlite_store().await;
    fixture
        .store
        .append(sample_conversation(SPACE))
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(fixture.store.ledger_path()).unwrap();
    let update = conn.execute("UPDATE evidence SET text = 'forged' WHERE event_id = 1", []);
    assert!(update
        .unwrap_err()
        .to_string()
        .contains("evidence is immutable"));
    let delete = conn.execute("DELETE FROM evidence", []);
    assert!(delete
        .unwrap_err()
        .to_string()
        .contains("evidence is immutable"));
}

#[tokio::test]
async fn fingerprint_change_rebuilds_without_touching_the_ledger() {
    let fixture = sqlite_store().await;
    fixture
        .store
        .append(sample_conversation(SPACE))
        .await
        .unwrap();
    let query = RecallQuery::new(SPACE, "hiking in the Dolomites");
    let first = fixture.store.recall(&query).await.unwrap();
    assert_eq!((first.stats.generation, first.stats.rebuilt), (1, true));
    let evidence = fixture.store.read(SPACE, 0, usize::MAX).await.unwrap();
    let ledger = fixture.store.ledger_path();
    let index = fixture.store.index_path();
    drop(first);
    // Closing the last connection checkpoints the WAL into the file; hash it after that.
    let old_fingerprint = fixture.store.fingerprint().to_owned();
    let TempStore { store, dir } = fixture;
    drop(store);
    let before = file_hash(&ledger);

    let store = reopen(&dir, window(3));
    assert_ne!(store.fingerprint(), old_fingerprint);
    let status = store.status(SPACE).await.unwrap();
    assert!(!status.aligned());
    assert_eq!(status.fingerprint, old_fingerprint);
    let second = store.recall(&query).await.unwrap();
    assert_eq!((second.stats.generation, second.stats.rebuilt), (2, true));
    assert_eq!(second.stats.aligned_rows, evidence.len() as u64);
    assert_eq!(second.items[0].source_id, "s1:1");
    assert!(store.status(SPACE).await.unwrap().aligned());
    assert_eq!(
        generation_tables(&index),
        ["g2_docs"],
        "the old generation is dropped"
    );
    // The same configuration again: aligned, nothing rebuilt.
    let third = store.recall(&query).await.unwrap();
    assert_eq!(
        (
            third.stats.generation,
            third.stats.rebuilt,
            third.stats.aligned_rows
        ),
        (2, false, 0)
    );
    assert_eq!(store.read(SPACE, 0, usize::MAX).await.unwrap(), evidence);
    drop(store);
    assert_eq!(
        file_hash(&ledger),
        before,
        "ledger bytes unchanged by the rebuild"
    );
}

#[tokio::test]
async fn a_checkpoint_that_is_not_a_ledger_prefix_rebuilds() {
    let fixture = sqlite_store().await;
    fixture
        .store
        .append(sample_conversation(SPACE))
        .await
        .unwrap();
    fixture.store.sync(BuildLimits::default()).await.unwrap();
    let conn = rusqlite::Connection::open(fixture.store.index_path()).unwrap();
    conn.execute("UPDATE checkpoints SET chain = 'not-the-ledger'", [])
        .unwrap();
    drop(conn);
    let recall = fixture
        .store
        .recall(&RecallQuery::new(SPACE, "sourdough bread"))
        .await
        .unwrap();
    assert!(recall.stats.rebuilt);
    assert_eq!(recall.stats.generation, 2);
    assert_eq!(recall.items[0].source_id, "s2:1");
}

#[tokio::test]
async fn an_interrupted_build_resumes_from_its_checkpoint() {
    let fixture = sqlite_store().await;
    let rows = sample_conversation(SPACE);
    fixture.store.append(rows.clone()).await.unwrap();
    fixture
        .store
        .append(sample_conversation(OTHER_SPACE))
        .await
        .unwrap();
    let total = 2 * rows.len() as u64;
    let limits = BuildLimits {
        batch_rows: 3,
        stop_after_rows: Some(7),
    };
    let paused = fixture.store.sync(limits).await.unwrap();
    assert_eq!(
        (
            paused.generation,
            paused.rebuilt,
            paused.published,
            paused.paused,
            paused.rows_indexed
        ),
        (1, true, false, true, 7)
    );
    assert_eq!(
        fixture.store.status(SPACE).await.unwrap().generation,
        0,
        "nothing published"
    );
    // "Crash": drop the store, open the files again, run the job to the end.
    let index = fixture.store.index_path();
    let TempStore { store, dir } = fixture;
    drop(store);
    let conn = rusqlite::Connection::open(&index).unwrap();
    let checkpointed: i64 = conn
        .query_row(
            "SELECT SUM(rows) FROM checkpoints WHERE generation = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(checkpointed, 7);
    drop(conn);
    let store = reopen(&dir, SqliteOptions::default());
    let resumed = store
        .sync(BuildLimits {
            batch_rows: 3,
            stop_after_rows: None,
        })
        .await
        .unwrap();
    assert_eq!(
        (
            resumed.generation,
            resumed.published,
            resumed.paused,
            resumed.rows_indexed
        ),
        (1, true, false, total - 7)
    );
    // The resumed index answers exactly like one built in a single run.
    let fresh = sqlite_store().await;
    fresh.store.append(rows).await.unwrap();
    fresh
        .store
        .append(sample_conversation(OTHER_SPACE))
        .await
        .unwrap();
    for text in [
        "Biscuit is afraid of water",
        "sourdough starter",
        "sailing trip to Croatia",
    ] {
        for space in [SPACE, OTHER_SPACE] {
            let q = RecallQuery::new(space, text);
            let a = store.recall(&q).await.unwrap();
            let b = fresh.store.recall(&q).await.unwrap();
            assert!(!a.stats.rebuilt && a.stats.aligned_rows == 0);
            assert_eq!(recall_ids(&a), recall_ids(&b), "{space}: {text}");
            let scores =
                |r: &lumina_memory::Recall| r.items.iter().map(|i| i.score).collect::<Vec<_>>();
            assert_eq!(scores(&a), scores(&b));
        }
    }
}

#[tokio::test]
async fn a_paused_catch_up_continues_on_the_next_query() {
    let fixture = sqlite_store().await;
    let rows = sample_conversation(SPACE);
    fixture.store.append(rows[..4].to_vec()).await.unwrap();
    fixture.store.sync(BuildLimits::default()).await.unwrap();
    fixture.store.append(rows[4..].to_vec()).await.unwrap();
    let paused = fixture
        .store
        .sync(BuildLimits {
            batch_rows: 2,
            stop_after_rows: Some(2),
        })
        .await
        .unwrap();
    assert_eq!(
        (paused.rebuilt, paused.paused, paused.rows_indexed),
        (false, true, 2)
    );
    let recall = fixture
        .store
        .recall(&RecallQuery::new(SPACE, "sailing trip to Croatia"))
        .await
        .unwrap();
    assert_eq!(recall.stats.aligned_rows, rows.len() as u64 - 6);
    assert_eq!(recall.items[0].source_id, "s2:4");
    assert!(fixture.store.status(SPACE).await.unwrap().aligned());
}

#[tokio::test]
async fn the_token_budget_holds_for_long_evidence() {
    let fixture = sqlite_store().await;
    let mut rows = sample_conversation(SPACE);
    rows[0].text = format!(
        "{} {}",
        rows[0].text,
        "The trails were long and steep. ".repeat(40)
    );
    fixture.store.append(rows).await.unwrap();
    let q = RecallQuery {
        max_items: 5,
        token_budget: 60,
        ..RecallQuery::new(SPACE, "hiking trip Dolomites trails")
    };
    let recall = fixture.store.recall(&q).await.unwrap();
    assert!(!recall.items.is_empty());
    assert!(
        recall.items.iter().all(|i| i.source_id != "s1:1"),
        "too long for the budget"
    );
    assert!(recall.items.iter().map(|i| i.tokens).sum::<usize>() <= 60);
    let wide = fixture
        .store
        .recall(&RecallQuery {
            token_budget: 1_000,
            ..q
        })
        .await
        .unwrap();
    assert_eq!(wide.items[0].source_id, "s1:1");
    let (a, b) = wide.items[0].span;
    assert!(
        wide.items[0].text[a..b].contains("Dolomites"),
        "the best span is the matching sentence"
    );
}

#[tokio::test]
async fn compile_survives_a_restart_and_never_writes_the_ledger_file() {
    use lumina_memory::conformance::{node_json, profile_conversation, ScriptedModel};
    use lumina_memory::semantic::NodeStatus;
    use lumina_memory::CompileLimits;

    let fixture = sqlite_store().await;
    let ids: Vec<u64> = fixture
        .store
        .append(profile_conversation(SPACE))
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.evidence.event_id)
        .collect();
    let ledger = fixture.store.ledger_path();
    let index = fixture.store.index_path();
    let TempStore { store, dir } = fixture;
    drop(store);
    let before = file_hash(&ledger);

    let model = ScriptedModel::new();
    model
        .nodes(vec![node_json(
            "fact",
            ("user", "lives in", "Berlin"),
            &[(ids[0], "I live in Berlin")],
        )])
        .nodes(vec![node_json(
            "fact",
            ("user", "lives in", "Lisbon"),
            &[(ids[4], "I moved to Lisbon")],
        )]);
    let limits = CompileLimits {
        batch_rows: 4,
        stop_after_batches: Some(1),
        ..CompileLimits::default()
    };
    let store = reopen(&dir, SqliteOptions::default());
    let first = store.compile(SPACE, &model, limits).await.unwrap();
    assert!(first.paused);
    drop(store);

    // "Crash" and restart: the checkpoint is in index.sqlite; the job goes on from it.
    let conn = rusqlite::Connection::open(&index).unwrap();
    let checkpoint: i64 = conn
        .query_row(
            "SELECT last_event_id FROM semantic_state WHERE space = ?1",
            [SPACE],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(checkpoint as u64, ids[3]);
    drop(conn);
    let store = reopen(&dir, SqliteOptions::default());
    let rest = store
        .compile(
            SPACE,
            &model,
            CompileLimits {
                stop_after_batches: None,
                ..limits
            },
        )
        .await
        .unwrap();
    assert_eq!((rest.batches, rest.superseded), (1, 1));
    assert_eq!(model.prompts().len(), 2);
    let statuses: Vec<NodeStatus> = store
        .nodes(SPACE)
        .await
        .unwrap()
        .iter()
        .map(|n| n.status)
        .collect();
    assert_eq!(statuses, [NodeStatus::Superseded, NodeStatus::Active]);
    store.reset_semantic(SPACE).await.unwrap();
    drop(store);
    assert_eq!(
        file_hash(&ledger),
        before,
        "ledger bytes unchanged by compiles"
    );
}

#[tokio::test]
async fn a_compile_checkpoint_that_is_not_the_ledger_rebuilds_the_nodes() {
    use lumina_memory::conformance::{node_json, profile_conversation, ScriptedModel};
    use lumina_memory::CompileLimits;

    let fixture = sqlite_store().await;
    let store = &fixture.store;
    let ids: Vec<u64> = store
        .append(profile_conversation(SPACE))
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.evidence.event_id)
        .collect();
    let model = ScriptedModel::new();
    let berlin = node_json(
        "fact",
        ("user", "lives in", "Berlin"),
        &[(ids[0], "I live in Berlin")],
    );
    model.nodes(vec![berlin.clone()]).nodes(vec![berlin]);
    let first = store
        .compile(SPACE, &model, CompileLimits::default())
        .await
        .unwrap();
    assert!(!first.rebuilt);
    let conn = rusqlite::Connection::open(store.index_path()).unwrap();
    conn.execute("UPDATE semantic_state SET checksum = 'not-the-ledger'", [])
        .unwrap();
    drop(conn);
    let second = store
        .compile(SPACE, &model, CompileLimits::default())
        .await
        .unwrap();
    assert!(second.rebuilt);
    assert_eq!(second.batches, 1);
    assert_eq!(store.nodes(SPACE).await.unwrap().len(), 1);
}
