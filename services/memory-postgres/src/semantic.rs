//! Semantic nodes in PostgreSQL (migration `0003_memory_semantic.sql`): nodes with their
//! citations, conflicts and resolutions, and the compile job's checkpoints and failed
//! batches, per (tenant, space). Every write is one transaction that first takes the space's
//! fence (refusing a stale writer, serializing the space's writers across instances) and
//! then checks the checkpoint is the one the batch was read after.

use std::collections::HashMap;

use tokio_postgres::{Client, GenericClient, Row, Transaction};

use super::db::{check_fence, from_int, to_int, PgResultExt};
use lumina_memory::semantic::job::{CompileState, FailureDraft, NodeFilter};
use lumina_memory::semantic::plan::{
    BatchPlan, BatchSpan, GroupNode, NodeGroup, NodeRef, PlannedResolution,
};
use lumina_memory::semantic::{
    BatchFailure, Citation, Conflict, ConflictState, FailureState, NodeKey, NodeKind, NodeStatus,
    Resolution, SemanticNode, SemanticStatus,
};
use lumina_memory::{Error, Result};

const NODE_COLUMNS: &str = "node_id, space, kind, subject, predicate, value, text, valid_from, \
     valid_to, updates_subject, updates_predicate, status, reason, actor, event_time_ms, \
     batch_event_id, fingerprint";

fn corrupt(what: &str) -> impl Fn(tokio_postgres::Error) -> Error + '_ {
    move |e| Error::Corrupt(format!("{what}: {e}"))
}

fn node(r: &Row) -> Result<SemanticNode> {
    let get = corrupt("node row");
    let kind: String = r.try_get(2).map_err(&get)?;
    let status: String = r.try_get(11).map_err(&get)?;
    let updates_subject: Option<String> = r.try_get(9).map_err(&get)?;
    let updates_predicate: Option<String> = r.try_get(10).map_err(&get)?;
    Ok(SemanticNode {
        node_id: from_int(r.try_get(0).map_err(&get)?, "node id")?,
        space: r.try_get(1).map_err(&get)?,
        kind: NodeKind::parse(&kind).ok_or_else(|| Error::Corrupt(format!("node kind {kind}")))?,
        subject: r.try_get(3).map_err(&get)?,
        predicate: r.try_get(4).map_err(&get)?,
        value: r.try_get(5).map_err(&get)?,
        text: r.try_get(6).map_err(&get)?,
        cites: Vec::new(),
        valid_from: r.try_get(7).map_err(&get)?,
        valid_to: r.try_get(8).map_err(&get)?,
        updates: match (updates_subject, updates_predicate) {
            (Some(subject), Some(predicate)) => Some(NodeKey { subject, predicate }),
            _ => None,
        },
        status: NodeStatus::parse(&status)
            .ok_or_else(|| Error::Corrupt(format!("node status {status}")))?,
        reason: r.try_get(12).map_err(&get)?,
        actor: r.try_get(13).map_err(&get)?,
        event_time_ms: r.try_get(14).map_err(&get)?,
        batch_event_id: from_int(r.try_get(15).map_err(&get)?, "event id")?,
        fingerprint: r.try_get(16).map_err(&get)?,
    })
}

/// Keys as two parallel text arrays (for `unnest`).
fn key_arrays(keys: &[NodeKey]) -> (Vec<&str>, Vec<&str>) {
    keys.iter()
        .map(|k| (k.subject.as_str(), k.predicate.as_str()))
        .unzip()
}

/// The compile checkpoint of a space (the start when none was recorded).
pub(crate) async fn compile_state(
    c: &impl GenericClient,
    tenant: &str,
    space: &str,
) -> Result<CompileState> {
    let row = c
        .query_opt(
            "SELECT last_event_id, checksum, fingerprint, revision FROM memory_compile_state \
             WHERE tenant = $1 AND space = $2",
            &[&tenant, &space],
        )
        .await
        .pg("read compile state")?;
    let Some(r) = row else {
        return Ok(CompileState::default());
    };
    let get = corrupt("compile state");
    Ok(CompileState {
        last_event_id: from_int(r.try_get(0).map_err(&get)?, "event id")?,
        checksum: r.try_get(1).map_err(&get)?,
        fingerprint: r.try_get(2).map_err(&get)?,
        revision: from_int(r.try_get(3).map_err(&get)?, "revision")?,
    })
}

/// The checkpoint and failed batches of a space.
pub(crate) async fn semantic_status(
    c: &impl GenericClient,
    tenant: &str,
    space: &str,
) -> Result<SemanticStatus> {
    let state = compile_state(c, tenant, space).await?;
    let rows = c
        .query(
            "SELECT first_event_id, last_event_id, attempts, error, state \
             FROM memory_compile_failures WHERE tenant = $1 AND space = $2 ORDER BY first_event_id",
            &[&tenant, &space],
        )
        .await
        .pg("read failures")?;
    let get = corrupt("failure row");
    let failures = rows
        .iter()
        .map(|r| {
            let state: String = r.try_get(4).map_err(&get)?;
            let attempts: i32 = r.try_get(2).map_err(&get)?;
            Ok(BatchFailure {
                first_event_id: from_int(r.try_get(0).map_err(&get)?, "event id")?,
                last_event_id: from_int(r.try_get(1).map_err(&get)?, "event id")?,
                attempts: u32::try_from(attempts).unwrap_or(0),
                error: r.try_get(3).map_err(&get)?,
                state: FailureState::parse(&state)
                    .ok_or_else(|| Error::Corrupt(format!("failure state {state}")))?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(SemanticStatus {
        space: space.to_owned(),
        fingerprint: state.fingerprint,
        last_event_id: state.last_event_id,
        revision: state.revision,
        failures,
    })
}

/// Nodes of a space with their citations.
pub(crate) async fn load_nodes(
    c: &impl GenericClient,
    tenant: &str,
    space: &str,
    filter: NodeFilter<'_>,
) -> Result<Vec<SemanticNode>> {
    let base = format!("SELECT {NODE_COLUMNS} FROM memory_nodes WHERE tenant = $1 AND space = $2");
    let rows = match filter {
        NodeFilter::All => c
            .query(&format!("{base} ORDER BY node_id"), &[&tenant, &space])
            .await
            .pg("read nodes")?,
        NodeFilter::Current(limit) => {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            c.query(
                &format!(
                    "{base} AND status IN ('active', 'pending') ORDER BY node_id DESC LIMIT $3"
                ),
                &[&tenant, &space, &limit],
            )
            .await
            .pg("read current nodes")?
        }
        NodeFilter::Keys(keys) => {
            let (subjects, predicates) = key_arrays(keys);
            c.query(
                &format!(
                    "{base} AND status IN ('active', 'pending') AND (subject_key, predicate_key) \
                     IN (SELECT * FROM unnest($3::text[], $4::text[])) ORDER BY node_id"
                ),
                &[&tenant, &space, &subjects, &predicates],
            )
            .await
            .pg("read keyed nodes")?
        }
    };
    let mut nodes: Vec<SemanticNode> = rows.iter().map(node).collect::<Result<_>>()?;
    if nodes.is_empty() {
        return Ok(nodes);
    }
    let ids: Vec<i64> = nodes
        .iter()
        .map(|n| to_int(n.node_id, "node id"))
        .collect::<Result<_>>()?;
    let rows = c
        .query(
            "SELECT node_id, event_id, quote FROM memory_node_cites WHERE node_id = ANY($1) \
             ORDER BY node_id, ord",
            &[&ids],
        )
        .await
        .pg("read cites")?;
    let at: HashMap<u64, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.node_id, i))
        .collect();
    let get = corrupt("cite row");
    for r in rows {
        let id = from_int(r.try_get(0).map_err(&get)?, "node id")?;
        let cite = Citation {
            event_id: from_int(r.try_get(1).map_err(&get)?, "event id")?,
            quote: r.try_get(2).map_err(&get)?,
        };
        if let Some(&i) = at.get(&id) {
            nodes[i].cites.push(cite);
        }
    }
    Ok(nodes)
}

/// Every conflict of a space with its resolution.
pub(crate) async fn load_conflicts(
    c: &impl GenericClient,
    tenant: &str,
    space: &str,
) -> Result<Vec<Conflict>> {
    let rows = c
        .query(
            "SELECT c.conflict_id, c.subject_key, c.predicate_key, c.older, c.newer, c.state, \
             r.winner, r.loser, r.rule, r.decided_by, r.reason, r.at_ms \
             FROM memory_conflicts c LEFT JOIN memory_resolutions r ON r.conflict_id = c.conflict_id \
             WHERE c.tenant = $1 AND c.space = $2 ORDER BY c.conflict_id",
            &[&tenant, &space],
        )
        .await
        .pg("read conflicts")?;
    let get = corrupt("conflict row");
    rows.iter()
        .map(|r| {
            let state: String = r.try_get(5).map_err(&get)?;
            let winner: Option<i64> = r.try_get(6).map_err(&get)?;
            let resolution = match winner {
                None => None,
                Some(winner) => Some(Resolution {
                    winner: from_int(winner, "node id")?,
                    loser: from_int(r.try_get(7).map_err(&get)?, "node id")?,
                    rule: r.try_get(8).map_err(&get)?,
                    decided_by: r.try_get(9).map_err(&get)?,
                    reason: r.try_get(10).map_err(&get)?,
                    at_ms: r.try_get(11).map_err(&get)?,
                }),
            };
            Ok(Conflict {
                conflict_id: from_int(r.try_get(0).map_err(&get)?, "conflict id")?,
                space: space.to_owned(),
                key: NodeKey {
                    subject: r.try_get(1).map_err(&get)?,
                    predicate: r.try_get(2).map_err(&get)?,
                },
                older: from_int(r.try_get(3).map_err(&get)?, "node id")?,
                newer: from_int(r.try_get(4).map_err(&get)?, "node id")?,
                state: ConflictState::parse(&state)
                    .ok_or_else(|| Error::Corrupt(format!("conflict state {state}")))?,
                resolution,
            })
        })
        .collect()
}

/// Active and pending nodes with one of `keys` and their open conflicts.
pub(crate) async fn node_group(
    c: &impl GenericClient,
    tenant: &str,
    space: &str,
    keys: &[NodeKey],
) -> Result<NodeGroup> {
    let nodes = load_nodes(c, tenant, space, NodeFilter::Keys(keys)).await?;
    let (subjects, predicates) = key_arrays(keys);
    let rows = c
        .query(
            "SELECT conflict_id, older, newer FROM memory_conflicts WHERE tenant = $1 \
             AND space = $2 AND state = 'pending' AND (subject_key, predicate_key) \
             IN (SELECT * FROM unnest($3::text[], $4::text[])) ORDER BY conflict_id",
            &[&tenant, &space, &subjects, &predicates],
        )
        .await
        .pg("read open conflicts")?;
    let get = corrupt("open conflict row");
    let pending = rows
        .iter()
        .map(|r| {
            Ok((
                from_int(r.try_get(0).map_err(&get)?, "conflict id")?,
                from_int(r.try_get(1).map_err(&get)?, "node id")?,
                from_int(r.try_get(2).map_err(&get)?, "node id")?,
            ))
        })
        .collect::<Result<_>>()?;
    Ok(NodeGroup {
        nodes: nodes
            .into_iter()
            .map(|n| GroupNode {
                key: n.key().normalized(),
                node_id: n.node_id,
                value: n.value,
                actor: n.actor,
                event_time_ms: n.event_time_ms,
                status: n.status,
            })
            .collect(),
        pending,
    })
}

/// Refuses a write when the space's checkpoint is not the one the batch was read after.
async fn check_checkpoint(tx: &Transaction<'_>, tenant: &str, span: &BatchSpan) -> Result<()> {
    span.check_checkpoint(compile_state(tx, tenant, &span.space).await?.last_event_id)
}

/// Moves the checkpoint and bumps the space's revision.
async fn advance(
    tx: &Transaction<'_>,
    tenant: &str,
    space: &str,
    last: u64,
    checksum: &str,
    fingerprint: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO memory_compile_state (tenant, space, last_event_id, checksum, fingerprint, \
         revision) VALUES ($1, $2, $3, $4, $5, 1) ON CONFLICT (tenant, space) DO UPDATE SET \
         last_event_id = excluded.last_event_id, checksum = excluded.checksum, \
         fingerprint = excluded.fingerprint, revision = memory_compile_state.revision + 1",
        &[
            &tenant,
            &space,
            &to_int(last, "event id")?,
            &checksum,
            &fingerprint,
        ],
    )
    .await
    .pg("advance compile checkpoint")?;
    Ok(())
}

/// Deletes a space's semantic data and moves its checkpoint to the start, under the fence.
pub(crate) async fn reset(c: &mut Client, tenant: &str, fence: u64, space: &str) -> Result<()> {
    let tx = c.transaction().await.pg("begin semantic reset")?;
    check_fence(&tx, tenant, space, fence).await?;
    for table in [
        "memory_resolutions",
        "memory_conflicts",
        "memory_node_cites",
        "memory_nodes",
        "memory_compile_failures",
    ] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE tenant = $1 AND space = $2"),
            &[&tenant, &space],
        )
        .await
        .pg("reset semantic data")?;
    }
    advance(&tx, tenant, space, 0, "", "").await?;
    tx.commit().await.pg("commit semantic reset")
}

async fn insert_resolution(
    tx: &Transaction<'_>,
    tenant: &str,
    space: &str,
    conflict: i64,
    r: &PlannedResolution,
    id_of: &impl Fn(NodeRef) -> Result<i64>,
) -> Result<()> {
    tx.execute(
        "INSERT INTO memory_resolutions (conflict_id, tenant, space, winner, loser, rule, \
         decided_by, reason, at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            &conflict,
            &tenant,
            &space,
            &id_of(r.winner)?,
            &id_of(r.loser)?,
            &r.rule,
            &r.decided_by,
            &r.reason,
            &r.at_ms,
        ],
    )
    .await
    .pg("insert resolution")?;
    Ok(())
}

/// Writes a batch plan with its checkpoint, in one fenced transaction.
pub(crate) async fn commit_batch(
    c: &mut Client,
    tenant: &str,
    fence: u64,
    plan: &BatchPlan,
) -> Result<()> {
    let span = &plan.span;
    let space = span.space.as_str();
    let tx = c.transaction().await.pg("begin semantic batch")?;
    check_fence(&tx, tenant, space, fence).await?;
    check_checkpoint(&tx, tenant, span).await?;
    let batch = to_int(span.last_event_id, "event id")?;
    let insert_node = tx
        .prepare(
            "INSERT INTO memory_nodes (tenant, space, kind, subject, predicate, value, text, \
             valid_from, valid_to, updates_subject, updates_predicate, status, reason, actor, \
             event_time_ms, batch_event_id, fingerprint, subject_key, predicate_key) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
             $18, $19) RETURNING node_id",
        )
        .await
        .pg("prepare node insert")?;
    let insert_cite = tx
        .prepare(
            "INSERT INTO memory_node_cites (node_id, ord, tenant, space, event_id, quote) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .await
        .pg("prepare cite insert")?;
    let mut ids: Vec<i64> = Vec::with_capacity(plan.nodes.len());
    for n in &plan.nodes {
        let p = &n.proposed;
        let key = NodeKey {
            subject: p.subject.clone(),
            predicate: p.predicate.clone(),
        }
        .normalized();
        let id: i64 = tx
            .query_one(
                &insert_node,
                &[
                    &tenant,
                    &space,
                    &p.kind.as_str(),
                    &p.subject,
                    &p.predicate,
                    &p.value,
                    &p.text,
                    &p.valid_from,
                    &p.valid_to,
                    &p.updates.as_ref().map(|u| u.subject.as_str()),
                    &p.updates.as_ref().map(|u| u.predicate.as_str()),
                    &n.status.as_str(),
                    &n.reason,
                    &n.actor,
                    &n.event_time_ms,
                    &batch,
                    &span.fingerprint,
                    &key.subject,
                    &key.predicate,
                ],
            )
            .await
            .pg("insert node")?
            .try_get(0)
            .pg("read node id")?;
        for (ord, cite) in p.cites.iter().enumerate() {
            let ord = i32::try_from(ord).unwrap_or(i32::MAX);
            tx.execute(
                &insert_cite,
                &[
                    &id,
                    &ord,
                    &tenant,
                    &space,
                    &to_int(cite.event_id, "event id")?,
                    &cite.quote,
                ],
            )
            .await
            .pg("insert citation")?;
        }
        ids.push(id);
    }
    let id_of = |r: NodeRef| -> Result<i64> {
        match r {
            NodeRef::Stored(id) => to_int(id, "node id"),
            NodeRef::New(i) => ids
                .get(i)
                .copied()
                .ok_or_else(|| Error::Invalid(format!("batch plan refers to node {i}"))),
        }
    };
    for (id, status) in &plan.status_changes {
        tx.execute(
            "UPDATE memory_nodes SET status = $1 WHERE node_id = $2 AND tenant = $3 AND space = $4",
            &[&status.as_str(), &to_int(*id, "node id")?, &tenant, &space],
        )
        .await
        .pg("update node status")?;
    }
    for conflict in &plan.conflicts {
        let state = if conflict.resolution.is_some() {
            ConflictState::Resolved
        } else {
            ConflictState::Pending
        };
        let id: i64 = tx
            .query_one(
                "INSERT INTO memory_conflicts (tenant, space, subject_key, predicate_key, older, \
                 newer, state) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING conflict_id",
                &[
                    &tenant,
                    &space,
                    &conflict.key.subject,
                    &conflict.key.predicate,
                    &id_of(conflict.older)?,
                    &id_of(conflict.newer)?,
                    &state.as_str(),
                ],
            )
            .await
            .pg("insert conflict")?
            .try_get(0)
            .pg("read conflict id")?;
        if let Some(r) = &conflict.resolution {
            insert_resolution(&tx, tenant, space, id, r, &id_of).await?;
        }
    }
    for (id, r) in &plan.resolved {
        let id = to_int(*id, "conflict id")?;
        tx.execute(
            "UPDATE memory_conflicts SET state = 'resolved' WHERE conflict_id = $1 \
             AND tenant = $2 AND space = $3",
            &[&id, &tenant, &space],
        )
        .await
        .pg("resolve conflict")?;
        insert_resolution(&tx, tenant, space, id, r, &id_of).await?;
    }
    tx.execute(
        "UPDATE memory_compile_failures SET state = 'recovered' WHERE tenant = $1 \
         AND space = $2 AND first_event_id = $3 AND state = 'failed'",
        &[&tenant, &space, &to_int(span.first_event_id, "event id")?],
    )
    .await
    .pg("mark failure recovered")?;
    advance(
        &tx,
        tenant,
        space,
        span.last_event_id,
        &span.last_checksum,
        &span.fingerprint,
    )
    .await?;
    tx.commit().await.pg("commit semantic batch")
}

/// Records a failed attempt at a batch under the fence; at `max_attempts` the batch is
/// abandoned and the checkpoint moves past it.
pub(crate) async fn record_failure(
    c: &mut Client,
    tenant: &str,
    fence: u64,
    draft: &FailureDraft,
) -> Result<BatchFailure> {
    let span = &draft.span;
    let space = span.space.as_str();
    let tx = c.transaction().await.pg("begin failure record")?;
    check_fence(&tx, tenant, space, fence).await?;
    check_checkpoint(&tx, tenant, span).await?;
    let first = to_int(span.first_event_id, "event id")?;
    let before: i32 = tx
        .query_opt(
            "SELECT attempts FROM memory_compile_failures WHERE tenant = $1 AND space = $2 \
             AND first_event_id = $3",
            &[&tenant, &space, &first],
        )
        .await
        .pg("read failure")?
        .map(|r| r.try_get(0))
        .transpose()
        .pg("read failure")?
        .unwrap_or(0);
    let attempts = u32::try_from(before.max(0)).unwrap_or(0).saturating_add(1);
    let state = if attempts >= draft.max_attempts {
        FailureState::Abandoned
    } else {
        FailureState::Failed
    };
    tx.execute(
        "INSERT INTO memory_compile_failures (tenant, space, first_event_id, last_event_id, \
         attempts, error, state, fingerprint) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         ON CONFLICT (tenant, space, first_event_id) DO UPDATE SET \
         last_event_id = excluded.last_event_id, attempts = excluded.attempts, \
         error = excluded.error, state = excluded.state, fingerprint = excluded.fingerprint",
        &[
            &tenant,
            &space,
            &first,
            &to_int(span.last_event_id, "event id")?,
            &i32::try_from(attempts).unwrap_or(i32::MAX),
            &draft.error,
            &state.as_str(),
            &span.fingerprint,
        ],
    )
    .await
    .pg("record failure")?;
    if state == FailureState::Abandoned {
        advance(
            &tx,
            tenant,
            space,
            span.last_event_id,
            &span.last_checksum,
            &span.fingerprint,
        )
        .await?;
    }
    tx.commit().await.pg("commit failure")?;
    Ok(BatchFailure {
        first_event_id: span.first_event_id,
        last_event_id: span.last_event_id,
        attempts,
        error: draft.error.clone(),
        state,
    })
}
