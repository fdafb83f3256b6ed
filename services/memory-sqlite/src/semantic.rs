//! Semantic nodes in `index.sqlite` (write path steps 2–3): nodes with their citations,
//! conflicts and resolutions, and the compile job's checkpoints and failed batches, per
//! space. Derived data like the index generations (never in the ledger file); every write
//! is one transaction that first checks the space's checkpoint is the one the batch was
//! read after.

use rusqlite::{params, OptionalExtension, Row, Transaction};

use super::db::{from_sql_int, to_sql_int, DbResultExt};
use super::index::IndexDb;
use lumina_memory::semantic::job::{CompileState, FailureDraft, NodeFilter};
use lumina_memory::semantic::plan::{
    BatchPlan, BatchSpan, GroupNode, NodeGroup, NodeRef, PlannedResolution,
};
use lumina_memory::semantic::{
    BatchFailure, Citation, Conflict, ConflictState, FailureState, NodeKey, NodeKind, NodeStatus,
    Resolution, SemanticNode, SemanticStatus,
};
use lumina_memory::{Error, Result};

pub(super) const SEMANTIC_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS semantic_state (
    space         TEXT    PRIMARY KEY,
    last_event_id INTEGER NOT NULL,
    checksum      TEXT    NOT NULL,
    fingerprint   TEXT    NOT NULL,
    revision      INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS semantic_nodes (
    node_id           INTEGER PRIMARY KEY AUTOINCREMENT,
    space             TEXT    NOT NULL,
    kind              TEXT    NOT NULL,
    subject           TEXT    NOT NULL,
    predicate         TEXT    NOT NULL,
    value             TEXT    NOT NULL,
    text              TEXT    NOT NULL,
    valid_from        TEXT,
    valid_to          TEXT,
    updates_subject   TEXT,
    updates_predicate TEXT,
    status            TEXT    NOT NULL
        CHECK (status IN ('active', 'pending', 'superseded', 'rejected')),
    reason            TEXT,
    actor             TEXT    NOT NULL,
    event_time_ms     INTEGER NOT NULL,
    batch_event_id    INTEGER NOT NULL,
    fingerprint       TEXT    NOT NULL,
    subject_key       TEXT    NOT NULL,
    predicate_key     TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS semantic_nodes_space ON semantic_nodes (space, status, node_id);
CREATE INDEX IF NOT EXISTS semantic_nodes_key
    ON semantic_nodes (space, subject_key, predicate_key, status);
CREATE TABLE IF NOT EXISTS semantic_cites (
    node_id  INTEGER NOT NULL REFERENCES semantic_nodes (node_id) ON DELETE CASCADE,
    ord      INTEGER NOT NULL,
    space    TEXT    NOT NULL,
    event_id INTEGER NOT NULL,
    quote    TEXT    NOT NULL,
    PRIMARY KEY (node_id, ord)
);
CREATE INDEX IF NOT EXISTS semantic_cites_event ON semantic_cites (space, event_id);
CREATE TABLE IF NOT EXISTS semantic_conflicts (
    conflict_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    space         TEXT    NOT NULL,
    subject_key   TEXT    NOT NULL,
    predicate_key TEXT    NOT NULL,
    older         INTEGER NOT NULL REFERENCES semantic_nodes (node_id) ON DELETE CASCADE,
    newer         INTEGER NOT NULL REFERENCES semantic_nodes (node_id) ON DELETE CASCADE,
    state         TEXT    NOT NULL CHECK (state IN ('pending', 'resolved'))
);
CREATE INDEX IF NOT EXISTS semantic_conflicts_key
    ON semantic_conflicts (space, subject_key, predicate_key, state);
CREATE TABLE IF NOT EXISTS semantic_resolutions (
    conflict_id INTEGER PRIMARY KEY
        REFERENCES semantic_conflicts (conflict_id) ON DELETE CASCADE,
    space       TEXT    NOT NULL,
    winner      INTEGER NOT NULL,
    loser       INTEGER NOT NULL,
    rule        TEXT    NOT NULL CHECK (rule IN ('authority', 'time', 'superseded')),
    decided_by  TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    at_ms       INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS semantic_failures (
    space          TEXT    NOT NULL,
    first_event_id INTEGER NOT NULL,
    last_event_id  INTEGER NOT NULL,
    attempts       INTEGER NOT NULL,
    error          TEXT    NOT NULL,
    state          TEXT    NOT NULL CHECK (state IN ('failed', 'abandoned', 'recovered')),
    fingerprint    TEXT    NOT NULL,
    PRIMARY KEY (space, first_event_id)
);
";

const NODE_COLUMNS: &str = "node_id, space, kind, subject, predicate, value, text, valid_from, \
     valid_to, updates_subject, updates_predicate, status, reason, actor, event_time_ms, \
     batch_event_id, fingerprint";

type RawNode = (
    (i64, String, String, String, String, String, String),
    (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
    (String, Option<String>, String, i64, i64, String),
);

fn raw_node(r: &Row<'_>) -> rusqlite::Result<RawNode> {
    Ok((
        (
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
        ),
        (r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?),
        (
            r.get(11)?,
            r.get(12)?,
            r.get(13)?,
            r.get(14)?,
            r.get(15)?,
            r.get(16)?,
        ),
    ))
}

fn node(raw: RawNode) -> Result<SemanticNode> {
    let ((id, space, kind, subject, predicate, value, text), optional, rest) = raw;
    let (valid_from, valid_to, updates_subject, updates_predicate) = optional;
    let (status, reason, actor, event_time_ms, batch, fingerprint) = rest;
    Ok(SemanticNode {
        node_id: from_sql_int(id, "node id")?,
        space,
        kind: NodeKind::parse(&kind).ok_or_else(|| Error::Corrupt(format!("node kind {kind}")))?,
        subject,
        predicate,
        value,
        text,
        cites: Vec::new(),
        valid_from,
        valid_to,
        updates: match (updates_subject, updates_predicate) {
            (Some(subject), Some(predicate)) => Some(NodeKey { subject, predicate }),
            _ => None,
        },
        status: NodeStatus::parse(&status)
            .ok_or_else(|| Error::Corrupt(format!("node status {status}")))?,
        reason,
        actor,
        event_time_ms,
        batch_event_id: from_sql_int(batch, "event id")?,
        fingerprint,
    })
}

fn corrupt_state(what: &str, value: &str) -> Error {
    Error::Corrupt(format!("{what} {value}"))
}

/// Refuses a write when the space's checkpoint is not the one the batch was read after.
fn check_checkpoint(tx: &Transaction<'_>, span: &BatchSpan) -> Result<()> {
    let last: i64 = tx
        .query_row(
            "SELECT last_event_id FROM semantic_state WHERE space = ?1",
            [&span.space],
            |r| r.get(0),
        )
        .optional()
        .db("read compile checkpoint")?
        .unwrap_or(0);
    span.check_checkpoint(from_sql_int(last, "event id")?)
}

/// Moves the checkpoint and bumps the space's revision.
fn advance(tx: &Transaction<'_>, space: &str, last: u64, checksum: &str, fp: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO semantic_state (space, last_event_id, checksum, fingerprint, revision) \
         VALUES (?1, ?2, ?3, ?4, 1) ON CONFLICT (space) DO UPDATE SET \
         last_event_id = excluded.last_event_id, checksum = excluded.checksum, \
         fingerprint = excluded.fingerprint, revision = semantic_state.revision + 1",
        params![space, to_sql_int(last, "event id")?, checksum, fp],
    )
    .db("advance compile checkpoint")?;
    Ok(())
}

impl IndexDb {
    /// The compile checkpoint of a space (the start when none was recorded).
    pub fn compile_state(&self, space: &str) -> Result<CompileState> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT last_event_id, checksum, fingerprint, revision FROM semantic_state \
                 WHERE space = ?1",
            )
            .db("prepare compile state")?
            .query_row([space], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .optional()
            .db("read compile state")?;
        match row {
            None => Ok(CompileState::default()),
            Some((last, checksum, fingerprint, revision)) => Ok(CompileState {
                last_event_id: from_sql_int(last, "event id")?,
                checksum,
                fingerprint,
                revision: from_sql_int(revision, "revision")?,
            }),
        }
    }

    /// The checkpoint and failed batches of a space.
    pub fn semantic_status(&self, space: &str) -> Result<SemanticStatus> {
        let state = self.compile_state(space)?;
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT first_event_id, last_event_id, attempts, error, state \
                 FROM semantic_failures WHERE space = ?1 ORDER BY first_event_id",
            )
            .db("prepare failures")?;
        let rows = stmt
            .query_map([space], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })
            .db("read failures")?;
        let mut failures = Vec::new();
        for r in rows {
            let (first, last, attempts, error, state) = r.db("failure row")?;
            failures.push(BatchFailure {
                first_event_id: from_sql_int(first, "event id")?,
                last_event_id: from_sql_int(last, "event id")?,
                attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                error,
                state: FailureState::parse(&state)
                    .ok_or_else(|| corrupt_state("failure state", &state))?,
            });
        }
        Ok(SemanticStatus {
            space: space.to_owned(),
            fingerprint: state.fingerprint,
            last_event_id: state.last_event_id,
            revision: state.revision,
            failures,
        })
    }

    /// Nodes of a space with their citations.
    pub fn load_nodes(&self, space: &str, filter: NodeFilter<'_>) -> Result<Vec<SemanticNode>> {
        let mut raws: Vec<RawNode> = Vec::new();
        match filter {
            NodeFilter::All => {
                let mut stmt = self
                    .conn
                    .prepare_cached(&format!(
                        "SELECT {NODE_COLUMNS} FROM semantic_nodes WHERE space = ?1 ORDER BY node_id"
                    ))
                    .db("prepare nodes")?;
                let rows = stmt.query_map([space], raw_node).db("read nodes")?;
                for r in rows {
                    raws.push(r.db("node row")?);
                }
            }
            NodeFilter::Current(limit) => {
                let mut stmt = self
                    .conn
                    .prepare_cached(&format!(
                        "SELECT {NODE_COLUMNS} FROM semantic_nodes WHERE space = ?1 \
                         AND status IN ('active', 'pending') ORDER BY node_id DESC LIMIT ?2"
                    ))
                    .db("prepare current nodes")?;
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                let rows = stmt
                    .query_map(params![space, limit], raw_node)
                    .db("read current nodes")?;
                for r in rows {
                    raws.push(r.db("node row")?);
                }
            }
            NodeFilter::Keys(keys) => {
                let mut stmt = self
                    .conn
                    .prepare_cached(&format!(
                        "SELECT {NODE_COLUMNS} FROM semantic_nodes WHERE space = ?1 \
                         AND subject_key = ?2 AND predicate_key = ?3 \
                         AND status IN ('active', 'pending') ORDER BY node_id"
                    ))
                    .db("prepare keyed nodes")?;
                for k in keys {
                    let rows = stmt
                        .query_map(params![space, k.subject, k.predicate], raw_node)
                        .db("read keyed nodes")?;
                    for r in rows {
                        raws.push(r.db("node row")?);
                    }
                }
            }
        }
        let mut cites = self
            .conn
            .prepare_cached(
                "SELECT event_id, quote FROM semantic_cites WHERE node_id = ?1 ORDER BY ord",
            )
            .db("prepare cites")?;
        raws.into_iter()
            .map(|raw| {
                let mut n = node(raw)?;
                let rows = cites
                    .query_map([to_sql_int(n.node_id, "node id")?], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                    })
                    .db("read cites")?;
                for r in rows {
                    let (event_id, quote) = r.db("cite row")?;
                    n.cites.push(Citation {
                        event_id: from_sql_int(event_id, "event id")?,
                        quote,
                    });
                }
                Ok(n)
            })
            .collect()
    }

    /// Every conflict of a space with its resolution.
    pub fn load_conflicts(&self, space: &str) -> Result<Vec<Conflict>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT c.conflict_id, c.subject_key, c.predicate_key, c.older, c.newer, c.state, \
                 r.winner, r.loser, r.rule, r.decided_by, r.reason, r.at_ms \
                 FROM semantic_conflicts c \
                 LEFT JOIN semantic_resolutions r ON r.conflict_id = c.conflict_id \
                 WHERE c.space = ?1 ORDER BY c.conflict_id",
            )
            .db("prepare conflicts")?;
        type RawConflict = (
            (i64, String, String, i64, i64, String),
            Option<(i64, i64, String, String, String, i64)>,
        );
        let rows = stmt
            .query_map([space], |r| -> rusqlite::Result<RawConflict> {
                let resolution = match r.get::<_, Option<i64>>(6)? {
                    None => None,
                    Some(winner) => Some((
                        winner,
                        r.get(7)?,
                        r.get(8)?,
                        r.get(9)?,
                        r.get(10)?,
                        r.get(11)?,
                    )),
                };
                Ok((
                    (
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ),
                    resolution,
                ))
            })
            .db("read conflicts")?;
        let mut out = Vec::new();
        for r in rows {
            let ((id, subject, predicate, older, newer, state), resolution) =
                r.db("conflict row")?;
            out.push(Conflict {
                conflict_id: from_sql_int(id, "conflict id")?,
                space: space.to_owned(),
                key: NodeKey { subject, predicate },
                older: from_sql_int(older, "node id")?,
                newer: from_sql_int(newer, "node id")?,
                state: ConflictState::parse(&state)
                    .ok_or_else(|| corrupt_state("conflict state", &state))?,
                resolution: resolution
                    .map(|(winner, loser, rule, decided_by, reason, at_ms)| {
                        Ok::<_, Error>(Resolution {
                            winner: from_sql_int(winner, "node id")?,
                            loser: from_sql_int(loser, "node id")?,
                            rule,
                            decided_by,
                            reason,
                            at_ms,
                        })
                    })
                    .transpose()?,
            });
        }
        Ok(out)
    }

    /// Active and pending nodes with one of `keys` and their open conflicts.
    pub fn node_group(&self, space: &str, keys: &[NodeKey]) -> Result<NodeGroup> {
        let nodes = self.load_nodes(space, NodeFilter::Keys(keys))?;
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT conflict_id, older, newer FROM semantic_conflicts WHERE space = ?1 \
                 AND subject_key = ?2 AND predicate_key = ?3 AND state = 'pending' \
                 ORDER BY conflict_id",
            )
            .db("prepare open conflicts")?;
        let mut pending = Vec::new();
        for k in keys {
            let rows = stmt
                .query_map(params![space, k.subject, k.predicate], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                    ))
                })
                .db("read open conflicts")?;
            for r in rows {
                let (id, older, newer) = r.db("open conflict row")?;
                pending.push((
                    from_sql_int(id, "conflict id")?,
                    from_sql_int(older, "node id")?,
                    from_sql_int(newer, "node id")?,
                ));
            }
        }
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

    /// Deletes a space's semantic data and moves its checkpoint to the start.
    pub fn reset_semantic(&mut self, space: &str) -> Result<()> {
        let tx = self.begin()?;
        for table in [
            "semantic_resolutions",
            "semantic_conflicts",
            "semantic_cites",
            "semantic_nodes",
            "semantic_failures",
        ] {
            tx.execute(&format!("DELETE FROM {table} WHERE space = ?1"), [space])
                .db("reset semantic data")?;
        }
        advance(&tx, space, 0, "", "")?;
        tx.commit().db("commit semantic reset")
    }

    /// Writes a batch plan with its checkpoint, in one transaction.
    pub fn commit_batch(&mut self, plan: &BatchPlan) -> Result<()> {
        let span = &plan.span;
        let tx = self.begin()?;
        check_checkpoint(&tx, span)?;
        let batch = to_sql_int(span.last_event_id, "event id")?;
        let mut ids: Vec<i64> = Vec::with_capacity(plan.nodes.len());
        for n in &plan.nodes {
            let p = &n.proposed;
            let key = NodeKey {
                subject: p.subject.clone(),
                predicate: p.predicate.clone(),
            }
            .normalized();
            tx.execute(
                "INSERT INTO semantic_nodes (space, kind, subject, predicate, value, text, \
                 valid_from, valid_to, updates_subject, updates_predicate, status, reason, actor, \
                 event_time_ms, batch_event_id, fingerprint, subject_key, predicate_key) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, \
                 ?17, ?18)",
                params![
                    span.space,
                    p.kind.as_str(),
                    p.subject,
                    p.predicate,
                    p.value,
                    p.text,
                    p.valid_from,
                    p.valid_to,
                    p.updates.as_ref().map(|u| &u.subject),
                    p.updates.as_ref().map(|u| &u.predicate),
                    n.status.as_str(),
                    n.reason,
                    n.actor,
                    n.event_time_ms,
                    batch,
                    span.fingerprint,
                    key.subject,
                    key.predicate,
                ],
            )
            .db("insert node")?;
            let id = tx.last_insert_rowid();
            for (ord, c) in p.cites.iter().enumerate() {
                tx.execute(
                    "INSERT INTO semantic_cites (node_id, ord, space, event_id, quote) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        id,
                        ord as i64,
                        span.space,
                        to_sql_int(c.event_id, "event id")?,
                        c.quote
                    ],
                )
                .db("insert citation")?;
            }
            ids.push(id);
        }
        let id_of = |r: NodeRef| -> Result<i64> {
            match r {
                NodeRef::Stored(id) => to_sql_int(id, "node id"),
                NodeRef::New(i) => ids
                    .get(i)
                    .copied()
                    .ok_or_else(|| Error::Invalid(format!("batch plan refers to node {i}"))),
            }
        };
        for (id, status) in &plan.status_changes {
            tx.execute(
                "UPDATE semantic_nodes SET status = ?1 WHERE node_id = ?2 AND space = ?3",
                params![status.as_str(), to_sql_int(*id, "node id")?, span.space],
            )
            .db("update node status")?;
        }
        let resolve = |tx: &Transaction<'_>, conflict: i64, r: &PlannedResolution| -> Result<()> {
            tx.execute(
                "INSERT INTO semantic_resolutions (conflict_id, space, winner, loser, rule, \
                 decided_by, reason, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    conflict,
                    span.space,
                    id_of(r.winner)?,
                    id_of(r.loser)?,
                    r.rule,
                    r.decided_by,
                    r.reason,
                    r.at_ms
                ],
            )
            .db("insert resolution")?;
            Ok(())
        };
        for c in &plan.conflicts {
            let state = if c.resolution.is_some() {
                ConflictState::Resolved
            } else {
                ConflictState::Pending
            };
            tx.execute(
                "INSERT INTO semantic_conflicts (space, subject_key, predicate_key, older, newer, \
                 state) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    span.space,
                    c.key.subject,
                    c.key.predicate,
                    id_of(c.older)?,
                    id_of(c.newer)?,
                    state.as_str()
                ],
            )
            .db("insert conflict")?;
            let conflict = tx.last_insert_rowid();
            if let Some(r) = &c.resolution {
                resolve(&tx, conflict, r)?;
            }
        }
        for (id, r) in &plan.resolved {
            let conflict = to_sql_int(*id, "conflict id")?;
            tx.execute(
                "UPDATE semantic_conflicts SET state = 'resolved' WHERE conflict_id = ?1 \
                 AND space = ?2",
                params![conflict, span.space],
            )
            .db("resolve conflict")?;
            resolve(&tx, conflict, r)?;
        }
        tx.execute(
            "UPDATE semantic_failures SET state = 'recovered' WHERE space = ?1 \
             AND first_event_id = ?2 AND state = 'failed'",
            params![span.space, to_sql_int(span.first_event_id, "event id")?],
        )
        .db("mark failure recovered")?;
        advance(
            &tx,
            &span.space,
            span.last_event_id,
            &span.last_checksum,
            &span.fingerprint,
        )?;
        tx.commit().db("commit semantic batch")
    }

    /// Records a failed attempt at a batch; at `max_attempts` the batch is abandoned and
    /// the checkpoint moves past it.
    pub fn record_failure(&mut self, draft: &FailureDraft) -> Result<BatchFailure> {
        let span = &draft.span;
        let tx = self.begin()?;
        check_checkpoint(&tx, span)?;
        let first = to_sql_int(span.first_event_id, "event id")?;
        let before: i64 = tx
            .query_row(
                "SELECT attempts FROM semantic_failures WHERE space = ?1 AND first_event_id = ?2",
                params![span.space, first],
                |r| r.get(0),
            )
            .optional()
            .db("read failure")?
            .unwrap_or(0);
        let attempts = u32::try_from(before.max(0))
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        let state = if attempts >= draft.max_attempts {
            FailureState::Abandoned
        } else {
            FailureState::Failed
        };
        tx.execute(
            "INSERT INTO semantic_failures (space, first_event_id, last_event_id, attempts, \
             error, state, fingerprint) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
             ON CONFLICT (space, first_event_id) DO UPDATE SET \
             last_event_id = excluded.last_event_id, attempts = excluded.attempts, \
             error = excluded.error, state = excluded.state, fingerprint = excluded.fingerprint",
            params![
                span.space,
                first,
                to_sql_int(span.last_event_id, "event id")?,
                i64::from(attempts),
                draft.error,
                state.as_str(),
                span.fingerprint
            ],
        )
        .db("record failure")?;
        if state == FailureState::Abandoned {
            advance(
                &tx,
                &span.space,
                span.last_event_id,
                &span.last_checksum,
                &span.fingerprint,
            )?;
        }
        tx.commit().db("commit failure")?;
        Ok(BatchFailure {
            first_event_id: span.first_event_id,
            last_event_id: span.last_event_id,
            attempts,
            error: draft.error.clone(),
            state,
        })
    }
}
