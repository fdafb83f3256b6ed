//! `ledger.sqlite`: the immutable evidence rows (write path steps 1–2).
//!
//! Rows are only ever inserted. Triggers refuse UPDATE and DELETE inside SQLite itself, so
//! no later code path (derived processing included) can alter evidence. Each row carries
//! the hash chain of its space up to itself, which makes the ledger checksum of any
//! prefix a single lookup.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

use super::db::{from_sql_int, open, to_sql_int, DbResultExt};
use lumina_memory::build::LedgerRow;
use lumina_memory::{chain_next, Appended, Error, Evidence, LedgerHead, NewEvidence, Result};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS evidence (
    event_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    space         TEXT    NOT NULL,
    context       TEXT    NOT NULL,
    session_id    TEXT    NOT NULL,
    actor         TEXT    NOT NULL,
    event_time_ms INTEGER NOT NULL,
    turn_order    INTEGER NOT NULL,
    text          TEXT    NOT NULL,
    source_id     TEXT    NOT NULL,
    source_offset INTEGER NOT NULL,
    checksum      TEXT    NOT NULL,
    chain         TEXT    NOT NULL,
    UNIQUE (space, source_id)
);
CREATE INDEX IF NOT EXISTS evidence_space ON evidence (space, event_id);
CREATE TRIGGER IF NOT EXISTS evidence_no_update BEFORE UPDATE ON evidence
BEGIN SELECT RAISE(ABORT, 'evidence is immutable'); END;
CREATE TRIGGER IF NOT EXISTS evidence_no_delete BEFORE DELETE ON evidence
BEGIN SELECT RAISE(ABORT, 'evidence is immutable'); END;
";

const SCHEMA_VERSION: i64 = 1;

const COLUMNS: &str = "event_id, space, context, session_id, actor, event_time_ms, turn_order, \
                       text, source_id, source_offset, checksum, chain";

/// The open ledger.
pub(crate) struct LedgerDb {
    conn: Connection,
}

fn row(r: &Row<'_>) -> rusqlite::Result<(i64, NewEvidence, String, String)> {
    Ok((
        r.get(0)?,
        NewEvidence {
            space: r.get(1)?,
            context: r.get(2)?,
            session_id: r.get(3)?,
            actor: r.get(4)?,
            event_time_ms: r.get(5)?,
            turn_order: r.get(6)?,
            text: r.get(7)?,
            source_id: r.get(8)?,
            source_offset: r.get(9)?,
        },
        r.get(10)?,
        r.get(11)?,
    ))
}

fn ledger_row(raw: (i64, NewEvidence, String, String)) -> Result<LedgerRow> {
    let (id, new, checksum, chain) = raw;
    Ok(LedgerRow {
        evidence: Evidence {
            event_id: from_sql_int(id, "event id")?,
            row: new,
            checksum,
        },
        chain,
    })
}

impl LedgerDb {
    /// Opens (creating when missing) the ledger file. Opening an existing ledger writes
    /// nothing: the schema statements are all `IF NOT EXISTS` and the version is only set
    /// on a new file.
    pub fn open(path: &Path) -> Result<Self> {
        let conn = open(path)?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .db("read ledger version")?;
        match version {
            0 => {
                conn.execute_batch(SCHEMA).db("create ledger schema")?;
                conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
                    .db("set ledger version")?;
            }
            SCHEMA_VERSION => {}
            other => {
                return Err(Error::Corrupt(format!(
                    "ledger schema version {other} is not {SCHEMA_VERSION}"
                )))
            }
        }
        Ok(Self { conn })
    }

    /// Appends a batch atomically. Duplicates (same space and source id, same checksum)
    /// return the stored row; a different checksum refuses the whole batch.
    pub fn append(&mut self, batch: &[NewEvidence]) -> Result<Vec<Appended>> {
        for new in batch {
            if new.space.is_empty() || new.source_id.is_empty() {
                return Err(Error::Invalid(
                    "evidence needs a space and a source id".into(),
                ));
            }
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .db("begin append")?;
        let mut out = Vec::with_capacity(batch.len());
        for new in batch {
            let checksum = new.checksum();
            let existing = tx
                .query_row(
                    &format!("SELECT {COLUMNS} FROM evidence WHERE space = ?1 AND source_id = ?2"),
                    params![new.space, new.source_id],
                    row,
                )
                .optional()
                .db("look up source id")?;
            if let Some(existing) = existing {
                let existing = ledger_row(existing)?;
                if existing.evidence.checksum != checksum {
                    return Err(Error::SourceConflict {
                        space: new.space.clone(),
                        source_id: new.source_id.clone(),
                    });
                }
                out.push(Appended {
                    evidence: existing.evidence,
                    duplicate: true,
                });
                continue;
            }
            let previous: String = tx
                .query_row(
                    "SELECT chain FROM evidence WHERE space = ?1 ORDER BY event_id DESC LIMIT 1",
                    [&new.space],
                    |r| r.get(0),
                )
                .optional()
                .db("read chain")?
                .unwrap_or_default();
            let chain = chain_next(&previous, &checksum);
            tx.execute(
                "INSERT INTO evidence (space, context, session_id, actor, event_time_ms, \
                 turn_order, text, source_id, source_offset, checksum, chain) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    new.space,
                    new.context,
                    new.session_id,
                    new.actor,
                    new.event_time_ms,
                    new.turn_order,
                    new.text,
                    new.source_id,
                    new.source_offset,
                    checksum,
                    chain,
                ],
            )
            .db("insert evidence")?;
            out.push(Appended {
                evidence: Evidence {
                    event_id: from_sql_int(tx.last_insert_rowid(), "event id")?,
                    row: new.clone(),
                    checksum,
                },
                duplicate: false,
            });
        }
        tx.commit().db("commit append")?;
        Ok(out)
    }

    /// Rows of a space with `event_id > after`, in order, at most `limit`.
    pub fn read(&self, space: &str, after: u64, limit: usize) -> Result<Vec<LedgerRow>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM evidence WHERE space = ?1 AND event_id > ?2 \
                 ORDER BY event_id LIMIT ?3"
            ))
            .db("prepare read")?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(params![space, to_sql_int(after, "event id")?, limit], row)
            .db("read evidence")?;
        rows.map(|r| ledger_row(r.db("read evidence row")?))
            .collect()
    }

    /// Rows of a space with `after < event_id <= until`, in order.
    pub fn range(&self, space: &str, after: u64, until: u64) -> Result<Vec<LedgerRow>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM evidence WHERE space = ?1 AND event_id > ?2 \
                 AND event_id <= ?3 ORDER BY event_id"
            ))
            .db("prepare read range")?;
        let rows = stmt
            .query_map(
                params![
                    space,
                    to_sql_int(after, "event id")?,
                    to_sql_int(until, "event id")?
                ],
                row,
            )
            .db("read evidence")?;
        rows.map(|r| ledger_row(r.db("read evidence row")?))
            .collect()
    }

    /// Rows of a space by event id (unknown ids and other spaces' rows are skipped).
    pub fn get(&self, space: &str, ids: &[u64]) -> Result<Vec<LedgerRow>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM evidence WHERE space = ?1 AND event_id = ?2"
            ))
            .db("prepare get")?;
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            if let Some(raw) = stmt
                .query_row(params![space, to_sql_int(id, "event id")?], row)
                .optional()
                .db("get evidence")?
            {
                out.push(ledger_row(raw)?);
            }
        }
        Ok(out)
    }

    /// The space's head (empty head for an unknown space).
    pub fn head(&self, space: &str) -> Result<LedgerHead> {
        let found = self
            .conn
            .prepare_cached(
                "SELECT event_id, chain, (SELECT COUNT(*) FROM evidence WHERE space = ?1) \
                 FROM evidence WHERE space = ?1 ORDER BY event_id DESC LIMIT 1",
            )
            .db("prepare head")?
            .query_row([space], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .optional()
            .db("read head")?;
        match found {
            None => Ok(LedgerHead::default()),
            Some((id, chain, rows)) => Ok(LedgerHead {
                last_event_id: from_sql_int(id, "event id")?,
                chain,
                rows: from_sql_int(rows, "row count")?,
            }),
        }
    }

    /// The chain hash of a space at `event_id` ("" for 0); `None` when that row is not the
    /// space's.
    pub fn chain_at(&self, space: &str, event_id: u64) -> Result<Option<String>> {
        if event_id == 0 {
            return Ok(Some(String::new()));
        }
        self.conn
            .prepare_cached("SELECT chain FROM evidence WHERE space = ?1 AND event_id = ?2")
            .db("prepare chain")?
            .query_row(params![space, to_sql_int(event_id, "event id")?], |r| {
                r.get(0)
            })
            .optional()
            .db("read chain")
    }

    /// Every space with evidence, sorted.
    pub fn spaces(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT DISTINCT space FROM evidence ORDER BY space")
            .db("prepare spaces")?;
        let rows = stmt.query_map([], |r| r.get(0)).db("list spaces")?;
        rows.map(|r| r.db("read space")).collect()
    }
}
