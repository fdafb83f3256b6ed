//! `memory_evidence`: the immutable ledger of every (tenant, space). Rows are only ever
//! inserted (a trigger refuses UPDATE, DELETE and TRUNCATE). Each append transaction
//! first takes the fence lock of every space it writes (in sorted order), which both
//! refuses stale writers and serializes the space's hash chain across instances.

use std::collections::BTreeSet;

use tokio_postgres::{Client, GenericClient};

use super::db::{check_fence, from_int, ledger_row, to_int, PgResultExt, COLUMNS};
use lumina_memory::build::LedgerRow;
use lumina_memory::derive::derive;
use lumina_memory::{chain_next, Appended, Error, Evidence, LedgerHead, NewEvidence, Result};

/// Appends a batch atomically under the writer's `fence`. Duplicates (same space and
/// source id, same checksum) return the stored row; a different checksum refuses the
/// whole batch.
pub(crate) async fn append(
    client: &mut Client,
    tenant: &str,
    fence: u64,
    batch: &[NewEvidence],
) -> Result<Vec<Appended>> {
    for new in batch {
        if new.space.is_empty() || new.source_id.is_empty() {
            return Err(Error::Invalid(
                "evidence needs a space and a source id".into(),
            ));
        }
    }
    let tx = client.transaction().await.pg("begin append")?;
    let spaces: BTreeSet<&str> = batch.iter().map(|n| n.space.as_str()).collect();
    for space in spaces {
        check_fence(&tx, tenant, space, fence).await?;
    }
    let lookup = tx
        .prepare(&format!(
            "SELECT {COLUMNS} FROM memory_evidence \
             WHERE tenant = $1 AND space = $2 AND source_id = $3"
        ))
        .await
        .pg("prepare source lookup")?;
    let mut out = Vec::with_capacity(batch.len());
    for new in batch {
        let checksum = new.checksum();
        if let Some(row) = tx
            .query_opt(&lookup, &[&tenant, &new.space, &new.source_id])
            .await
            .pg("look up source id")?
        {
            let existing = ledger_row(&row)?;
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
            .query_opt(
                "SELECT chain FROM memory_evidence WHERE tenant = $1 AND space = $2 \
                 ORDER BY event_id DESC LIMIT 1",
                &[&tenant, &new.space],
            )
            .await
            .pg("read chain")?
            .map(|r| r.try_get(0))
            .transpose()
            .pg("read chain")?
            .unwrap_or_default();
        let chain = chain_next(&previous, &checksum);
        let mut evidence = Evidence {
            event_id: 0,
            row: new.clone(),
            checksum,
        };
        let body = derive(&evidence).body;
        let id: i64 = tx
            .query_one(
                "INSERT INTO memory_evidence (tenant, space, context, session_id, actor, \
                 event_time_ms, turn_order, text, source_id, source_offset, checksum, chain, body) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING event_id",
                &[
                    &tenant,
                    &new.space,
                    &new.context,
                    &new.session_id,
                    &new.actor,
                    &new.event_time_ms,
                    &new.turn_order,
                    &new.text,
                    &new.source_id,
                    &new.source_offset,
                    &evidence.checksum,
                    &chain,
                    &body,
                ],
            )
            .await
            .pg("insert evidence")?
            .try_get(0)
            .pg("read event id")?;
        evidence.event_id = from_int(id, "event id")?;
        out.push(Appended {
            evidence,
            duplicate: false,
        });
    }
    tx.commit().await.pg("commit append")?;
    Ok(out)
}

/// Rows of a space with `after < event_id <= until`, in order, at most `limit`.
pub(crate) async fn read(
    client: &impl GenericClient,
    tenant: &str,
    space: &str,
    after: u64,
    until: Option<u64>,
    limit: usize,
) -> Result<Vec<LedgerRow>> {
    let until = to_int(until.unwrap_or(i64::MAX as u64), "event id")?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM memory_evidence WHERE tenant = $1 AND space = $2 \
                 AND event_id > $3 AND event_id <= $4 ORDER BY event_id LIMIT $5"
            ),
            &[&tenant, &space, &to_int(after, "event id")?, &until, &limit],
        )
        .await
        .pg("read evidence")?;
    rows.iter().map(ledger_row).collect()
}

/// Rows of a space by event id, in the given order (unknown ids and other spaces' rows
/// are skipped).
pub(crate) async fn get(
    client: &impl GenericClient,
    tenant: &str,
    space: &str,
    ids: &[u64],
) -> Result<Vec<LedgerRow>> {
    let wanted: Vec<i64> = ids
        .iter()
        .filter_map(|&id| i64::try_from(id).ok())
        .collect();
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM memory_evidence WHERE tenant = $1 AND space = $2 \
                 AND event_id = ANY($3)"
            ),
            &[&tenant, &space, &wanted],
        )
        .await
        .pg("get evidence")?;
    let found: Vec<LedgerRow> = rows.iter().map(ledger_row).collect::<Result<_>>()?;
    Ok(ids
        .iter()
        .filter_map(|id| found.iter().find(|r| r.evidence.event_id == *id).cloned())
        .collect())
}

/// The space's head (empty for an unknown space).
pub(crate) async fn head(
    client: &impl GenericClient,
    tenant: &str,
    space: &str,
) -> Result<LedgerHead> {
    let row = client
        .query_opt(
            "SELECT event_id, chain, (SELECT count(*) FROM memory_evidence \
             WHERE tenant = $1 AND space = $2) FROM memory_evidence \
             WHERE tenant = $1 AND space = $2 ORDER BY event_id DESC LIMIT 1",
            &[&tenant, &space],
        )
        .await
        .pg("read head")?;
    let Some(row) = row else {
        return Ok(LedgerHead::default());
    };
    Ok(LedgerHead {
        last_event_id: from_int(row.try_get(0).pg("read head")?, "event id")?,
        chain: row.try_get(1).pg("read head")?,
        rows: from_int(row.try_get(2).pg("read head")?, "row count")?,
    })
}

/// The chain hash of a space at `event_id` ("" for 0); `None` when that row is not the
/// space's.
pub(crate) async fn chain_at(
    client: &impl GenericClient,
    tenant: &str,
    space: &str,
    event_id: u64,
) -> Result<Option<String>> {
    if event_id == 0 {
        return Ok(Some(String::new()));
    }
    client
        .query_opt(
            "SELECT chain FROM memory_evidence WHERE tenant = $1 AND space = $2 AND event_id = $3",
            &[&tenant, &space, &to_int(event_id, "event id")?],
        )
        .await
        .pg("read chain")?
        .map(|r| r.try_get(0))
        .transpose()
        .pg("read chain")
}

/// The tenant's spaces with evidence, sorted (byte order, as the SQLite store).
pub(crate) async fn spaces(client: &impl GenericClient, tenant: &str) -> Result<Vec<String>> {
    let rows = client
        .query(
            "SELECT space FROM memory_evidence WHERE tenant = $1 \
             GROUP BY space ORDER BY space COLLATE \"C\"",
            &[&tenant],
        )
        .await
        .pg("list spaces")?;
    rows.iter().map(|r| r.try_get(0).pg("read space")).collect()
}
