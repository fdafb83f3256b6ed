//! Writes. Each is one READ COMMITTED transaction that starts by locking the session's
//! fence row; see the module docs of [`super`] for why.
//!
//! Round trips are what a write costs (the commit's fsync aside), so statements are
//! pipelined: sent together, answered in order. `BEGIN` travels with the lock, and
//! `COMMIT` with the last statements unless an answer must be checked first (a command
//! key), so a plain append is two round trips. If a pipelined statement fails, the server
//! turns the trailing `COMMIT` into a rollback.

use std::collections::HashSet;

use futures::future::{try_join3, try_join_all};
use tokio_postgres::types::ToSql;

use super::error::PgResultExt;
use super::tx::{pipeline, Tx};
use super::{from_sql_int, to_sql_int};
use crate::{
    now_ms, sha256_hex, AppendBatch, Error, ExpectedVersion, Fence, Result, SessionKey,
    SessionRecord, StoredEvent, BLOB_THRESHOLD_BYTES,
};
use deadpool_postgres::Client;

type Param<'a> = &'a (dyn ToSql + Sync);

/// Explicit, because the locking protocol relies on per-statement snapshots.
const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";
const COMMIT: &str = "COMMIT";

/// Serializes the session's writers. Sent first, so every later statement of the
/// transaction runs while the lock is held.
const LOCK_FENCE: &str =
    "SELECT fence FROM session_fences WHERE tenant = $1 AND session_id = $2 FOR UPDATE";

/// Pipelined right after [`LOCK_FENCE`]: a separate statement, so under READ COMMITTED it
/// takes its snapshot after the lock was granted and sees the previous holder's commit.
/// (Joined into the locking statement, `sessions` would be read from the older snapshot.)
const SESSION_STATE: &str = "SELECT s.archived, s.head_seq,
        (SELECT t.version FROM streams t
          WHERE t.tenant = s.tenant AND t.session_id = s.session_id AND t.stream = $3),
        s.head_ts_ms
   FROM sessions s WHERE s.tenant = $1 AND s.session_id = $2";

const RECORD_FENCE: &str =
    "UPDATE session_fences SET fence = $3 WHERE tenant = $1 AND session_id = $2 AND fence < $3";

const INSERT_BLOBS: &str = "INSERT INTO blobs (tenant, sha256, bytes, created_at_ms)
     SELECT $1::text, b.sha256, b.bytes, $2::bigint
       FROM unnest($3::text[], $4::bytea[]) AS b (sha256, bytes)
     ON CONFLICT (tenant, sha256) DO NOTHING";

const INSERT_COMMAND: &str =
    "INSERT INTO command_results (tenant, session_id, key, result, created_at_ms)
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, session_id, key) DO NOTHING";

/// Advances the session head and the stream version and inserts the whole batch: one
/// statement, one round trip, one plan whatever the batch size (arrays, not VALUES lists).
const INSERT_EVENTS: &str = "WITH head AS (
         UPDATE sessions SET head_seq = $3, head_ts_ms = $9
          WHERE tenant = $1 AND session_id = $2
     ), version AS (
         INSERT INTO streams (tenant, session_id, stream, version) VALUES ($1, $2, $4, $5)
         ON CONFLICT (tenant, session_id, stream) DO UPDATE SET version = EXCLUDED.version
     )
     INSERT INTO events (tenant, session_id, seq, stream, stream_seq, fence, kind, payload,
                         blob_sha256, ts_ms)
     SELECT $1::text, $2::text, $6::bigint + e.n, $4::text, $7::bigint + e.n, $8::bigint,
            e.kind, e.payload::jsonb, e.blob, $9::bigint
       FROM unnest($10::text[], $11::text[], $12::text[]) WITH ORDINALITY
            AS e (kind, payload, blob, n)";

/// The batch's approvals audit records (docs/audit.md), each at its event's seq; arrays,
/// like the events.
const INSERT_AUDIT: &str = "INSERT INTO permission_audit (tenant, session_id, seq, ts_ms, run_id,
                                  request_id, tool, args_hash, preview, decision, decided_by, sub, reason)
     SELECT $1::text, $2::text, a.seq, $3::bigint, a.run_id, a.request_id, a.tool, a.args_hash,
            a.preview, a.decision, a.decided_by, a.sub, a.reason
       FROM unnest($4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                   $10::text[], $11::text[], $12::text[], $13::text[])
            AS a (seq, run_id, request_id, tool, args_hash, preview, decision, decided_by, sub,
                  reason)";

/// The audit records as parameter arrays.
#[derive(Default)]
struct AuditColumns {
    seqs: Vec<i64>,
    run_ids: Vec<String>,
    request_ids: Vec<String>,
    tools: Vec<String>,
    args_hashes: Vec<String>,
    previews: Vec<Option<String>>,
    decisions: Vec<String>,
    bys: Vec<String>,
    subs: Vec<Option<String>>,
    reasons: Vec<Option<String>>,
}

impl AuditColumns {
    fn new(head: u64, audit: &[crate::NewAudit]) -> Result<Self> {
        let mut columns = Self::default();
        for a in audit {
            columns
                .seqs
                .push(to_sql_int(head + a.event as u64 + 1, "seq")?);
            columns.run_ids.push(a.run_id.clone());
            columns.request_ids.push(a.request_id.clone());
            columns.tools.push(a.tool.clone());
            columns.args_hashes.push(a.args_hash.clone());
            columns.previews.push(a.preview.clone());
            columns.decisions.push(a.decision.clone());
            columns.bys.push(a.by.clone());
            columns.subs.push(a.sub.clone());
            columns.reasons.push(a.reason.clone());
        }
        Ok(columns)
    }
}

/// The session as its fence lock found it.
struct Locked {
    recorded: Fence,
    archived: bool,
    head: u64,
    /// The stream's version (0 for a new stream).
    version: u64,
    /// `ts_ms` of the last event, so timestamps never go back along seq (instances' clocks
    /// may differ).
    head_ts_ms: i64,
}

impl Locked {
    fn check_fence(&self, presented: Fence) -> Result<()> {
        if self.recorded > presented {
            return Err(Error::Fenced {
                presented,
                recorded: self.recorded,
            });
        }
        Ok(())
    }
}

/// Sends `BEGIN`, locks the session's fence row and reads its state (and `stream`'s
/// version), in one round trip.
async fn begin_locked(tx: &Tx, key: &SessionKey, stream: &str, context: &str) -> Result<Locked> {
    let c = tx.conn()?;
    let (begin, lock, state) = try_join3(
        c.prepare_cached(BEGIN),
        c.prepare_cached(LOCK_FENCE),
        c.prepare_cached(SESSION_STATE),
    )
    .await
    .pg(context)?;
    tx.opened();
    let (_, fence_row, state_row) = try_join3(
        c.execute(&begin, &[]),
        c.query_opt(&lock, &[&key.tenant, &key.session_id]),
        c.query_opt(&state, &[&key.tenant, &key.session_id, &stream]),
    )
    .await
    .pg(context)?;
    let (Some(fence_row), Some(state_row)) = (fence_row, state_row) else {
        return Err(Error::NotFound(key.session_id.clone()));
    };
    let version: Option<i64> = state_row.try_get(2).pg(context)?;
    Ok(Locked {
        recorded: from_sql_int(fence_row.try_get(0).pg(context)?, "fence")?,
        archived: state_row.try_get(0).pg(context)?,
        head: from_sql_int(state_row.try_get(1).pg(context)?, "head seq")?,
        version: from_sql_int(version.unwrap_or(0), "stream version")?,
        head_ts_ms: state_row.try_get(3).pg(context)?,
    })
}

/// See [`crate::JournalStore::create_session`]. One round trip: the tenant and project
/// inserts are idempotent, so committing them with a refused session is harmless.
pub(super) async fn create_session(
    client: Client,
    record: &SessionRecord,
    fence: Fence,
) -> Result<()> {
    let tx = Tx::new(client);
    let result = create_in(&tx, record, fence).await;
    tx.finish(result).await
}

async fn create_in(tx: &Tx, record: &SessionRecord, fence: Fence) -> Result<()> {
    const CONTEXT: &str = "create session";
    let fence = to_sql_int(fence, "fence")?;
    let now = now_ms();
    let c = tx.conn()?;
    let statements = try_join_all([
        c.prepare_cached(BEGIN),
        c.prepare_cached(
            "INSERT INTO tenants (tenant, created_at_ms) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        ),
        c.prepare_cached(
            "INSERT INTO projects (tenant, project_root, created_at_ms) VALUES ($1, $2, $3)
             ON CONFLICT DO NOTHING",
        ),
        // The fence row is only inserted with a new session: zero rows means the id is taken.
        c.prepare_cached(
            "WITH s AS (
                 INSERT INTO sessions (tenant, session_id, title, project_root, created_at_ms,
                                       updated_at_ms, archived, summary)
                 VALUES ($1, $2, $3, $4, $5, $6, false, $7)
                 ON CONFLICT (tenant, session_id) DO NOTHING
                 RETURNING tenant, session_id
             )
             INSERT INTO session_fences (tenant, session_id, fence)
             SELECT tenant, session_id, $8::bigint FROM s",
        ),
        c.prepare_cached(COMMIT),
    ])
    .await
    .pg(CONTEXT)?;
    let [begin, tenant, project, session, commit] = &statements[..] else {
        return Err(Error::Unavailable(
            "create session: statements missing".into(),
        ));
    };
    let tenant_params: [Param; 2] = [&record.tenant, &now];
    let project_params: [Param; 3] = [&record.tenant, &record.project_root, &now];
    let session_params: [Param; 8] = [
        &record.tenant,
        &record.session_id,
        &record.title,
        &record.project_root,
        &record.created_at_ms,
        &record.updated_at_ms,
        &record.summary,
        &fence,
    ];
    tx.opened();
    let counts = pipeline(vec![
        c.execute(begin, &[]),
        c.execute(tenant, &tenant_params),
        c.execute(project, &project_params),
        c.execute(session, &session_params),
        c.execute(commit, &[]),
    ])
    .await
    .pg(CONTEXT)?;
    tx.closed();
    if counts.get(3) != Some(&1) {
        return Err(Error::AlreadyExists(record.session_id.clone()));
    }
    Ok(())
}

/// Event payloads as stored: inline JSON text, or a blob key plus the deduplicated blobs.
#[derive(Default)]
struct Encoded {
    kinds: Vec<String>,
    inline: Vec<Option<String>>,
    blob_keys: Vec<Option<String>>,
    blob_shas: Vec<String>,
    blob_bytes: Vec<Vec<u8>>,
}

/// Done before the transaction, so the session lock is held as briefly as possible.
fn encode(batch: &AppendBatch) -> Result<Encoded> {
    let mut encoded = Encoded::default();
    let mut seen = HashSet::new();
    for event in &batch.events {
        let json = serde_json::to_string(&event.payload)
            .map_err(|e| Error::Corrupt(format!("payload is not serializable: {e}")))?;
        encoded.kinds.push(event.kind.clone());
        // JSONB cannot hold U+0000 (it rejects "\u0000"): such payloads go to a blob too.
        if json.len() > BLOB_THRESHOLD_BYTES || json.contains("\\u0000") {
            let sha256 = sha256_hex(json.as_bytes());
            if seen.insert(sha256.clone()) {
                encoded.blob_shas.push(sha256.clone());
                encoded.blob_bytes.push(json.into_bytes());
            }
            encoded.inline.push(None);
            encoded.blob_keys.push(Some(sha256));
        } else {
            encoded.inline.push(Some(json));
            encoded.blob_keys.push(None);
        }
    }
    Ok(encoded)
}

/// See [`crate::JournalStore::append`].
pub(super) async fn append(
    client: Client,
    key: &SessionKey,
    fence: Fence,
    batch: AppendBatch,
) -> Result<Vec<StoredEvent>> {
    let tx = Tx::new(client);
    let result = append_in(&tx, key, fence, batch).await;
    tx.finish(result).await
}

async fn append_in(
    tx: &Tx,
    key: &SessionKey,
    fence: Fence,
    batch: AppendBatch,
) -> Result<Vec<StoredEvent>> {
    const CONTEXT: &str = "append";
    crate::audit::check_batch(&batch)?;
    let fence_sql = to_sql_int(fence, "fence")?;
    let encoded = encode(&batch)?;
    let count = batch.events.len() as u64;

    let locked = begin_locked(tx, key, &batch.stream, CONTEXT).await?;
    if locked.archived {
        return Err(Error::Archived(key.session_id.clone()));
    }
    locked.check_fence(fence)?;
    if let ExpectedVersion::Exact(expected) = batch.expected {
        if expected != locked.version {
            return Err(Error::Conflict {
                stream: batch.stream,
                expected,
                actual: locked.version,
            });
        }
    }
    let ts_ms = now_ms().max(locked.head_ts_ms);
    let overflow = || Error::Unavailable("sequence exceeds the storable range".into());
    let new_head = locked.head.checked_add(count).ok_or_else(overflow)?;
    let new_version = locked.version.checked_add(count).ok_or_else(overflow)?;
    let (head, new_head) = (
        to_sql_int(locked.head, "seq")?,
        to_sql_int(new_head, "seq")?,
    );
    let (version, new_version) = (
        to_sql_int(locked.version, "stream_seq")?,
        to_sql_int(new_version, "stream_seq")?,
    );

    let c = tx.conn()?;
    let statements = try_join_all([
        c.prepare_cached(RECORD_FENCE),
        c.prepare_cached(INSERT_BLOBS),
        c.prepare_cached(INSERT_COMMAND),
        c.prepare_cached(INSERT_EVENTS),
        c.prepare_cached(INSERT_AUDIT),
        c.prepare_cached(COMMIT),
    ])
    .await
    .pg(CONTEXT)?;
    let [record_fence, insert_blobs, insert_command, insert_events, insert_audit, commit] =
        &statements[..]
    else {
        return Err(Error::Unavailable("append: statements missing".into()));
    };
    let fence_params: [Param; 3] = [&key.tenant, &key.session_id, &fence_sql];
    let blob_params: [Param; 4] = [&key.tenant, &ts_ms, &encoded.blob_shas, &encoded.blob_bytes];
    let (command_key, command_result) = match &batch.command {
        Some(command) => (Some(&command.key), Some(&command.result)),
        None => (None, None),
    };
    let command_params: [Param; 5] = [
        &key.tenant,
        &key.session_id,
        &command_key,
        &command_result,
        &ts_ms,
    ];
    let event_params: [Param; 12] = [
        &key.tenant,
        &key.session_id,
        &new_head,
        &batch.stream,
        &new_version,
        &head,
        &version,
        &fence_sql,
        &ts_ms,
        &encoded.kinds,
        &encoded.inline,
        &encoded.blob_keys,
    ];

    let audit = AuditColumns::new(locked.head, &batch.audit)?;
    let audit_params: [Param; 13] = [
        &key.tenant,
        &key.session_id,
        &ts_ms,
        &audit.seqs,
        &audit.run_ids,
        &audit.request_ids,
        &audit.tools,
        &audit.args_hashes,
        &audit.previews,
        &audit.decisions,
        &audit.bys,
        &audit.subs,
        &audit.reasons,
    ];

    // In this order: blobs before the events that point at them, COMMIT last. With a
    // command key, COMMIT waits until its insert is known to have happened.
    let mut statements = Vec::with_capacity(6);
    if fence > locked.recorded {
        statements.push(c.execute(record_fence, &fence_params));
    }
    if !encoded.blob_shas.is_empty() {
        statements.push(c.execute(insert_blobs, &blob_params));
    }
    let command_at = batch.command.as_ref().map(|_| statements.len());
    if command_at.is_some() {
        statements.push(c.execute(insert_command, &command_params));
    }
    if count > 0 {
        statements.push(c.execute(insert_events, &event_params));
    }
    if !audit.seqs.is_empty() {
        statements.push(c.execute(insert_audit, &audit_params));
    }
    if command_at.is_none() {
        statements.push(c.execute(commit, &[]));
    }
    let counts = pipeline(statements).await.pg(CONTEXT)?;
    if let (Some(at), Some(command)) = (command_at, &batch.command) {
        if counts.get(at) != Some(&1) {
            // Rolled back by `Tx::finish`, with the events inserted alongside.
            return Err(Error::DuplicateCommand(command.key.clone()));
        }
        c.execute(commit, &[]).await.pg("append: commit")?;
    }
    tx.closed();

    Ok((1..)
        .zip(batch.events)
        .map(|(offset, event)| StoredEvent {
            seq: locked.head + offset,
            stream: batch.stream.clone(),
            stream_seq: locked.version + offset,
            kind: event.kind,
            payload: event.payload,
            ts_ms,
            fence,
        })
        .collect())
}

/// A write of one statement under the fence check, in two round trips: BEGIN + lock,
/// then (a newer fence,) `sql` and COMMIT.
async fn fenced_write(
    client: Client,
    key: &SessionKey,
    fence: Fence,
    context: &str,
    sql: &str,
    params: &[Param<'_>],
) -> Result<()> {
    let tx = Tx::new(client);
    let result = fenced_write_in(&tx, key, fence, context, sql, params).await;
    tx.finish(result).await
}

async fn fenced_write_in(
    tx: &Tx,
    key: &SessionKey,
    fence: Fence,
    context: &str,
    sql: &str,
    params: &[Param<'_>],
) -> Result<()> {
    let fence_sql = to_sql_int(fence, "fence")?;
    let locked = begin_locked(tx, key, "", context).await?;
    locked.check_fence(fence)?;
    let c = tx.conn()?;
    let (record_fence, stmt, commit) = try_join3(
        c.prepare_cached(RECORD_FENCE),
        c.prepare_cached(sql),
        c.prepare_cached(COMMIT),
    )
    .await
    .pg(context)?;
    let fence_params: [Param; 3] = [&key.tenant, &key.session_id, &fence_sql];
    let mut statements = Vec::with_capacity(3);
    if fence > locked.recorded {
        statements.push(c.execute(&record_fence, &fence_params));
    }
    statements.push(c.execute(&stmt, params));
    statements.push(c.execute(&commit, &[]));
    pipeline(statements).await.pg(context)?;
    tx.closed();
    Ok(())
}

/// See [`crate::JournalStore::put_blob`].
pub(super) async fn put_blob(
    client: Client,
    key: &SessionKey,
    fence: Fence,
    bytes: &[u8],
) -> Result<String> {
    let sha256 = sha256_hex(bytes);
    let shas = [sha256.as_str()];
    let blobs = [bytes];
    let now = now_ms();
    fenced_write(
        client,
        key,
        fence,
        "put blob",
        INSERT_BLOBS,
        &[&key.tenant, &now, &&shas[..], &&blobs[..]],
    )
    .await?;
    Ok(sha256)
}

/// See [`crate::JournalStore::set_consumer_offset`].
pub(super) async fn set_consumer_offset(
    client: Client,
    key: &SessionKey,
    fence: Fence,
    consumer: &str,
    offset: u64,
) -> Result<()> {
    let offset = to_sql_int(offset, "consumer offset")?;
    fenced_write(
        client,
        key,
        fence,
        "set consumer offset",
        r#"INSERT INTO consumer_offsets (tenant, session_id, consumer, "offset", updated_at_ms)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (tenant, session_id, consumer) DO UPDATE
              SET "offset" = GREATEST(consumer_offsets."offset", EXCLUDED."offset"),
                  updated_at_ms = EXCLUDED.updated_at_ms"#,
        &[&key.tenant, &key.session_id, &consumer, &offset, &now_ms()],
    )
    .await
}

/// See [`crate::JournalStore::claim`]: the fence check and record, nothing else.
pub(super) async fn claim(client: Client, key: &SessionKey, fence: Fence) -> Result<()> {
    fenced_write(client, key, fence, "claim", "SELECT 1", &[]).await
}

/// See [`crate::JournalStore::put_summary`].
pub(super) async fn put_summary(
    client: Client,
    key: &SessionKey,
    fence: Fence,
    summary: &serde_json::Value,
) -> Result<()> {
    fenced_write(
        client,
        key,
        fence,
        "put summary",
        "UPDATE sessions SET summary = $3, updated_at_ms = $4
          WHERE tenant = $1 AND session_id = $2",
        &[&key.tenant, &key.session_id, summary, &now_ms()],
    )
    .await
}

/// See [`crate::JournalStore::archive`]: only the flag changes.
pub(super) async fn archive(client: Client, key: &SessionKey, fence: Fence) -> Result<()> {
    fenced_write(
        client,
        key,
        fence,
        "archive",
        "UPDATE sessions SET archived = true WHERE tenant = $1 AND session_id = $2",
        &[&key.tenant, &key.session_id],
    )
    .await
}
