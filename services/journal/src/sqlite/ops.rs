//! The journal operations on one open session file. Everything here is synchronous and runs
//! on a blocking thread with the session's connection locked.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::db::{from_sql_int, json_text, parse_json, to_sql_int, DbResultExt, SessionDb};
use crate::{
    now_ms, sha256_hex, AppendBatch, AuditQuery, AuditRecord, Error, ExpectedVersion, Fence,
    NewAudit, Result, StoredEvent, BLOB_THRESHOLD_BYTES,
};

/// Starts a write transaction: IMMEDIATE takes the write lock up front, so the fence and
/// version checks cannot be invalidated by another connection before the insert.
fn begin(conn: &mut Connection) -> Result<Transaction<'_>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .db("begin")
}

/// The fence check every write makes inside its transaction: refused when a newer fence is
/// recorded, otherwise the presented fence becomes the recorded one if it is larger.
fn check_fence(tx: &Transaction<'_>, presented: Fence) -> Result<()> {
    let token = to_sql_int(presented, "fence")?;
    let advanced = tx
        .prepare_cached("UPDATE session_fence SET fence = ?1 WHERE id = 1 AND fence <= ?1")
        .db("check fence")?
        .execute([token])
        .db("check fence")?;
    if advanced == 1 {
        return Ok(());
    }
    let recorded = recorded_fence(tx)?;
    Err(Error::Fenced {
        presented,
        recorded,
    })
}

fn recorded_fence(conn: &Connection) -> Result<Fence> {
    let fence: i64 = conn
        .prepare_cached("SELECT fence FROM session_fence WHERE id = 1")
        .db("read fence")?
        .query_row([], |row| row.get(0))
        .optional()
        .db("read fence")?
        .ok_or_else(|| Error::Corrupt("fence row missing".into()))?;
    from_sql_int(fence, "fence")
}

fn put_blob_in(tx: &Transaction<'_>, sha256: &str, bytes: &[u8]) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO blobs (sha256, bytes) VALUES (?1, ?2) ON CONFLICT (sha256) DO NOTHING",
    )
    .db("insert blob")?
    .execute(rusqlite::params![sha256, bytes])
    .db("insert blob")?;
    Ok(())
}

/// See [`crate::JournalStore::append`].
pub(super) fn append(
    db: &mut SessionDb,
    session_id: &str,
    fence: Fence,
    batch: AppendBatch,
) -> Result<Vec<StoredEvent>> {
    if db.archived {
        return Err(Error::Archived(session_id.to_owned()));
    }
    crate::audit::check_batch(&batch)?;
    let fence_sql = to_sql_int(fence, "fence")?;
    let tx = begin(&mut db.conn)?;
    check_fence(&tx, fence)?;

    let version: i64 = tx
        .prepare_cached("SELECT COALESCE(MAX(stream_seq), 0) FROM events WHERE stream = ?1")
        .db("read stream version")?
        .query_row([&batch.stream], |row| row.get(0))
        .db("read stream version")?;
    let version = from_sql_int(version, "stream version")?;
    if let ExpectedVersion::Exact(expected) = batch.expected {
        if expected != version {
            return Err(Error::Conflict {
                stream: batch.stream,
                expected,
                actual: version,
            });
        }
    }

    let ts_ms = now_ms();
    if let Some(command) = &batch.command {
        let inserted = tx
            .prepare_cached(
                "INSERT INTO command_results (key, result, created_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO NOTHING",
            )
            .db("record command")?
            .execute(rusqlite::params![
                command.key,
                json_text(&command.result)?,
                ts_ms
            ])
            .db("record command")?;
        if inserted == 0 {
            return Err(Error::DuplicateCommand(command.key.clone()));
        }
    }

    let head: i64 = tx
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events")
        .db("read head")?
        .query_row([], |row| row.get(0))
        .db("read head")?;
    let head = from_sql_int(head, "seq")?;

    let AppendBatch {
        stream,
        events,
        audit,
        ..
    } = batch;
    let mut stored = Vec::with_capacity(events.len());
    {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO events (seq, stream, stream_seq, kind, payload, blob_sha256, ts_ms, fence)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .db("insert event")?;
        for (offset, event) in (1u64..).zip(events) {
            let seq = head + offset;
            let stream_seq = version + offset;
            let json = json_text(&event.payload)?;
            let (inline, blob) = if json.len() > BLOB_THRESHOLD_BYTES {
                let sha256 = sha256_hex(json.as_bytes());
                put_blob_in(&tx, &sha256, json.as_bytes())?;
                (None, Some(sha256))
            } else {
                (Some(json), None)
            };
            insert
                .execute(rusqlite::params![
                    to_sql_int(seq, "seq")?,
                    stream,
                    to_sql_int(stream_seq, "stream_seq")?,
                    event.kind,
                    inline,
                    blob,
                    ts_ms,
                    fence_sql,
                ])
                .db("insert event")?;
            stored.push(StoredEvent {
                seq,
                stream: stream.clone(),
                stream_seq,
                kind: event.kind,
                payload: event.payload,
                ts_ms,
                fence,
            });
        }
    }
    insert_audit(&tx, head, ts_ms, audit)?;
    tx.commit().db("commit append")?;
    Ok(stored)
}

/// The batch's audit records, in its transaction; each takes its event's seq.
fn insert_audit(tx: &Transaction<'_>, head: u64, ts_ms: i64, audit: Vec<NewAudit>) -> Result<()> {
    if audit.is_empty() {
        return Ok(());
    }
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO permission_audit (seq, ts_ms, run_id, request_id, tool, args_hash,
                                           preview, decision, decided_by, sub, reason)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )
        .db("insert audit")?;
    for a in audit {
        let seq = head + a.event as u64 + 1;
        insert
            .execute(rusqlite::params![
                to_sql_int(seq, "seq")?,
                ts_ms,
                a.run_id,
                a.request_id,
                a.tool,
                a.args_hash,
                a.preview,
                a.decision,
                a.by,
                a.sub,
                a.reason,
            ])
            .db("insert audit")?;
    }
    Ok(())
}

/// The session's audit records matching `query`'s time window and cursor, newest first,
/// at most `query.limit` (the caller merges sessions and applies the session filter).
pub(super) fn list_audit(
    conn: &Connection,
    tenant: &str,
    session_id: &str,
    query: &AuditQuery,
) -> Result<Vec<AuditRecord>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, ts_ms, run_id, request_id, tool, args_hash, preview, decision,
                    decided_by, sub, reason
               FROM permission_audit
              WHERE ts_ms >= ?1 AND ts_ms < ?2 AND ts_ms <= ?3
              ORDER BY ts_ms DESC, seq DESC",
        )
        .db("list audit")?;
    // The cursor bounds the time here; the exact position is checked per record below.
    let ceiling = query.after.as_ref().map_or(i64::MAX, |c| c.ts_ms);
    let mut rows = stmt
        .query(rusqlite::params![
            query.since_ms.unwrap_or(i64::MIN),
            query.until_ms.unwrap_or(i64::MAX),
            ceiling,
        ])
        .db("list audit")?;
    let mut records = Vec::new();
    while records.len() < query.limit {
        let Some(row) = rows.next().db("list audit")? else {
            break;
        };
        let record = AuditRecord {
            tenant: tenant.to_owned(),
            session_id: session_id.to_owned(),
            seq: from_sql_int(row.get(0).db("read audit")?, "seq")?,
            ts_ms: row.get(1).db("read audit")?,
            run_id: row.get(2).db("read audit")?,
            request_id: row.get(3).db("read audit")?,
            tool: row.get(4).db("read audit")?,
            args_hash: row.get(5).db("read audit")?,
            preview: row.get(6).db("read audit")?,
            decision: row.get(7).db("read audit")?,
            by: row.get(8).db("read audit")?,
            sub: row.get(9).db("read audit")?,
            reason: row.get(10).db("read audit")?,
        };
        if query.matches(&record) {
            records.push(record);
        }
    }
    Ok(records)
}

macro_rules! select_events {
    ($rest:literal) => {
        concat!(
            "SELECT seq, stream, stream_seq, kind, payload, blob_sha256, ts_ms, fence FROM events ",
            $rest
        )
    };
}

/// See [`crate::JournalStore::read`].
pub(super) fn read(conn: &Connection, after_seq: u64, limit: usize) -> Result<Vec<StoredEvent>> {
    let mut stmt = conn
        .prepare_cached(select_events!("WHERE seq > ?1 ORDER BY seq LIMIT ?2"))
        .db("read events")?;
    let rows = stmt
        .query(rusqlite::params![clamp(after_seq), clamp_limit(limit)])
        .db("read events")?;
    collect_events(conn, rows, limit)
}

/// See [`crate::JournalStore::read_stream`].
pub(super) fn read_stream(
    conn: &Connection,
    stream: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<StoredEvent>> {
    let mut stmt = conn
        .prepare_cached(select_events!(
            "WHERE stream = ?1 AND stream_seq > ?2 ORDER BY stream_seq LIMIT ?3"
        ))
        .db("read stream")?;
    let rows = stmt
        .query(rusqlite::params![stream, clamp(after), clamp_limit(limit)])
        .db("read stream")?;
    collect_events(conn, rows, limit)
}

/// A lower bound beyond the storable range matches nothing, exactly like `i64::MAX`.
fn clamp(after: u64) -> i64 {
    i64::try_from(after).unwrap_or(i64::MAX)
}

fn clamp_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

fn collect_events(
    conn: &Connection,
    mut rows: rusqlite::Rows<'_>,
    limit: usize,
) -> Result<Vec<StoredEvent>> {
    let mut events = Vec::with_capacity(limit.min(1024));
    // Prepared only when a page actually holds a blob-backed payload.
    let mut blob_stmt = None;
    while let Some(row) = rows.next().db("read events")? {
        let payload = match row.get_ref(4).db("read payload")? {
            ValueRef::Text(text) => parse_json(text, "event payload")?,
            ValueRef::Null => {
                let sha256: String = row.get(5).db("read payload blob")?;
                if blob_stmt.is_none() {
                    blob_stmt = Some(
                        conn.prepare_cached("SELECT bytes FROM blobs WHERE sha256 = ?1")
                            .db("read payload blob")?,
                    );
                }
                let stmt = blob_stmt
                    .as_mut()
                    .ok_or_else(|| Error::Unavailable("blob statement missing".into()))?;
                let bytes: Vec<u8> = stmt
                    .query_row([&sha256], |row| row.get(0))
                    .optional()
                    .db("read payload blob")?
                    .ok_or_else(|| Error::Corrupt(format!("payload blob {sha256} missing")))?;
                parse_json(&bytes, "blob payload")?
            }
            other => {
                return Err(Error::Corrupt(format!(
                    "event payload has type {}",
                    other.data_type()
                )))
            }
        };
        events.push(StoredEvent {
            seq: from_sql_int(row.get(0).db("read seq")?, "seq")?,
            stream: row.get(1).db("read stream")?,
            stream_seq: from_sql_int(row.get(2).db("read stream_seq")?, "stream_seq")?,
            kind: row.get(3).db("read kind")?,
            payload,
            ts_ms: row.get(6).db("read ts_ms")?,
            fence: from_sql_int(row.get(7).db("read fence")?, "fence")?,
        });
    }
    Ok(events)
}

/// See [`crate::JournalStore::head`].
pub(super) fn head(conn: &Connection) -> Result<u64> {
    let head: i64 = conn
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events")
        .db("read head")?
        .query_row([], |row| row.get(0))
        .db("read head")?;
    from_sql_int(head, "seq")
}

/// See [`crate::JournalStore::command_result`].
pub(super) fn command_result(conn: &Connection, key: &str) -> Result<Option<serde_json::Value>> {
    let text: Option<String> = conn
        .prepare_cached("SELECT result FROM command_results WHERE key = ?1")
        .db("read command result")?
        .query_row([key], |row| row.get(0))
        .optional()
        .db("read command result")?;
    text.map(|text| parse_json(text.as_bytes(), "command result"))
        .transpose()
}

/// See [`crate::JournalStore::put_blob`].
pub(super) fn put_blob(db: &mut SessionDb, fence: Fence, bytes: &[u8]) -> Result<String> {
    let sha256 = sha256_hex(bytes);
    let tx = begin(&mut db.conn)?;
    check_fence(&tx, fence)?;
    put_blob_in(&tx, &sha256, bytes)?;
    tx.commit().db("commit blob")?;
    Ok(sha256)
}

/// See [`crate::JournalStore::get_blob`].
pub(super) fn get_blob(conn: &Connection, sha256: &str) -> Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT bytes FROM blobs WHERE sha256 = ?1")
        .db("read blob")?
        .query_row([sha256], |row| row.get(0))
        .optional()
        .db("read blob")
}

/// See [`crate::JournalStore::consumer_offset`].
pub(super) fn consumer_offset(conn: &Connection, consumer: &str) -> Result<u64> {
    let offset: Option<i64> = conn
        .prepare_cached(r#"SELECT "offset" FROM consumer_offsets WHERE consumer = ?1"#)
        .db("read consumer offset")?
        .query_row([consumer], |row| row.get(0))
        .optional()
        .db("read consumer offset")?;
    offset.map_or(Ok(0), |offset| from_sql_int(offset, "consumer offset"))
}

/// See [`crate::JournalStore::claim`]: the fence check alone, committed.
pub(super) fn claim(db: &mut SessionDb, fence: Fence) -> Result<()> {
    let tx = begin(&mut db.conn)?;
    check_fence(&tx, fence)?;
    tx.commit().db("commit claim")
}

/// See [`crate::JournalStore::set_consumer_offset`].
pub(super) fn set_consumer_offset(
    db: &mut SessionDb,
    fence: Fence,
    consumer: &str,
    offset: u64,
) -> Result<()> {
    let offset = to_sql_int(offset, "consumer offset")?;
    let tx = begin(&mut db.conn)?;
    check_fence(&tx, fence)?;
    tx.prepare_cached(
        r#"INSERT INTO consumer_offsets (consumer, "offset") VALUES (?1, ?2)
           ON CONFLICT (consumer) DO UPDATE SET "offset" = max("offset", excluded."offset")"#,
    )
    .db("record consumer offset")?
    .execute(rusqlite::params![consumer, offset])
    .db("record consumer offset")?;
    tx.commit().db("commit consumer offset")
}

/// The database half of [`crate::JournalStore::put_summary`]; the caller then rewrites
/// `meta.json` from the returned record.
pub(super) fn put_summary(
    db: &mut SessionDb,
    fence: Fence,
    summary: &serde_json::Value,
) -> Result<crate::SessionRecord> {
    let text = json_text(summary)?;
    let tx = begin(&mut db.conn)?;
    check_fence(&tx, fence)?;
    tx.prepare_cached("UPDATE session SET summary = ?1, updated_at_ms = ?2 WHERE id = 1")
        .db("update summary")?
        .execute(rusqlite::params![text, now_ms()])
        .db("update summary")?;
    let record = super::db::read_record(&tx)?;
    tx.commit().db("commit summary")?;
    Ok(record)
}

/// The database half of [`crate::JournalStore::archive`]: checks the fence and sets the
/// flag (a no-op when it is already set).
pub(super) fn mark_archived(db: &mut SessionDb, fence: Fence) -> Result<()> {
    let tx = begin(&mut db.conn)?;
    check_fence(&tx, fence)?;
    tx.prepare_cached("UPDATE session SET archived = 1 WHERE id = 1")
        .db("archive session")?
        .execute([])
        .db("archive session")?;
    tx.commit().db("commit archive")?;
    db.archived = true;
    Ok(())
}

/// See [`crate::JournalStore::fence`].
pub(super) fn fence(conn: &Connection) -> Result<Fence> {
    recorded_fence(conn)
}
