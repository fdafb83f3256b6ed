//! A real crash: an index build in another process is killed with SIGKILL mid-build, and the
//! next build resumes from the checkpoint it left (nothing published in between, rows after
//! the checkpoint only, the same answers as a build that never crashed).
//!
//! The building process is this test binary itself, re-run on the ignored test
//! `build_until_killed` with `LUMINA_MEMORY_KILL_DIR` set.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lumina_memory::{BuildLimits, MemoryStore, NewEvidence, RecallQuery};
use lumina_memory_sqlite::{SqliteMemory, SqliteOptions};

const DIR_VAR: &str = "LUMINA_MEMORY_KILL_DIR";
const SPACE: &str = "killed-space";
const ROWS: i64 = 6_000;

fn rows() -> Vec<NewEvidence> {
    (0..ROWS)
        .map(|i| NewEvidence {
            space: SPACE.into(),
            context: format!("session-{}", i / 100),
            session_id: format!("session-{}", i / 100),
            actor: if i % 2 == 0 { "Ana" } else { "Ben" }.into(),
            event_time_ms: 1_700_000_000_000 + i * 60_000,
            turn_order: i % 100,
            text: format!(
                "Turn {i}: we talked about item number {i} and the weather in town {}.",
                i % 37
            ),
            source_id: format!("src-{i}"),
            source_offset: i,
        })
        .collect()
}

fn checkpointed(index: &Path) -> i64 {
    rusqlite::Connection::open(index)
        .and_then(|c| {
            c.query_row("SELECT COALESCE(SUM(rows), 0) FROM checkpoints", [], |r| {
                r.get(0)
            })
        })
        .unwrap_or(0)
}

/// The child: builds in one-row batches (a checkpoint per row) until it is killed.
#[tokio::test]
#[ignore = "run by killed_build_resumes_from_its_checkpoint in a child process"]
async fn build_until_killed() {
    let Some(dir) = std::env::var_os(DIR_VAR) else {
        return;
    };
    let store = SqliteMemory::open(Path::new(&dir), SqliteOptions::default(), None).unwrap();
    store
        .sync(BuildLimits {
            batch_rows: 1,
            stop_after_rows: None,
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn killed_build_resumes_from_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteMemory::open(dir.path(), SqliteOptions::default(), None).unwrap();
    store.append(rows()).await.unwrap();
    let index = store.index_path();
    drop(store);

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sqlite::killed::build_until_killed",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env(DIR_VAR, dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while checkpointed(&index) < 50 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the build finished before it could be killed"
        );
        assert!(Instant::now() < deadline, "no checkpoint within 120 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let at_kill = checkpointed(&index);
    let building: u64 = rusqlite::Connection::open(&index)
        .unwrap()
        .query_row("SELECT MAX(generation) FROM checkpoints", [], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap() as u64;
    assert!(at_kill > 0 && at_kill < ROWS, "checkpointed {at_kill} rows");

    let store = SqliteMemory::open(dir.path(), SqliteOptions::default(), None).unwrap();
    assert_eq!(
        store.status(SPACE).await.unwrap().generation,
        0,
        "nothing published"
    );
    let resumed = store
        .sync(BuildLimits {
            batch_rows: 500,
            stop_after_rows: None,
        })
        .await
        .unwrap();
    // The same generation the killed build worked on, finished and published.
    assert_eq!(
        (resumed.generation, resumed.published),
        (building, true),
        "{resumed:?}"
    );
    // Only the rows after the checkpoint (at most one batch more than the count read just
    // before the kill) were indexed again.
    assert!(
        resumed.rows_indexed as i64 <= ROWS - at_kill,
        "resumed {} rows after {at_kill} were checkpointed",
        resumed.rows_indexed
    );
    let recall = store
        .recall(&RecallQuery::new(SPACE, "item number 4321"))
        .await
        .unwrap();
    assert_eq!(recall.items[0].source_id, "src-4321");
}
