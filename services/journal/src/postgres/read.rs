//! Reads. None of them needs a transaction: each is one statement, and per-session lookups
//! select through the `sessions` row so that an unknown session (or another tenant's) is
//! told apart from an empty answer in the same round trip.

use deadpool_postgres::Client;
use tokio_postgres::Row;

use super::error::PgResultExt;
use super::from_sql_int;
use crate::{Error, Result, SessionKey, SessionRecord, StoredEvent};

const SESSION_COLUMNS: &str = "tenant, session_id, title, project_root, created_at_ms, \
                               updated_at_ms, archived, summary";

/// The payload comes from the blob table only for blob-backed events.
macro_rules! select_events {
    ($rest:literal) => {
        concat!(
            "SELECT e.seq, e.stream, e.stream_seq, e.kind, e.payload, e.blob_sha256,
                    CASE WHEN e.blob_sha256 IS NULL THEN NULL ELSE
                        (SELECT b.bytes FROM blobs b
                          WHERE b.tenant = e.tenant AND b.sha256 = e.blob_sha256)
                    END,
                    e.ts_ms, e.fence
               FROM events e
              WHERE e.tenant = $1 AND e.session_id = $2 ",
            $rest
        )
    };
}

const READ_EVENTS: &str = select_events!("AND e.seq > $3 ORDER BY e.seq LIMIT $4");
const READ_STREAM: &str =
    select_events!("AND e.stream = $5 AND e.stream_seq > $3 ORDER BY e.stream_seq LIMIT $4");

pub(super) fn session_record(row: &Row) -> Result<SessionRecord> {
    Ok(SessionRecord {
        tenant: row.try_get(0).pg("read session")?,
        session_id: row.try_get(1).pg("read session")?,
        title: row.try_get(2).pg("read session")?,
        project_root: row.try_get(3).pg("read session")?,
        created_at_ms: row.try_get(4).pg("read session")?,
        updated_at_ms: row.try_get(5).pg("read session")?,
        archived: row.try_get(6).pg("read session")?,
        summary: row.try_get(7).pg("read session")?,
    })
}

/// See [`crate::JournalStore::session`].
pub(super) async fn session(
    client: &Client,
    tenant: &str,
    session_id: &str,
) -> Result<Option<SessionRecord>> {
    let sql =
        format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant = $1 AND session_id = $2");
    let stmt = client.prepare_cached(&sql).await.pg("read session")?;
    client
        .query_opt(&stmt, &[&tenant, &session_id])
        .await
        .pg("read session")?
        .as_ref()
        .map(session_record)
        .transpose()
}

/// See [`crate::JournalStore::list_sessions`].
pub(super) async fn list_sessions(
    client: &Client,
    tenant: &str,
    include_archived: bool,
) -> Result<Vec<SessionRecord>> {
    let sql = format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant = $1 AND ($2 OR NOT archived)
          ORDER BY updated_at_ms DESC, session_id"
    );
    let stmt = client.prepare_cached(&sql).await.pg("list sessions")?;
    client
        .query(&stmt, &[&tenant, &include_archived])
        .await
        .pg("list sessions")?
        .iter()
        .map(session_record)
        .collect()
}

/// See [`crate::JournalStore::read`] (`stream: None`) and
/// [`crate::JournalStore::read_stream`].
pub(super) async fn events(
    client: &Client,
    session: &SessionKey,
    stream: Option<&str>,
    after: u64,
    limit: usize,
) -> Result<Vec<StoredEvent>> {
    // A lower bound beyond the storable range matches nothing, exactly like i64::MAX.
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = match stream {
        None => {
            let stmt = client.prepare_cached(READ_EVENTS).await.pg("read events")?;
            client
                .query(
                    &stmt,
                    &[&session.tenant, &session.session_id, &after, &limit],
                )
                .await
                .pg("read events")?
        }
        Some(stream) => {
            let stmt = client.prepare_cached(READ_STREAM).await.pg("read stream")?;
            client
                .query(
                    &stmt,
                    &[
                        &session.tenant,
                        &session.session_id,
                        &after,
                        &limit,
                        &stream,
                    ],
                )
                .await
                .pg("read stream")?
        }
    };
    if rows.is_empty() {
        // Only an empty page needs telling "no such session" from "nothing after".
        head(client, session).await?;
    }
    rows.iter().map(stored_event).collect()
}

fn stored_event(row: &Row) -> Result<StoredEvent> {
    let seq: i64 = row.try_get(0).pg("read event")?;
    let inline: Option<serde_json::Value> = row.try_get(4).pg("read event payload")?;
    let payload = match inline {
        Some(payload) => payload,
        None => {
            let sha256: Option<String> = row.try_get(5).pg("read event payload")?;
            let bytes: Option<Vec<u8>> = row.try_get(6).pg("read payload blob")?;
            let bytes = bytes.ok_or_else(|| {
                Error::Corrupt(format!(
                    "payload blob {} of event {seq} missing",
                    sha256.unwrap_or_default()
                ))
            })?;
            serde_json::from_slice(&bytes).map_err(|e| {
                Error::Corrupt(format!("payload blob of event {seq} is not JSON: {e}"))
            })?
        }
    };
    Ok(StoredEvent {
        seq: from_sql_int(seq, "seq")?,
        stream: row.try_get(1).pg("read event")?,
        stream_seq: from_sql_int(row.try_get(2).pg("read event")?, "stream_seq")?,
        kind: row.try_get(3).pg("read event")?,
        payload,
        ts_ms: row.try_get(7).pg("read event")?,
        fence: from_sql_int(row.try_get(8).pg("read event")?, "fence")?,
    })
}

/// See [`crate::JournalStore::head`].
pub(super) async fn head(client: &Client, session: &SessionKey) -> Result<u64> {
    let stmt = client
        .prepare_cached("SELECT head_seq FROM sessions WHERE tenant = $1 AND session_id = $2")
        .await
        .pg("read head")?;
    let row = client
        .query_opt(&stmt, &[&session.tenant, &session.session_id])
        .await
        .pg("read head")?
        .ok_or_else(|| Error::NotFound(session.session_id.clone()))?;
    from_sql_int(row.try_get(0).pg("read head")?, "seq")
}

/// See [`crate::JournalStore::heads`].
pub(super) async fn heads(
    client: &Client,
    tenant: &str,
    session_ids: &[String],
) -> Result<Vec<(String, u64)>> {
    let stmt = client
        .prepare_cached(
            "SELECT s.session_id, s.head_seq
               FROM unnest($2::text[]) WITH ORDINALITY AS wanted(id, position)
               JOIN sessions s ON s.tenant = $1 AND s.session_id = wanted.id
              ORDER BY wanted.position",
        )
        .await
        .pg("read heads")?;
    let rows = client
        .query(&stmt, &[&tenant, &session_ids])
        .await
        .pg("read heads")?;
    rows.iter()
        .map(|row| {
            let id: String = row.try_get(0).pg("read heads")?;
            Ok((id, from_sql_int(row.try_get(1).pg("read heads")?, "seq")?))
        })
        .collect()
}

/// See [`crate::JournalStore::fence`].
pub(super) async fn fence(client: &Client, session: &SessionKey) -> Result<u64> {
    let stmt = client
        .prepare_cached("SELECT fence FROM session_fences WHERE tenant = $1 AND session_id = $2")
        .await
        .pg("read fence")?;
    let row = client
        .query_opt(&stmt, &[&session.tenant, &session.session_id])
        .await
        .pg("read fence")?
        .ok_or_else(|| Error::NotFound(session.session_id.clone()))?;
    from_sql_int(row.try_get(0).pg("read fence")?, "fence")
}

/// One value looked up through the session row: `Err(NotFound)` without the session,
/// `Ok(None)` when the session exists but the value does not.
async fn through_session<T>(
    client: &Client,
    session: &SessionKey,
    sql: &str,
    arg: &str,
    context: &str,
) -> Result<Option<T>>
where
    T: for<'a> tokio_postgres::types::FromSql<'a>,
{
    let stmt = client.prepare_cached(sql).await.pg(context)?;
    let row = client
        .query_opt(&stmt, &[&session.tenant, &session.session_id, &arg])
        .await
        .pg(context)?
        .ok_or_else(|| Error::NotFound(session.session_id.clone()))?;
    row.try_get(0).pg(context)
}

/// See [`crate::JournalStore::command_result`].
pub(super) async fn command_result(
    client: &Client,
    session: &SessionKey,
    key: &str,
) -> Result<Option<serde_json::Value>> {
    through_session(
        client,
        session,
        "SELECT (SELECT c.result FROM command_results c
                  WHERE c.tenant = s.tenant AND c.session_id = s.session_id AND c.key = $3)
           FROM sessions s WHERE s.tenant = $1 AND s.session_id = $2",
        key,
        "read command result",
    )
    .await
}

/// See [`crate::JournalStore::get_blob`]; blobs are shared by a tenant's sessions.
pub(super) async fn blob(
    client: &Client,
    session: &SessionKey,
    sha256: &str,
) -> Result<Option<Vec<u8>>> {
    through_session(
        client,
        session,
        "SELECT (SELECT b.bytes FROM blobs b WHERE b.tenant = s.tenant AND b.sha256 = $3)
           FROM sessions s WHERE s.tenant = $1 AND s.session_id = $2",
        sha256,
        "read blob",
    )
    .await
}

/// See [`crate::JournalStore::consumer_offset`].
pub(super) async fn consumer_offset(
    client: &Client,
    session: &SessionKey,
    consumer: &str,
) -> Result<u64> {
    let offset: Option<i64> = through_session(
        client,
        session,
        r#"SELECT (SELECT o."offset" FROM consumer_offsets o
                    WHERE o.tenant = s.tenant AND o.session_id = s.session_id
                      AND o.consumer = $3)
             FROM sessions s WHERE s.tenant = $1 AND s.session_id = $2"#,
        consumer,
        "read consumer offset",
    )
    .await?;
    offset.map_or(Ok(0), |offset| from_sql_int(offset, "consumer offset"))
}

/// See [`crate::JournalStore::list_audit`]. The filters are bound as NULL when absent, so
/// one prepared statement serves every query; the cursor is a row comparison in the
/// listing order (`session_id` is `COLLATE "C"`, bytewise like the SQLite backend).
pub(super) async fn list_audit(
    client: &Client,
    tenant: &str,
    query: &crate::AuditQuery,
) -> Result<Vec<crate::AuditRecord>> {
    const CONTEXT: &str = "list audit";
    let stmt = client
        .prepare_cached(
            "SELECT tenant, session_id, seq, ts_ms, run_id, request_id, tool, args_hash, preview,
                    decision, decided_by, sub, reason
               FROM permission_audit
              WHERE tenant = $1
                AND ($2::text IS NULL OR session_id = $2)
                AND ($3::bigint IS NULL OR ts_ms >= $3)
                AND ($4::bigint IS NULL OR ts_ms < $4)
                AND ($5::bigint IS NULL OR (ts_ms, session_id, seq) < ($5, $6::text, $7::bigint))
              ORDER BY ts_ms DESC, session_id DESC, seq DESC
              LIMIT $8",
        )
        .await
        .pg(CONTEXT)?;
    let (after_ts, after_session, after_seq) = match &query.after {
        Some(c) => (
            Some(c.ts_ms),
            Some(c.session_id.as_str()),
            Some(i64::try_from(c.seq).unwrap_or(i64::MAX)),
        ),
        None => (None, None, None),
    };
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let rows = client
        .query(
            &stmt,
            &[
                &tenant,
                &query.session_id,
                &query.since_ms,
                &query.until_ms,
                &after_ts,
                &after_session,
                &after_seq,
                &limit,
            ],
        )
        .await
        .pg(CONTEXT)?;
    rows.iter()
        .map(|row| {
            Ok(crate::AuditRecord {
                tenant: row.try_get(0).pg(CONTEXT)?,
                session_id: row.try_get(1).pg(CONTEXT)?,
                seq: from_sql_int(row.try_get(2).pg(CONTEXT)?, "seq")?,
                ts_ms: row.try_get(3).pg(CONTEXT)?,
                run_id: row.try_get(4).pg(CONTEXT)?,
                request_id: row.try_get(5).pg(CONTEXT)?,
                tool: row.try_get(6).pg(CONTEXT)?,
                args_hash: row.try_get(7).pg(CONTEXT)?,
                preview: row.try_get(8).pg(CONTEXT)?,
                decision: row.try_get(9).pg(CONTEXT)?,
                by: row.try_get(10).pg(CONTEXT)?,
                sub: row.try_get(11).pg(CONTEXT)?,
                reason: row.try_get(12).pg(CONTEXT)?,
            })
        })
        .collect()
}
