//! SQLite-specific behaviour: on-disk layout, durability, archive moves, path safety.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use lumina_journal::sqlite::SqliteJournal;
use lumina_journal::{
    bench, now_ms, AppendBatch, CommandRecord, Error, JournalStore, NewEvent, SessionKey,
    SessionRecord, BLOB_THRESHOLD_BYTES,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::sqlite_store;

fn record(id: &str) -> SessionRecord {
    SessionRecord {
        tenant: "t1".into(),
        session_id: id.into(),
        title: format!("session {id}"),
        project_root: "/work/project".into(),
        created_at_ms: 1_000,
        updated_at_ms: 1_000,
        archived: false,
        summary: serde_json::Value::Null,
    }
}

fn events(n: usize) -> Vec<NewEvent> {
    (0..n)
        .map(|i| NewEvent {
            kind: "message".into(),
            payload: json!({ "n": i }),
        })
        .collect()
}

fn big_event() -> NewEvent {
    NewEvent {
        kind: "tool".into(),
        payload: json!({ "output": "z".repeat(BLOB_THRESHOLD_BYTES * 2) }),
    }
}

fn key(id: &str) -> SessionKey {
    SessionKey::new("t1", id)
}

/// Opens a session file directly, as an operator (or a crash-recovery tool) would.
fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

fn count(conn: &rusqlite::Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |row| row.get(0)).unwrap()
}

#[tokio::test]
async fn reopening_the_store_keeps_everything() {
    let fixture = sqlite_store().await;
    let store = &fixture.store;
    store.create_session(&record("s1"), 3).await.unwrap();
    let k = key("s1");
    let mut with_command = AppendBatch::any("a", events(3));
    with_command.command = Some(CommandRecord {
        key: "cmd".into(),
        result: json!({"ok": true}),
    });
    store.append(&k, 3, with_command).await.unwrap();
    store
        .append(&k, 4, AppendBatch::any("b", vec![big_event()]))
        .await
        .unwrap();
    let sha = store.put_blob(&k, 4, b"bytes").await.unwrap();
    store
        .set_consumer_offset(&k, 4, "projection", 2)
        .await
        .unwrap();
    store
        .put_summary(&k, 4, &json!({"title": "kept"}))
        .await
        .unwrap();

    let before = (
        store.read(&k, 0, 100).await.unwrap(),
        store.session("t1", "s1").await.unwrap(),
    );
    let super::TempStore { store, dir } = fixture;
    drop(store);
    let reopened = SqliteJournal::open(dir.path().join("data/sessions"), "t1").unwrap();
    let after = (
        reopened.read(&k, 0, 100).await.unwrap(),
        reopened.session("t1", "s1").await.unwrap(),
    );
    assert_eq!(after, before);
    assert_eq!(reopened.fence(&k).await.unwrap(), 4);
    assert_eq!(
        reopened.command_result(&k, "cmd").await.unwrap(),
        Some(json!({"ok": true}))
    );
    assert_eq!(
        reopened.get_blob(&k, &sha).await.unwrap(),
        Some(b"bytes".to_vec())
    );
    assert_eq!(reopened.consumer_offset(&k, "projection").await.unwrap(), 2);
    assert_eq!(reopened.head(&k).await.unwrap(), 4);
}

/// A committed append is in the files the moment `append` returns, with the connection
/// still open and nothing checkpointed: what a `kill -9` would leave behind.
#[tokio::test]
async fn committed_appends_survive_a_crash_copy() {
    let fixture = sqlite_store().await;
    let store = &fixture.store;
    store.create_session(&record("s1"), 1).await.unwrap();
    let appended = store
        .append(&key("s1"), 1, AppendBatch::any("a", events(5)))
        .await
        .unwrap();

    let live = fixture.sessions_dir().join("active/s1");
    let crashed = fixture.dir.path().join("crashed");
    fs::create_dir(&crashed).unwrap();
    for file in ["runtime.sqlite", "runtime.sqlite-wal"] {
        fs::copy(live.join(file), crashed.join(file)).unwrap();
    }
    let conn = raw(&crashed.join("runtime.sqlite"));
    assert_eq!(
        count(&conn, "SELECT count(*) FROM events"),
        appended.len() as i64
    );
}

#[tokio::test]
async fn files_use_wal_and_move_large_payloads_to_deduplicated_blobs() {
    let fixture = sqlite_store().await;
    let store = &fixture.store;
    store.create_session(&record("s1"), 1).await.unwrap();
    let batch = vec![big_event(), big_event(), events(1).remove(0)];
    store
        .append(&key("s1"), 1, AppendBatch::any("a", batch))
        .await
        .unwrap();

    let conn = raw(&fixture.sessions_dir().join("active/s1/runtime.sqlite"));
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert_eq!(count(&conn, "SELECT count(*) FROM blobs"), 1);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM events WHERE payload IS NULL AND blob_sha256 IS NOT NULL"
        ),
        2
    );
    assert_eq!(count(&conn, "SELECT version FROM schema_version"), 2);
}

#[tokio::test]
async fn meta_json_is_a_private_copy_of_the_record() {
    let fixture = sqlite_store().await;
    let store = &fixture.store;
    store.create_session(&record("s1"), 1).await.unwrap();
    let meta_path = fixture.sessions_dir().join("active/s1/meta.json");
    let read_meta =
        || -> SessionRecord { serde_json::from_slice(&fs::read(&meta_path).unwrap()).unwrap() };
    assert_eq!(read_meta(), record("s1"));

    store
        .put_summary(&key("s1"), 1, &json!({"title": "parser fix", "tokens": 12}))
        .await
        .unwrap();
    let current = store.session("t1", "s1").await.unwrap().unwrap();
    assert_eq!(
        current.summary,
        json!({"title": "parser fix", "tokens": 12})
    );
    assert_eq!(read_meta(), current);

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&meta_path).unwrap().permissions().mode() & 0o777;
        assert_eq!(format!("{mode:o}"), "600");
    }
    let leftovers: Vec<String> = fs::read_dir(meta_path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("tmp"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());
}

#[tokio::test]
async fn archive_moves_the_directory() {
    let fixture = sqlite_store().await;
    let store = &fixture.store;
    store.create_session(&record("s1"), 1).await.unwrap();
    store
        .append(&key("s1"), 1, AppendBatch::any("a", events(2)))
        .await
        .unwrap();
    store.archive(&key("s1"), 1).await.unwrap();

    let sessions = fixture.sessions_dir();
    assert!(!sessions.join("active/s1").exists());
    assert!(sessions.join("archive/s1/runtime.sqlite").is_file());
    let meta: SessionRecord =
        serde_json::from_slice(&fs::read(sessions.join("archive/s1/meta.json")).unwrap()).unwrap();
    assert_eq!(
        meta,
        SessionRecord {
            archived: true,
            ..record("s1")
        }
    );

    // After a restart the session is still found in the archive, read-only for appends.
    let reopened = fixture.reopen();
    assert_eq!(reopened.session("t1", "s1").await.unwrap(), Some(meta));
    assert_eq!(reopened.head(&key("s1")).await.unwrap(), 2);
    assert!(matches!(
        reopened.append(&key("s1"), 1, AppendBatch::any("a", events(1))).await,
        Err(Error::Archived(id)) if id == "s1"
    ));
    // The id stays taken.
    assert!(matches!(
        reopened.create_session(&record("s1"), 1).await,
        Err(Error::AlreadyExists(_))
    ));
}

/// A crash between setting the flag and renaming the directory is finished on next open.
#[tokio::test]
async fn an_interrupted_archive_is_completed_on_open() {
    let fixture = sqlite_store().await;
    fixture
        .store
        .create_session(&record("s1"), 1)
        .await
        .unwrap();
    let db = fixture.sessions_dir().join("active/s1/runtime.sqlite");
    raw(&db)
        .execute("UPDATE session SET archived = 1", [])
        .unwrap();

    let reopened = fixture.reopen();
    let got = reopened.session("t1", "s1").await.unwrap().unwrap();
    assert!(got.archived);
    assert!(!fixture.sessions_dir().join("active/s1").exists());
    assert!(fixture
        .sessions_dir()
        .join("archive/s1/runtime.sqlite")
        .is_file());
}

#[tokio::test]
async fn ids_that_could_escape_the_sessions_folder_are_refused() {
    let fixture = sqlite_store().await;
    let store = &fixture.store;
    store.create_session(&record("s1"), 1).await.unwrap();
    for bad in ["../s1", "..", ".", "a/b", "s1/../s1", "", "s 1", "s1\0"] {
        assert_eq!(store.session("t1", bad).await.unwrap(), None, "{bad:?}");
        assert!(
            matches!(
                store.create_session(&record(bad), 1).await,
                Err(Error::NotFound(_))
            ),
            "create {bad:?}"
        );
        assert!(
            matches!(store.head(&key(bad)).await, Err(Error::NotFound(_))),
            "head {bad:?}"
        );
    }
    // `archive/../active/s1` style lookups never reach a real session either.
    assert!(matches!(
        store.read(&key("../active/s1"), 0, 10).await,
        Err(Error::NotFound(_))
    ));
    assert!(!fixture.dir.path().join("data/s1").exists());
    assert_eq!(store.list_sessions("t1", true).await.unwrap().len(), 1);
}

#[tokio::test]
async fn one_tenant_per_store() {
    let fixture = sqlite_store().await;
    let other = SessionRecord {
        tenant: "t2".into(),
        ..record("s9")
    };
    assert!(matches!(
        fixture.store.create_session(&other, 1).await,
        Err(Error::NotFound(_))
    ));
    // A store for another tenant over the same folder sees nothing of t1's sessions.
    fixture
        .store
        .create_session(&record("s1"), 1)
        .await
        .unwrap();
    let t2 = SqliteJournal::open(fixture.sessions_dir(), "t2").unwrap();
    assert_eq!(t2.list_sessions("t2", true).await.unwrap(), vec![]);
    assert_eq!(t2.session("t2", "s1").await.unwrap(), None);
    assert!(matches!(
        t2.head(&SessionKey::new("t2", "s1")).await,
        Err(Error::NotFound(_))
    ));
}

#[tokio::test]
async fn listing_skips_unreadable_sessions_and_leftovers() {
    let fixture = sqlite_store().await;
    fixture
        .store
        .create_session(&record("good"), 1)
        .await
        .unwrap();
    fixture
        .store
        .create_session(&record("broken"), 1)
        .await
        .unwrap();
    let active = fixture.sessions_dir().join("active");
    fs::write(
        active.join("broken/runtime.sqlite"),
        b"not a database at all, sorry",
    )
    .unwrap();
    fs::create_dir(active.join(".creating-half")).unwrap();
    fs::create_dir(active.join("empty")).unwrap();
    fs::write(active.join("stray.txt"), b"").unwrap();

    let reopened = fixture.reopen();
    let listed = reopened.list_sessions("t1", true).await.unwrap();
    assert_eq!(listed, vec![record("good")]);
    assert!(matches!(
        reopened.session("t1", "broken").await,
        Err(Error::Corrupt(_) | Error::Unavailable(_))
    ));
    // A leftover staging directory does not block creating that id.
    reopened.create_session(&record("half"), 1).await.unwrap();
    assert!(!active.join(".creating-half").exists());
}

#[tokio::test]
async fn bench_reports_every_phase() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteJournal::open(dir.path().to_path_buf(), bench::BENCH_TENANT).unwrap();
    let report = bench::run(Arc::new(store), 250, 100, 200).await.unwrap();
    let counts = (
        report.single_append.events,
        report.batched_append.events,
        report.replay.events,
        report.batch,
        report.sessions.len(),
    );
    assert_eq!(counts, (250, 250, 250, 100, 2));
    assert!(report.replay.events_per_s > 0.0);
}

/// Throughput on this machine (debug build, so a lower bound). Not a test of speed:
/// `cargo test -p lumina-journal -- --ignored --nocapture bench_throughput`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn bench_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteJournal::open(dir.path().to_path_buf(), bench::BENCH_TENANT).unwrap();
    let started = now_ms();
    let report = bench::run(Arc::new(store), 50_000, 500, 200).await.unwrap();
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
    println!("total {} ms", now_ms() - started);
}

/// A session file of schema version 1 (before the approvals audit) is converted when it
/// is opened: its events stay, and its decisions are audited from then on.
#[tokio::test]
async fn version_1_files_get_the_audit_table_when_opened() {
    let fixture = sqlite_store().await;
    fixture
        .store
        .create_session(&record("s1"), 1)
        .await
        .unwrap();
    fixture
        .store
        .append(&key("s1"), 1, AppendBatch::any("a", events(2)))
        .await
        .unwrap();
    let path = fixture.sessions_dir().join("active/s1/runtime.sqlite");
    {
        let conn = raw(&path);
        conn.execute_batch(
            "DROP INDEX permission_audit_by_time; DROP TABLE permission_audit;
             UPDATE schema_version SET version = 1;",
        )
        .unwrap();
    }
    let store = fixture.reopen();
    assert_eq!(store.head(&key("s1")).await.unwrap(), 2);
    assert_eq!(count(&raw(&path), "SELECT version FROM schema_version"), 2);
    let mut batch = AppendBatch::any("a", events(1));
    batch.audit = vec![lumina_journal::NewAudit {
        event: 0,
        run_id: "r".into(),
        request_id: "q".into(),
        tool: "shell".into(),
        args_hash: "h".into(),
        preview: None,
        decision: "deny".into(),
        by: "rule".into(),
        sub: None,
        reason: Some("no".into()),
    }];
    store.append(&key("s1"), 1, batch).await.unwrap();
    let listed = store
        .list_audit(
            "t1",
            &lumina_journal::AuditQuery {
                limit: 10,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|r| (r.seq, r.tool.as_str()))
            .collect::<Vec<_>>(),
        vec![(3, "shell")]
    );
}
