//! The SQLite backend of the local profile: one `runtime.sqlite` (WAL) per session under
//! `<AppRoot>/data/sessions/active/{session_id}/`, moved to `archive/{session_id}/` when the
//! session is archived. One store serves exactly one tenant.
//!
//! Each session has one cached connection behind a mutex; all SQLite work runs on tokio's
//! blocking pool. Writes to one session are therefore serialized in-process, and the
//! IMMEDIATE transactions keep them correct against other processes too.

mod db;
mod layout;
mod ops;

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use tracing::instrument;

use self::db::{SessionDb, SCHEMA_SQL};
use self::layout::{Layout, Location, DB_FILE};
use crate::{
    AppendBatch, AuditQuery, AuditRecord, Error, Fence, JournalStore, Result, SessionKey,
    SessionRecord, StoredEvent,
};

/// The SQLite schema of one session file (`include_str!` of `sql/sqlite/001_journal.sql` at the repository root).
pub const SCHEMA: &str = SCHEMA_SQL;

/// A [`JournalStore`] over one SQLite file per session. Cheap to clone.
#[derive(Clone)]
pub struct SqliteJournal {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SqliteJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteJournal")
            .field("tenant", &self.inner.tenant)
            .field("layout", &self.inner.layout)
            .finish_non_exhaustive()
    }
}

struct Inner {
    layout: Layout,
    tenant: String,
    /// Open sessions. Lock order: never lock a [`Handle`] while holding this map.
    sessions: Mutex<HashMap<String, Arc<Handle>>>,
}

/// One session's connection. `None` after a failed archive move; reopened on next use.
struct Handle {
    slot: Mutex<Option<SessionDb>>,
}

/// A panic while a connection was locked leaves nothing half-done (an open transaction is
/// rolled back when it drops), so poisoned locks are simply taken over.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs SQLite work on the blocking pool.
async fn blocking<T, F>(work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Unavailable(format!("journal worker failed: {e}")))?
}

impl SqliteJournal {
    /// Opens (creating the folders if needed) the store at `sessions_dir`
    /// (`<AppRoot>/data/sessions`) serving `tenant`. Session files are opened lazily.
    pub fn open(sessions_dir: PathBuf, tenant: &str) -> Result<Self> {
        if tenant.is_empty() {
            return Err(Error::Unavailable(
                "the local journal needs a tenant".into(),
            ));
        }
        let layout = Layout::new(&sessions_dir);
        layout.ensure()?;
        Ok(Self {
            inner: Arc::new(Inner {
                layout,
                tenant: tenant.to_owned(),
                sessions: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The tenant this store serves.
    pub fn tenant(&self) -> &str {
        &self.inner.tenant
    }

    /// Whether this store can address `session_id` of `tenant` at all.
    fn serves(&self, tenant: &str, session_id: &str) -> bool {
        tenant == self.inner.tenant && layout::valid_session_id(session_id)
    }

    /// Runs `work` on the session's open journal, on the blocking pool. Other tenants and
    /// ids that are not valid directory names are [`Error::NotFound`].
    async fn with_session<T, F>(&self, key: &SessionKey, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut SessionDb) -> Result<T> + Send + 'static,
    {
        self.with_slot(key, move |inner, slot, id| {
            work(inner.ensure_open(slot, id)?)
        })
        .await
    }

    /// Like [`Self::with_session`], but `work` gets the connection slot itself (opened), so
    /// it can close and replace the connection.
    async fn with_slot<T, F>(&self, key: &SessionKey, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner, &mut Option<SessionDb>, &str) -> Result<T> + Send + 'static,
    {
        if !self.serves(&key.tenant, &key.session_id) {
            return Err(Error::NotFound(key.session_id.clone()));
        }
        let inner = Arc::clone(&self.inner);
        let id = key.session_id.clone();
        blocking(move || {
            let run = || {
                let handle = inner.handle(&id)?;
                let mut slot = lock(&handle.slot);
                inner.ensure_open(&mut slot, &id)?;
                work(&inner, &mut slot, &id)
            };
            run().map_err(|e| with_session_context(e, &id))
        })
        .await
    }
}

/// Storage errors name the session they happened in.
fn with_session_context(error: Error, id: &str) -> Error {
    match error {
        Error::Unavailable(m) => Error::Unavailable(format!("session {id}: {m}")),
        Error::Corrupt(m) => Error::Corrupt(format!("session {id}: {m}")),
        other => other,
    }
}

impl Inner {
    /// The cached handle of an existing session, opening it on first use.
    fn handle(&self, id: &str) -> Result<Arc<Handle>> {
        let mut sessions = lock(&self.sessions);
        if let Some(handle) = sessions.get(id) {
            return Ok(Arc::clone(handle));
        }
        let db = self.open_existing(id)?;
        let handle = Arc::new(Handle {
            slot: Mutex::new(Some(db)),
        });
        sessions.insert(id.to_owned(), Arc::clone(&handle));
        Ok(handle)
    }

    fn ensure_open<'a>(
        &self,
        slot: &'a mut Option<SessionDb>,
        id: &str,
    ) -> Result<&'a mut SessionDb> {
        if slot.is_none() {
            *slot = Some(self.open_existing(id)?);
        }
        slot.as_mut()
            .ok_or_else(|| Error::Unavailable("session connection missing".into()))
    }

    /// Finds and opens a session's journal, finishing an archive move a crash interrupted.
    fn open_existing(&self, id: &str) -> Result<SessionDb> {
        let location = self
            .layout
            .locate(id)
            .ok_or_else(|| Error::NotFound(id.to_owned()))?;
        let (db, record) = self.open_at(id, location)?;
        if record.tenant != self.tenant {
            return Err(Error::NotFound(id.to_owned()));
        }
        if record.archived && location == Location::Active {
            tracing::info!(session_id = %id, "finishing interrupted archive move");
            return self.move_to_archive(db, id);
        }
        Ok(db)
    }

    fn open_at(&self, id: &str, location: Location) -> Result<(SessionDb, SessionRecord)> {
        let dir = self.layout.dir(location, id);
        let mut conn = db::open_connection(&dir.join(DB_FILE), false)?;
        db::check_schema(&mut conn)?;
        let record = db::read_record(&conn)?;
        if record.session_id != id {
            return Err(Error::Corrupt(format!(
                "directory {id} holds the journal of session {}",
                record.session_id
            )));
        }
        let db = SessionDb {
            conn,
            dir,
            location,
            archived: record.archived,
        };
        Ok((db, record))
    }

    /// Closes the connection, renames the directory into `archive/`, reopens it there and
    /// refreshes `meta.json`. SQLite must not hold the files open across the rename: it
    /// reopens `-wal`/`-shm` by path.
    fn move_to_archive(&self, db: SessionDb, id: &str) -> Result<SessionDb> {
        let SessionDb { conn, dir, .. } = db;
        db::close(conn)?;
        let target = self.layout.dir(Location::Archive, id);
        if target.exists() {
            return Err(Error::Corrupt(format!(
                "cannot archive {id}: {} already exists",
                target.display()
            )));
        }
        fs::rename(&dir, &target)?;
        let (db, record) = self.open_at(id, Location::Archive)?;
        layout::write_meta(&db.dir, &record)?;
        Ok(db)
    }

    fn create(&self, record: SessionRecord, fence: Fence) -> Result<()> {
        let id = record.session_id.clone();
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(&id) || self.layout.is_claimed(&id) {
            return Err(Error::AlreadyExists(id));
        }
        // Built aside and renamed into place, so a crash never leaves a half-made session
        // under a valid id; holding the map keeps other lookups from racing the rename.
        let staging = self.layout.staging_dir(&id);
        if staging.exists() {
            fs::remove_dir_all(&staging)?;
        }
        layout::create_private_dir(&staging)?;
        let built = (|| {
            let mut conn = db::open_connection(&staging.join(DB_FILE), true)?;
            db::initialize(&mut conn, &record, fence)?;
            let stored = db::read_record(&conn)?;
            db::close(conn)?;
            layout::write_meta(&staging, &stored)?;
            fs::rename(&staging, self.layout.dir(Location::Active, &id))?;
            Ok(())
        })();
        if let Err(e) = built {
            if let Err(cleanup) = fs::remove_dir_all(&staging) {
                tracing::warn!(session_id = %id, error = %cleanup, "could not remove staging directory");
            }
            return Err(with_session_context(e, &id));
        }
        let (db, _) = self.open_at(&id, Location::Active)?;
        sessions.insert(
            id,
            Arc::new(Handle {
                slot: Mutex::new(Some(db)),
            }),
        );
        Ok(())
    }

    /// The record of a listed session: through its cached connection when it has one,
    /// otherwise through a short-lived connection (listing must not pin every file open).
    fn listed_record(&self, id: &str, location: Location) -> Result<SessionRecord> {
        self.with_listed(id, location, |conn, _| db::read_record(conn))
    }

    /// Runs `work` on a listed session's connection (cached, or short-lived) with its record.
    fn with_listed<T>(
        &self,
        id: &str,
        location: Location,
        work: impl FnOnce(&rusqlite::Connection, &SessionRecord) -> Result<T>,
    ) -> Result<T> {
        let cached = lock(&self.sessions).get(id).cloned();
        if let Some(handle) = cached {
            let mut slot = lock(&handle.slot);
            let db = self.ensure_open(&mut slot, id)?;
            let record = db::read_record(&db.conn)?;
            return work(&db.conn, &record);
        }
        let (db, record) = self.open_at(id, location)?;
        let result = work(&db.conn, &record);
        db::close(db.conn)?;
        result
    }

    /// The approvals audit across session files (or of one session): each file's matching
    /// records, merged newest first. Costs one short query per session file.
    fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let mut targets = Vec::new();
        match &query.session_id {
            Some(id) if !layout::valid_session_id(id) => {}
            Some(id) => targets.extend(self.layout.locate(id).map(|l| (id.clone(), l))),
            None => {
                for location in [Location::Active, Location::Archive] {
                    for id in self.layout.scan(location)? {
                        targets.push((id, location));
                    }
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        let mut records = Vec::new();
        for (id, location) in targets {
            if !seen.insert(id.clone()) {
                continue;
            }
            let listed = self.with_listed(&id, location, |conn, record| {
                if record.tenant != self.tenant {
                    return Ok(Vec::new());
                }
                ops::list_audit(conn, &record.tenant, &id, query)
            });
            // A session archived mid-scan is read again where it went.
            let listed = match (listed, self.layout.locate(&id)) {
                (Err(_), Some(now)) if now != location => self.with_listed(&id, now, |conn, r| {
                    ops::list_audit(conn, &r.tenant, &id, query)
                }),
                (listed, _) => listed,
            };
            match listed {
                Ok(found) => records.extend(found),
                Err(e) => {
                    tracing::warn!(session_id = %id, error = %e, "skipping unreadable session in the audit");
                }
            }
        }
        Ok(crate::newest_first(records, query.limit))
    }

    fn list(&self, include_archived: bool) -> Result<Vec<SessionRecord>> {
        let mut locations = vec![Location::Active];
        if include_archived {
            locations.push(Location::Archive);
        }
        // Keyed by id: a session archived during the scan can show up in both folders.
        let mut found: HashMap<String, SessionRecord> = HashMap::new();
        for location in locations {
            for id in self.layout.scan(location)? {
                match self.listed_record(&id, location) {
                    Ok(record) if record.tenant != self.tenant => {
                        tracing::debug!(session_id = %id, "skipping session of another tenant");
                    }
                    Ok(record) if record.archived && !include_archived => {}
                    Ok(record) => {
                        found.insert(id, record);
                    }
                    Err(e) => {
                        // A session archived mid-scan is no longer at the scanned path.
                        if self.layout.locate(&id).is_some() {
                            tracing::warn!(session_id = %id, error = %e, "skipping unreadable session");
                        }
                    }
                }
            }
        }
        let mut records: Vec<SessionRecord> = found.into_values().collect();
        records.sort_by(|a, b| {
            b.updated_at_ms
                .cmp(&a.updated_at_ms)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        Ok(records)
    }
}

#[async_trait]
impl JournalStore for SqliteJournal {
    /// Fails with [`Error::NotFound`] for another tenant or an id outside
    /// `[A-Za-z0-9_-]{1,128}`. The record is stored unarchived whatever its `archived` says.
    #[instrument(level = "debug", skip_all, fields(session_id = %record.session_id, fence))]
    async fn create_session(&self, record: &SessionRecord, fence: Fence) -> Result<()> {
        if !self.serves(&record.tenant, &record.session_id) {
            return Err(Error::NotFound(record.session_id.clone()));
        }
        let record = SessionRecord {
            archived: false,
            ..record.clone()
        };
        let inner = Arc::clone(&self.inner);
        blocking(move || inner.create(record, fence)).await
    }

    #[instrument(level = "debug", skip_all, fields(session_id = %session_id))]
    async fn session(&self, tenant: &str, session_id: &str) -> Result<Option<SessionRecord>> {
        let key = SessionKey::new(tenant, session_id);
        match self
            .with_session(&key, |db| db::read_record(&db.conn))
            .await
        {
            Ok(record) => Ok(Some(record)),
            Err(Error::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    #[instrument(level = "debug", skip_all, fields(include_archived))]
    async fn list_sessions(
        &self,
        tenant: &str,
        include_archived: bool,
    ) -> Result<Vec<SessionRecord>> {
        if tenant != self.inner.tenant {
            return Ok(Vec::new());
        }
        let inner = Arc::clone(&self.inner);
        blocking(move || inner.list(include_archived)).await
    }

    #[instrument(level = "debug", skip_all, fields(session_id = %session.session_id, fence, stream = %batch.stream))]
    async fn append(
        &self,
        session: &SessionKey,
        fence: Fence,
        batch: AppendBatch,
    ) -> Result<Vec<StoredEvent>> {
        let id = session.session_id.clone();
        self.with_session(session, move |db| ops::append(db, &id, fence, batch))
            .await
    }

    async fn read(
        &self,
        session: &SessionKey,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>> {
        self.with_session(session, move |db| ops::read(&db.conn, after_seq, limit))
            .await
    }

    async fn read_stream(
        &self,
        session: &SessionKey,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>> {
        let stream = stream.to_owned();
        self.with_session(session, move |db| {
            ops::read_stream(&db.conn, &stream, after, limit)
        })
        .await
    }

    async fn head(&self, session: &SessionKey) -> Result<u64> {
        self.with_session(session, |db| ops::head(&db.conn)).await
    }

    async fn command_result(
        &self,
        session: &SessionKey,
        key: &str,
    ) -> Result<Option<serde_json::Value>> {
        let key = key.to_owned();
        self.with_session(session, move |db| ops::command_result(&db.conn, &key))
            .await
    }

    #[instrument(level = "debug", skip_all, fields(session_id = %session.session_id, fence, len = bytes.len()))]
    async fn put_blob(&self, session: &SessionKey, fence: Fence, bytes: &[u8]) -> Result<String> {
        let bytes = bytes.to_vec();
        self.with_session(session, move |db| ops::put_blob(db, fence, &bytes))
            .await
    }

    async fn get_blob(&self, session: &SessionKey, sha256: &str) -> Result<Option<Vec<u8>>> {
        let sha256 = sha256.to_owned();
        self.with_session(session, move |db| ops::get_blob(&db.conn, &sha256))
            .await
    }

    async fn consumer_offset(&self, session: &SessionKey, consumer: &str) -> Result<u64> {
        let consumer = consumer.to_owned();
        self.with_session(session, move |db| ops::consumer_offset(&db.conn, &consumer))
            .await
    }

    #[instrument(level = "debug", skip_all, fields(session_id = %session.session_id, fence, consumer, offset))]
    async fn set_consumer_offset(
        &self,
        session: &SessionKey,
        fence: Fence,
        consumer: &str,
        offset: u64,
    ) -> Result<()> {
        let consumer = consumer.to_owned();
        self.with_session(session, move |db| {
            ops::set_consumer_offset(db, fence, &consumer, offset)
        })
        .await
    }

    /// Also rewrites `{session dir}/meta.json` (atomically, mode 0600) from the new record.
    #[instrument(level = "debug", skip_all, fields(session_id = %session.session_id, fence))]
    async fn put_summary(
        &self,
        session: &SessionKey,
        fence: Fence,
        summary: &serde_json::Value,
    ) -> Result<()> {
        let summary = summary.clone();
        self.with_session(session, move |db| {
            let record = ops::put_summary(db, fence, &summary)?;
            layout::write_meta(&db.dir, &record)
        })
        .await
    }

    /// Records the flag, closes the connection and moves the directory to `archive/`.
    /// Archiving an archived session only checks (and records) the fence.
    #[instrument(level = "debug", skip_all, fields(session_id = %session.session_id, fence))]
    async fn archive(&self, session: &SessionKey, fence: Fence) -> Result<()> {
        self.with_slot(session, move |inner, slot, id| {
            let db = inner.ensure_open(slot, id)?;
            ops::mark_archived(db, fence)?;
            if db.location == Location::Archive {
                return Ok(());
            }
            // From here the slot stays empty until the move succeeds; the next use reopens
            // from wherever the directory ended up (and finishes the move if needed).
            if let Some(db) = slot.take() {
                *slot = Some(inner.move_to_archive(db, id)?);
            }
            Ok(())
        })
        .await
    }

    /// Scans the session files (all of them, or the one of `query.session_id`).
    #[instrument(level = "debug", skip_all)]
    async fn list_audit(&self, tenant: &str, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        if tenant != self.inner.tenant || query.limit == 0 {
            return Ok(Vec::new());
        }
        let inner = Arc::clone(&self.inner);
        let query = query.clone();
        blocking(move || inner.audit(&query)).await
    }

    async fn fence(&self, session: &SessionKey) -> Result<Fence> {
        self.with_session(session, |db| ops::fence(&db.conn)).await
    }

    async fn claim(&self, session: &SessionKey, fence: Fence) -> Result<()> {
        self.with_session(session, move |db| ops::claim(db, fence))
            .await
    }
}
