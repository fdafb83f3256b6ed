//! Connection settings and error mapping shared by the ledger and index files.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use lumina_memory::{Error, Result};

/// How long a statement waits for another connection's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Maps driver errors into the contract's errors without leaking rusqlite into the public
/// API: damaged files are [`Error::Corrupt`], everything else is [`Error::Unavailable`].
pub(crate) trait DbResultExt<T> {
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

/// A contract integer as an SQLite INTEGER.
pub(crate) fn to_sql_int(value: u64, what: &str) -> Result<i64> {
    i64::try_from(value).map_err(|_| Error::Invalid(format!("{what} {value} is out of range")))
}

/// An SQLite INTEGER read back as a contract integer; negative means the file is damaged.
pub(crate) fn from_sql_int(value: i64, what: &str) -> Result<u64> {
    u64::try_from(value).map_err(|_| Error::Corrupt(format!("negative {what} {value}")))
}

/// Opens a database file in WAL mode with `synchronous = NORMAL` (survives process crashes;
/// the last commits may be lost on power loss, which a re-ingestion repairs idempotently).
pub(crate) fn open(path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).db("open database")?;
    conn.busy_timeout(BUSY_TIMEOUT).db("set busy timeout")?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .db("read journal mode")?;
    if !mode.eq_ignore_ascii_case("wal") {
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .db("enable wal")?;
    }
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
        .db("configure connection")?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}
