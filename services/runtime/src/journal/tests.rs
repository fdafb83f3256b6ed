//! The writer after a failed append: a store whose reply was lost (the append committed)
//! or that refused it, over a real SQLite journal.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use lumina_journal::sqlite::SqliteJournal;
use lumina_journal::{
    AppendBatch, Fence, JournalStore, SessionKey, SessionRecord, StoredEvent, LOCAL_FENCE,
};
use lumina_protocol::Event;
use pretty_assertions::assert_eq;

use super::{Outbound, SessionJournal};

/// What the next append does.
const PASS: u8 = 0;
/// Commits, then reports the connection lost (the reply never arrived).
const COMMIT_THEN_FAIL: u8 = 1;
/// Fails without committing.
const FAIL: u8 = 2;

/// A real store with one injectable append fault.
struct Faulty {
    inner: SqliteJournal,
    next: AtomicU8,
}

fn lost() -> lumina_journal::Error {
    lumina_journal::Error::Unavailable("connection lost".into())
}

#[async_trait]
impl JournalStore for Faulty {
    async fn create_session(&self, r: &SessionRecord, f: Fence) -> lumina_journal::Result<()> {
        self.inner.create_session(r, f).await
    }
    async fn session(&self, t: &str, s: &str) -> lumina_journal::Result<Option<SessionRecord>> {
        self.inner.session(t, s).await
    }
    async fn list_sessions(
        &self,
        t: &str,
        archived: bool,
    ) -> lumina_journal::Result<Vec<SessionRecord>> {
        self.inner.list_sessions(t, archived).await
    }
    async fn append(
        &self,
        s: &SessionKey,
        f: Fence,
        batch: AppendBatch,
    ) -> lumina_journal::Result<Vec<StoredEvent>> {
        match self.next.swap(PASS, Ordering::SeqCst) {
            COMMIT_THEN_FAIL => {
                self.inner.append(s, f, batch).await?;
                Err(lost())
            }
            FAIL => Err(lost()),
            _ => self.inner.append(s, f, batch).await,
        }
    }
    async fn read(
        &self,
        s: &SessionKey,
        after: u64,
        limit: usize,
    ) -> lumina_journal::Result<Vec<StoredEvent>> {
        self.inner.read(s, after, limit).await
    }
    async fn read_stream(
        &self,
        s: &SessionKey,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> lumina_journal::Result<Vec<StoredEvent>> {
        self.inner.read_stream(s, stream, after, limit).await
    }
    async fn head(&self, s: &SessionKey) -> lumina_journal::Result<u64> {
        self.inner.head(s).await
    }
    async fn command_result(
        &self,
        s: &SessionKey,
        key: &str,
    ) -> lumina_journal::Result<Option<serde_json::Value>> {
        self.inner.command_result(s, key).await
    }
    async fn put_blob(&self, s: &SessionKey, f: Fence, b: &[u8]) -> lumina_journal::Result<String> {
        self.inner.put_blob(s, f, b).await
    }
    async fn get_blob(&self, s: &SessionKey, h: &str) -> lumina_journal::Result<Option<Vec<u8>>> {
        self.inner.get_blob(s, h).await
    }
    async fn consumer_offset(&self, s: &SessionKey, c: &str) -> lumina_journal::Result<u64> {
        self.inner.consumer_offset(s, c).await
    }
    async fn set_consumer_offset(
        &self,
        s: &SessionKey,
        f: Fence,
        c: &str,
        o: u64,
    ) -> lumina_journal::Result<()> {
        self.inner.set_consumer_offset(s, f, c, o).await
    }
    async fn put_summary(
        &self,
        s: &SessionKey,
        f: Fence,
        v: &serde_json::Value,
    ) -> lumina_journal::Result<()> {
        self.inner.put_summary(s, f, v).await
    }
    async fn archive(&self, s: &SessionKey, f: Fence) -> lumina_journal::Result<()> {
        self.inner.archive(s, f).await
    }
    async fn list_audit(
        &self,
        t: &str,
        q: &lumina_journal::AuditQuery,
    ) -> lumina_journal::Result<Vec<lumina_journal::AuditRecord>> {
        self.inner.list_audit(t, q).await
    }
    async fn fence(&self, s: &SessionKey) -> lumina_journal::Result<Fence> {
        self.inner.fence(s).await
    }
    async fn claim(&self, s: &SessionKey, f: Fence) -> lumina_journal::Result<()> {
        self.inner.claim(s, f).await
    }
}

async fn open() -> (tempfile::TempDir, Arc<Faulty>, SessionJournal) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Faulty {
        inner: SqliteJournal::open(dir.path().to_path_buf(), "local").unwrap(),
        next: AtomicU8::new(PASS),
    });
    let record = SessionRecord {
        tenant: "local".into(),
        session_id: "s1".into(),
        title: "t".into(),
        project_root: "/tmp".into(),
        created_at_ms: 0,
        updated_at_ms: 0,
        archived: false,
        summary: serde_json::Value::Null,
    };
    store.create_session(&record, LOCAL_FENCE).await.unwrap();
    let journal = SessionJournal::open(store.clone(), record.key(), LOCAL_FENCE)
        .await
        .unwrap();
    (dir, store, journal)
}

fn started(run: &str) -> Event {
    Event::RunStarted {
        run_id: run.into(),
        idempotency_key: format!("k-{run}"),
        model: "m".into(),
    }
}

fn ended(run: &str) -> Event {
    Event::RunInterrupted {
        run_id: run.into(),
        reason: "r".into(),
    }
}

async fn seqs(store: &Faulty) -> Vec<u64> {
    let key = SessionKey::new("local", "s1");
    let events = store.read(&key, 0, 100).await.unwrap();
    events.iter().map(|e| e.seq).collect()
}

#[tokio::test]
async fn an_append_whose_reply_was_lost_is_seen_once_after_resync() {
    let (_dir, store, journal) = open().await;
    let mut live = journal.subscribe();
    journal.append(vec![started("r1")]).await.unwrap();
    store.next.store(COMMIT_THEN_FAIL, Ordering::SeqCst);
    assert!(journal.append(vec![ended("r1")]).await.is_err());
    assert!(
        journal
            .with_projection(|p| p.open_runs.contains_key("r1"))
            .await
    );

    journal.resync().await.unwrap();
    assert!(
        !journal
            .with_projection(|p| p.open_runs.contains_key("r1"))
            .await,
        "the committed end is in the projection"
    );
    let mut broadcast = Vec::new();
    while let Ok(Outbound::Event(frame)) = live.try_recv() {
        broadcast.push(frame.seq);
    }
    assert_eq!(
        broadcast,
        vec![1, 2],
        "subscribers get the lost event once, in order"
    );
    // Nothing is written twice and the next append follows on.
    journal.append(vec![started("r2")]).await.unwrap();
    assert_eq!(seqs(&store).await, vec![1, 2, 3]);
    assert_eq!(journal.with_projection(|p| p.head_seq).await, 3);
}

#[tokio::test]
async fn a_refused_append_leaves_nothing_and_the_next_one_follows_on() {
    let (_dir, store, journal) = open().await;
    journal.append(vec![started("r1")]).await.unwrap();
    store.next.store(FAIL, Ordering::SeqCst);
    assert!(journal.append(vec![ended("r1")]).await.is_err());
    // The retry catches up first (nothing to see) and appends the end exactly once.
    journal.append(vec![ended("r1")]).await.unwrap();
    assert_eq!(seqs(&store).await, vec![1, 2]);
    assert!(
        !journal
            .with_projection(|p| p.open_runs.contains_key("r1"))
            .await
    );
}
