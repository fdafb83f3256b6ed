//! The local store: one SQLite database per project,
//! `<AppRoot>/data/projects/{project-id}/rag.sqlite` ([`lumina_config::AppRoot::rag_db`]),
//! apart from the Memory Fabric's files. Tables `files`, `chunks` (with an external-content
//! FTS5 index, `porter unicode61`, kept by triggers: BM25 full text) and `vectors` (f32
//! little-endian blobs per chunk and model; exact cosine in Rust, fine for the few thousand
//! chunks of a project's documents). WAL, `synchronous = NORMAL`; one connection per
//! project behind a mutex, all work on tokio's blocking pool.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lumina_config::AppRoot;
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};

use crate::chunk::Chunk;
use crate::store::{ChunkKey, ChunkVector, FileRecord, RagStore, StoredChunk};
use crate::{Error, Result};

/// The schema version in `PRAGMA user_version`.
const SCHEMA_VERSION: i64 = 1;
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS files (
    path           TEXT    PRIMARY KEY,
    content_hash   TEXT    NOT NULL,
    format         TEXT    NOT NULL,
    bytes          INTEGER NOT NULL,
    chunks         INTEGER NOT NULL,
    ingested_at_ms INTEGER NOT NULL
);
-- AUTOINCREMENT: ids are never reused, so a vector computed for a replaced chunk cannot
-- attach to its successor.
CREATE TABLE IF NOT EXISTS chunks (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    path       TEXT    NOT NULL REFERENCES files (path) ON DELETE CASCADE,
    idx        INTEGER NOT NULL,
    start_byte INTEGER NOT NULL,
    end_byte   INTEGER NOT NULL,
    line_start INTEGER NOT NULL,
    line_end   INTEGER NOT NULL,
    tokens     INTEGER NOT NULL,
    text       TEXT    NOT NULL,
    UNIQUE (path, idx)
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, content = 'chunks', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TABLE IF NOT EXISTS vectors (
    chunk_id INTEGER NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    model    TEXT    NOT NULL,
    vector   BLOB    NOT NULL,
    PRIMARY KEY (chunk_id, model)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vectors_by_model ON vectors (model, chunk_id);
";

/// Maps driver errors: damaged files are [`Error::Corrupt`], the rest
/// [`Error::Unavailable`].
trait DbResultExt<T> {
    fn db(self, context: &str) -> Result<T>;
}

impl<T> DbResultExt<T> for rusqlite::Result<T> {
    fn db(self, context: &str) -> Result<T> {
        self.map_err(|e| {
            let corrupt = match &e {
                rusqlite::Error::SqliteFailure(failure, _) => matches!(
                    failure.code,
                    ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase
                ),
                rusqlite::Error::FromSqlConversionFailure(..)
                | rusqlite::Error::IntegralValueOutOfRange(..)
                | rusqlite::Error::InvalidColumnType(..)
                | rusqlite::Error::Utf8Error(..) => true,
                _ => false,
            };
            if corrupt {
                Error::Corrupt(format!("{context}: {e}"))
            } else {
                Error::Unavailable(format!("{context}: {e}"))
            }
        })
    }
}

/// A project id is a path component here: only `[A-Za-z0-9_-]`, 1 to 64 characters.
pub(crate) fn check_project(project: &str) -> Result<()> {
    let ok = !project.is_empty()
        && project.len() <= 64
        && project
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!("invalid project id `{project}`")))
    }
}

fn int(value: u64, what: &str) -> Result<i64> {
    i64::try_from(value).map_err(|_| Error::Invalid(format!("{what} {value} is out of range")))
}

fn uint<T: TryFrom<i64>>(value: i64, what: &str) -> Result<T> {
    T::try_from(value).map_err(|_| Error::Corrupt(format!("{what} {value} is out of range")))
}

/// Vectors as little-endian f32 bytes.
pub(crate) fn vector_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn vector_from_bytes(b: &[u8]) -> Result<Vec<f32>> {
    if !b.len().is_multiple_of(4) {
        return Err(Error::Corrupt(format!("a vector of {} bytes", b.len())));
    }
    Ok(b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Cosine similarity; 0 for mismatched or zero vectors.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// The FTS5 query for `terms`: their words (letters and digits only), each quoted, any of
/// them — no FTS5 syntax can get through.
fn fts_query(terms: &[String]) -> String {
    terms
        .iter()
        .flat_map(|t| lumina_memory::text::words(t))
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// The local [`RagStore`]. Cheap to clone.
#[derive(Clone)]
pub struct SqliteRag {
    app_root: AppRoot,
    open: Arc<Mutex<HashMap<String, Arc<Mutex<Connection>>>>>,
}

impl std::fmt::Debug for SqliteRag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteRag")
            .field("app_root", &self.app_root.path())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SqliteRag {
    /// A store whose databases live under `app_root` (opened on first use per project).
    pub fn new(app_root: AppRoot) -> Self {
        Self {
            app_root,
            open: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The database file of `project`.
    pub fn path(&self, project: &str) -> PathBuf {
        self.app_root.rag_db(project)
    }

    fn connection(&self, project: &str) -> Result<Arc<Mutex<Connection>>> {
        check_project(project)?;
        let mut open = lock(&self.open);
        if let Some(conn) = open.get(project) {
            return Ok(Arc::clone(conn));
        }
        let path = self.path(project);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::Unavailable(format!("cannot create {}: {e}", dir.display())))?;
        }
        let conn = Arc::new(Mutex::new(open_db(&path)?));
        open.insert(project.to_string(), Arc::clone(&conn));
        Ok(conn)
    }

    /// Runs `f` on the project's connection on the blocking pool.
    async fn with<T, F>(&self, project: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let this = self.clone();
        let project = project.to_string();
        tokio::task::spawn_blocking(move || {
            let conn = this.connection(&project)?;
            let mut conn = lock(&conn);
            f(&mut conn)
        })
        .await
        .map_err(|e| Error::Unavailable(format!("rag store task failed: {e}")))?
    }
}

fn open_db(path: &std::path::Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).db("open rag database")?;
    conn.busy_timeout(BUSY_TIMEOUT).db("set busy timeout")?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .db("enable wal")?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::debug!(mode = %mode, "rag database not in wal mode");
    }
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
        .db("configure connection")?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .db("read schema version")?;
    if version > SCHEMA_VERSION {
        return Err(Error::Corrupt(format!(
            "{} has schema version {version}, newer than this build's {SCHEMA_VERSION}",
            path.display()
        )));
    }
    conn.execute_batch(SCHEMA).db("create rag schema")?;
    conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
        .db("record schema version")?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

fn file_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, String, String, i64, i64, i64)> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
    ))
}

fn file_record(row: (String, String, String, i64, i64, i64)) -> Result<FileRecord> {
    let (path, content_hash, format, bytes, chunks, ingested_at_ms) = row;
    Ok(FileRecord {
        path,
        content_hash,
        format,
        bytes: uint(bytes, "file size")?,
        chunks: uint(chunks, "chunk count")?,
        ingested_at_ms,
    })
}

const CHUNK_COLUMNS: &str =
    "id, path, idx, start_byte, end_byte, line_start, line_end, tokens, text";

type ChunkRow = (i64, String, i64, i64, i64, i64, i64, i64, String);

fn chunk_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChunkRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
    ))
}

fn stored_chunk(row: ChunkRow) -> Result<StoredChunk> {
    let (id, path, idx, start, end, line_start, line_end, tokens, text) = row;
    Ok(StoredChunk {
        id,
        path,
        chunk: Chunk {
            index: uint(idx, "chunk index")?,
            start: uint(start, "chunk start")?,
            end: uint(end, "chunk end")?,
            line_start: uint(line_start, "chunk line")?,
            line_end: uint(line_end, "chunk line")?,
            tokens: uint(tokens, "chunk tokens")?,
            text,
        },
    })
}

#[async_trait]
impl RagStore for SqliteRag {
    async fn files(&self, project: &str) -> Result<Vec<FileRecord>> {
        self.with(project, |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT path, content_hash, format, bytes, chunks, ingested_at_ms \
                     FROM files ORDER BY path",
                )
                .db("prepare files")?;
            let rows = stmt.query_map([], file_row).db("list files")?;
            rows.map(|r| file_record(r.db("file row")?)).collect()
        })
        .await
    }

    async fn file(&self, project: &str, path: &str) -> Result<Option<FileRecord>> {
        let path = path.to_string();
        self.with(project, move |conn| {
            conn.prepare_cached(
                "SELECT path, content_hash, format, bytes, chunks, ingested_at_ms \
                 FROM files WHERE path = ?1",
            )
            .db("prepare file")?
            .query_row([&path], file_row)
            .optional()
            .db("read file")?
            .map(file_record)
            .transpose()
        })
        .await
    }

    async fn put_file(&self, project: &str, file: &FileRecord, chunks: &[Chunk]) -> Result<()> {
        check_chunks(file, chunks)?;
        let file = file.clone();
        let chunks = chunks.to_vec();
        self.with(project, move |conn| {
            let tx = conn.transaction().db("begin put file")?;
            // Chunks first, explicitly: their delete trigger keeps the FTS index in step.
            tx.execute("DELETE FROM chunks WHERE path = ?1", [&file.path])
                .db("delete old chunks")?;
            tx.execute(
                "INSERT INTO files (path, content_hash, format, bytes, chunks, ingested_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (path) DO UPDATE SET content_hash = excluded.content_hash, \
                 format = excluded.format, bytes = excluded.bytes, chunks = excluded.chunks, \
                 ingested_at_ms = excluded.ingested_at_ms",
                params![
                    file.path,
                    file.content_hash,
                    file.format,
                    int(file.bytes, "file size")?,
                    i64::from(file.chunks),
                    file.ingested_at_ms
                ],
            )
            .db("write file")?;
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO chunks (path, idx, start_byte, end_byte, line_start, \
                         line_end, tokens, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    )
                    .db("prepare chunk insert")?;
                for c in &chunks {
                    insert
                        .execute(params![
                            file.path,
                            i64::from(c.index),
                            int(c.start as u64, "chunk start")?,
                            int(c.end as u64, "chunk end")?,
                            i64::from(c.line_start),
                            i64::from(c.line_end),
                            i64::from(c.tokens),
                            c.text
                        ])
                        .db("write chunk")?;
                }
            }
            tx.commit().db("commit put file")
        })
        .await
    }

    async fn remove_file(&self, project: &str, path: &str) -> Result<bool> {
        let path = path.to_string();
        self.with(project, move |conn| {
            let tx = conn.transaction().db("begin remove file")?;
            tx.execute("DELETE FROM chunks WHERE path = ?1", [&path])
                .db("delete chunks")?;
            let removed = tx
                .execute("DELETE FROM files WHERE path = ?1", [&path])
                .db("delete file")?;
            tx.commit().db("commit remove file")?;
            Ok(removed > 0)
        })
        .await
    }

    async fn chunk(&self, project: &str, path: &str, index: u32) -> Result<Option<StoredChunk>> {
        let path = path.to_string();
        self.with(project, move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {CHUNK_COLUMNS} FROM chunks WHERE path = ?1 AND idx = ?2"
            ))
            .db("prepare chunk")?
            .query_row(params![path, i64::from(index)], chunk_row)
            .optional()
            .db("read chunk")?
            .map(stored_chunk)
            .transpose()
        })
        .await
    }

    async fn search_text(
        &self,
        project: &str,
        terms: &[String],
        limit: usize,
    ) -> Result<Vec<(ChunkKey, f64)>> {
        let query = fts_query(terms);
        if query.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(project, move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT c.path, c.idx, bm25(chunks_fts) AS s FROM chunks_fts \
                     JOIN chunks c ON c.id = chunks_fts.rowid \
                     WHERE chunks_fts MATCH ?1 ORDER BY s, c.path, c.idx LIMIT ?2",
                )
                .db("prepare full text")?;
            let rows = stmt
                .query_map(params![query, limit], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, f64>(2)?,
                    ))
                })
                .db("full text query")?;
            rows.map(|r| {
                let (path, idx, score) = r.db("full text row")?;
                Ok((
                    ChunkKey {
                        path,
                        index: uint(idx, "chunk index")?,
                    },
                    // FTS5's bm25() is lower-is-better.
                    -score,
                ))
            })
            .collect()
        })
        .await
    }

    async fn search_vector(
        &self,
        project: &str,
        model: &str,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<(ChunkKey, f64)>> {
        if limit == 0 || query.is_empty() {
            return Ok(Vec::new());
        }
        let model = model.to_string();
        let query = query.to_vec();
        self.with(project, move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT c.path, c.idx, v.vector FROM vectors v \
                     JOIN chunks c ON c.id = v.chunk_id WHERE v.model = ?1",
                )
                .db("prepare vectors")?;
            let rows = stmt
                .query_map([&model], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, Vec<u8>>(2)?,
                    ))
                })
                .db("read vectors")?;
            let mut scored = Vec::new();
            for r in rows {
                let (path, idx, blob) = r.db("vector row")?;
                let similarity = cosine(&query, &vector_from_bytes(&blob)?);
                scored.push((
                    ChunkKey {
                        path,
                        index: uint(idx, "chunk index")?,
                    },
                    similarity,
                ));
            }
            Ok(top(scored, limit))
        })
        .await
    }

    async fn missing_vectors(
        &self,
        project: &str,
        model: &str,
        limit: usize,
    ) -> Result<Vec<StoredChunk>> {
        let model = model.to_string();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(project, move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {CHUNK_COLUMNS} FROM chunks c WHERE NOT EXISTS \
                     (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id AND v.model = ?1) \
                     ORDER BY path, idx LIMIT ?2"
                ))
                .db("prepare missing vectors")?;
            let rows = stmt
                .query_map(params![model, limit], chunk_row)
                .db("missing vectors")?;
            rows.map(|r| stored_chunk(r.db("chunk row")?)).collect()
        })
        .await
    }

    async fn put_vectors(&self, project: &str, model: &str, vectors: &[ChunkVector]) -> Result<()> {
        let model = model.to_string();
        let vectors = vectors.to_vec();
        self.with(project, move |conn| {
            let tx = conn.transaction().db("begin put vectors")?;
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO vectors (chunk_id, model, vector) \
                         SELECT id, ?2, ?3 FROM chunks WHERE id = ?1 \
                         ON CONFLICT (chunk_id, model) DO UPDATE SET vector = excluded.vector",
                    )
                    .db("prepare vector insert")?;
                for v in &vectors {
                    insert
                        .execute(params![v.chunk_id, model, vector_bytes(&v.vector)])
                        .db("write vector")?;
                }
            }
            tx.commit().db("commit put vectors")
        })
        .await
    }
}

/// The `limit` best by score (ties by key), best first.
pub(crate) fn top(mut scored: Vec<(ChunkKey, f64)>, limit: usize) -> Vec<(ChunkKey, f64)> {
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    scored.truncate(limit);
    scored
}

/// A file's chunks must be numbered 1..=n with `file.chunks == n` and spans in order.
pub(crate) fn check_chunks(file: &FileRecord, chunks: &[Chunk]) -> Result<()> {
    if usize::try_from(file.chunks).ok() != Some(chunks.len()) {
        return Err(Error::Invalid(format!(
            "{} says {} chunks but {} were given",
            file.path,
            file.chunks,
            chunks.len()
        )));
    }
    for (n, c) in chunks.iter().enumerate() {
        if usize::try_from(c.index).ok() != Some(n + 1) || c.start > c.end {
            return Err(Error::Invalid(format!(
                "chunk {} of {} is out of order",
                c.index, file.path
            )));
        }
    }
    if file.path.is_empty() {
        return Err(Error::Invalid("a file needs a path".into()));
    }
    Ok(())
}
