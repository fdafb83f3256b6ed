//! Connection setup, schema, error mapping and row conversions of the SQLite backend.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};

use super::layout::Location;
use crate::{Error, Fence, Result, SessionRecord};

/// The schema of one session file (also the reference copy for `sql/`).
pub(super) const SCHEMA_SQL: &str = include_str!("../../../../sql/sqlite/001_journal.sql");
/// Version 2: the approvals audit table, applied after [`SCHEMA_SQL`] to new files and to
/// version 1 files when they are opened.
pub(super) const AUDIT_SQL: &str = include_str!("../../../../sql/sqlite/002_audit.sql");
/// The schema version this build writes (and converts version 1 files to).
const SCHEMA_VERSION: i64 = 2;
/// How long a statement waits for another connection's lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Enough for every statement the backend prepares, so none is ever re-prepared.
const STATEMENT_CACHE: usize = 32;

/// Maps driver errors into the contract's errors without leaking rusqlite into the public
/// API: damaged files are [`Error::Corrupt`], everything else is [`Error::Unavailable`].
pub(super) trait DbResultExt<T> {
    fn db(self, context: &str) -> Result<T>;
}

impl<T> DbResultExt<T> for rusqlite::Result<T> {
    fn db(self, context: &str) -> Result<T> {
        self.map_err(|e| db_error(context, e))
    }
}

fn db_error(context: &str, e: rusqlite::Error) -> Error {
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
}

/// A contract integer (sequence, fence, offset) as an SQLite INTEGER.
pub(super) fn to_sql_int(value: u64, what: &str) -> Result<i64> {
    i64::try_from(value)
        .map_err(|_| Error::Unavailable(format!("{what} {value} exceeds the storable range")))
}

/// An SQLite INTEGER read back as a contract integer; negative means the file is damaged.
pub(super) fn from_sql_int(value: i64, what: &str) -> Result<u64> {
    u64::try_from(value).map_err(|_| Error::Corrupt(format!("negative {what} {value}")))
}

/// An open session journal.
pub(super) struct SessionDb {
    pub(super) conn: Connection,
    /// The session directory (moves when the session is archived).
    pub(super) dir: PathBuf,
    /// Which folder `dir` is in.
    pub(super) location: Location,
    /// Mirrors `session.archived`; only changed under the same lock as the connection.
    pub(super) archived: bool,
}

/// Opens a session file with the backend's connection settings. Without `create` a missing
/// file is an error instead of a new empty database.
pub(super) fn open_connection(path: &Path, create: bool) -> Result<Connection> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags).db("open session journal")?;
    conn.busy_timeout(BUSY_TIMEOUT).db("set busy_timeout")?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .db("set journal_mode")?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::Unavailable(format!(
            "journal_mode is {mode}, WAL is required"
        )));
    }
    // NORMAL in WAL mode: a commit survives the process being killed; only an OS crash or
    // power loss can drop the last transactions, never corrupt the file.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .db("set synchronous")?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .db("set foreign_keys")?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// Closes a connection, reporting (rather than swallowing) a failed final checkpoint.
pub(super) fn close(conn: Connection) -> Result<()> {
    conn.close().map_err(|(_, e)| e).db("close session journal")
}

/// Applies the schema and writes the session row and its first fence, in one transaction.
pub(super) fn initialize(
    conn: &mut Connection,
    record: &SessionRecord,
    fence: Fence,
) -> Result<()> {
    let summary = json_text(&record.summary)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .db("begin create")?;
    tx.execute_batch(SCHEMA_SQL).db("apply schema")?;
    tx.execute_batch(AUDIT_SQL).db("apply audit schema")?;
    tx.execute(
        "INSERT INTO session (id, tenant, session_id, title, project_root, created_at_ms,
                              updated_at_ms, archived, summary)
         VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)",
        rusqlite::params![
            record.tenant,
            record.session_id,
            record.title,
            record.project_root,
            record.created_at_ms,
            record.updated_at_ms,
            summary,
        ],
    )
    .db("insert session")?;
    tx.execute(
        "INSERT INTO session_fence (id, fence) VALUES (1, ?1)",
        [to_sql_int(fence, "fence")?],
    )
    .db("insert fence")?;
    tx.commit().db("commit create")
}

fn schema_version(conn: &Connection) -> Result<Option<i64>> {
    conn.query_row("SELECT version FROM schema_version", [], |row| row.get(0))
        .optional()
        .map_err(|e| Error::Corrupt(format!("read schema version: {e}")))
}

/// Fails with [`Error::Corrupt`] unless the file carries this build's schema; a version 1
/// file (before the approvals audit) is converted first, in one transaction that re-reads
/// the version under the write lock (another process may have converted it meanwhile).
pub(super) fn check_schema(conn: &mut Connection) -> Result<()> {
    if schema_version(conn)? == Some(1) {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .db("begin schema conversion")?;
        if schema_version(&tx)? == Some(1) {
            tx.execute_batch(AUDIT_SQL)
                .db("convert schema to version 2")?;
        }
        tx.commit().db("commit schema conversion")?;
    }
    match schema_version(conn)? {
        Some(SCHEMA_VERSION) => Ok(()),
        Some(other) => Err(Error::Corrupt(format!(
            "unsupported schema version {other} (this build reads {SCHEMA_VERSION})"
        ))),
        None => Err(Error::Corrupt("schema version missing".into())),
    }
}

/// The session row.
pub(super) fn read_record(conn: &Connection) -> Result<SessionRecord> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT tenant, session_id, title, project_root, created_at_ms, updated_at_ms,
                    archived, summary
             FROM session WHERE id = 1",
        )
        .db("read session")?;
    let row = stmt
        .query_row([], |row| {
            Ok((
                SessionRecord {
                    tenant: row.get(0)?,
                    session_id: row.get(1)?,
                    title: row.get(2)?,
                    project_root: row.get(3)?,
                    created_at_ms: row.get(4)?,
                    updated_at_ms: row.get(5)?,
                    archived: row.get(6)?,
                    summary: serde_json::Value::Null,
                },
                row.get::<_, String>(7)?,
            ))
        })
        .optional()
        .db("read session")?;
    let (mut record, summary) = row.ok_or_else(|| Error::Corrupt("session row missing".into()))?;
    record.summary = parse_json(summary.as_bytes(), "session summary")?;
    Ok(record)
}

/// JSON text of a value (infallible for `Value`, mapped anyway rather than unwrapped).
pub(super) fn json_text(value: &serde_json::Value) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| Error::Corrupt(format!("value is not serializable: {e}")))
}

/// Parses stored JSON; unparsable text means the file was damaged.
pub(super) fn parse_json(bytes: &[u8], what: &str) -> Result<serde_json::Value> {
    serde_json::from_slice(bytes).map_err(|e| Error::Corrupt(format!("{what} is not JSON: {e}")))
}
