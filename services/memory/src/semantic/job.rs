//! The compile job, shared by every backend: per space, read the evidence after the
//! checkpoint in batches, ask the model, check and plan each batch, and let the backend
//! commit it atomically with the next checkpoint. A failed model call or malformed answer
//! writes only a failure record (the checkpoint stays, so the next run retries the batch;
//! after `max_attempts` the batch is abandoned and the checkpoint moves past it). A
//! checkpoint compiled under another fingerprint, or pointing at a ledger row that is not
//! the one it recorded, rebuilds the space's nodes from the first event.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use tracing::{info, warn};

use super::ground::check;
use super::parse::parse_nodes;
use super::plan::{plan, BatchPlan, BatchSpan, CheckedNode, NodeGroup};
use super::{
    fingerprint, prompt, BatchFailure, CompileLimits, CompileReport, FailureState, NodeKey,
    NodeStatus, SemanticModel, SemanticNode,
};
use crate::{Error, Evidence, MemoryStore, Result};

/// One compile at a time per space within a process (the commit's checkpoint check keeps
/// concurrent processes correct; the lock only saves duplicate model calls).
#[derive(Debug, Default)]
pub struct SpaceLocks {
    spaces: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl SpaceLocks {
    /// Waits for the space's compile lock.
    pub async fn lock(&self, space: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut spaces = self.spaces.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(spaces.entry(space.to_owned()).or_default())
        };
        lock.lock_owned().await
    }
}

/// Which nodes of a space a backend loads.
#[derive(Debug, Clone, Copy)]
pub enum NodeFilter<'a> {
    /// Every node, by id.
    All,
    /// Active and pending nodes, newest first, at most this many.
    Current(usize),
    /// Active and pending nodes with one of these normalized keys, by id.
    Keys(&'a [NodeKey]),
}

/// A space's compile checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompileState {
    /// The last compiled event (0 before the first).
    pub last_event_id: u64,
    /// The checksum of that ledger row ("" for 0).
    pub checksum: String,
    /// The semantic fingerprint the nodes were compiled with.
    pub fingerprint: String,
    /// Increases with every commit and reset (it versions cached read views).
    pub revision: u64,
}

/// A failed attempt at a batch.
#[derive(Debug, Clone)]
pub struct FailureDraft {
    /// The batch that failed.
    pub span: BatchSpan,
    /// Why (no secrets: the model client's error).
    pub error: String,
    /// Attempts after which the batch is skipped.
    pub max_attempts: u32,
}

/// What a backend stores for the job. Every write is one transaction that first checks the
/// space's checkpoint is still the one the batch was read after (and, in PostgreSQL, the
/// writer's fence).
#[async_trait]
pub trait SemanticBackend: MemoryStore {
    /// The per-space compile locks of the store.
    fn compile_locks(&self) -> &SpaceLocks;

    /// The space's compile checkpoint.
    async fn compile_state(&self, space: &str) -> Result<CompileState>;

    /// Deletes the space's nodes, citations, conflicts, resolutions and failures and
    /// resets its checkpoint to the start (the revision still increases).
    async fn reset_space(&self, space: &str) -> Result<()>;

    /// Active and pending nodes, newest first, at most `limit`.
    async fn current_nodes(&self, space: &str, limit: usize) -> Result<Vec<SemanticNode>>;

    /// Active and pending nodes with one of the (normalized) keys, and their open conflicts.
    async fn node_group(&self, space: &str, keys: &[NodeKey]) -> Result<NodeGroup>;

    /// Writes a batch's nodes, statuses, conflicts and resolutions with its checkpoint.
    async fn commit_batch(&self, plan: &BatchPlan) -> Result<()>;

    /// Records a failed attempt (abandoning the batch at `max_attempts`, which moves the
    /// checkpoint past it).
    async fn record_failure(&self, failure: &FailureDraft) -> Result<BatchFailure>;
}

/// Whether the space's nodes must be rebuilt before compiling under `fingerprint`.
async fn needs_rebuild<B: SemanticBackend + ?Sized>(
    store: &B,
    space: &str,
    state: &CompileState,
    fingerprint: &str,
) -> Result<bool> {
    if !state.fingerprint.is_empty() && state.fingerprint != fingerprint {
        info!(space, from = %state.fingerprint, to = %fingerprint, "semantic fingerprint changed");
        return Ok(true);
    }
    if state.last_event_id == 0 {
        return Ok(false);
    }
    let row = store.get(space, &[state.last_event_id]).await?;
    let same = row.first().is_some_and(|e| e.checksum == state.checksum);
    if !same {
        info!(
            space,
            event_id = state.last_event_id,
            "compiled ledger prefix does not match"
        );
    }
    Ok(!same)
}

/// Runs the compile job in one space (see the module docs).
pub async fn compile<B: SemanticBackend + ?Sized>(
    store: &B,
    space: &str,
    model: &dyn SemanticModel,
    limits: CompileLimits,
) -> Result<CompileReport> {
    if space.is_empty() || limits.batch_rows == 0 {
        return Err(Error::Invalid(
            "a compile needs a space and batch_rows > 0".into(),
        ));
    }
    let _guard = store.compile_locks().lock(space).await;
    let fingerprint = fingerprint(model.model_id());
    let mut report = CompileReport {
        space: space.to_owned(),
        fingerprint: fingerprint.clone(),
        ..CompileReport::default()
    };
    let mut state = store.compile_state(space).await?;
    if needs_rebuild(store, space, &state, &fingerprint).await? {
        store.reset_space(space).await?;
        state = store.compile_state(space).await?;
        report.rebuilt = true;
    }
    let mut attempted = 0usize;
    loop {
        if limits
            .stop_after_batches
            .is_some_and(|stop| attempted >= stop)
        {
            report.paused = !store.read(space, state.last_event_id, 1).await?.is_empty();
            break;
        }
        let rows = store
            .read(space, state.last_event_id, limits.batch_rows)
            .await?;
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            break;
        };
        attempted += 1;
        let span = BatchSpan {
            space: space.to_owned(),
            fingerprint: fingerprint.clone(),
            after: state.last_event_id,
            first_event_id: first.event_id,
            last_event_id: last.event_id,
            last_checksum: last.checksum.clone(),
        };
        let known = store.current_nodes(space, limits.known_nodes).await?;
        let answer = match model.propose(&prompt::build(&rows, &known)).await {
            Ok(text) => parse_nodes(&text).map_err(|e| e.to_string()),
            Err(err) => Err(format!("the model call failed: {err}")),
        };
        let proposed = match answer {
            Ok(proposed) => proposed,
            Err(error) => {
                let failure = store
                    .record_failure(&FailureDraft {
                        span,
                        error,
                        max_attempts: limits.max_attempts.max(1),
                    })
                    .await?;
                warn!(
                    space,
                    first_event_id = failure.first_event_id,
                    attempts = failure.attempts,
                    state = failure.state.as_str(),
                    error = %failure.error,
                    "semantic compile batch failed"
                );
                if failure.state == FailureState::Abandoned {
                    state = store.compile_state(space).await?;
                    continue;
                }
                report.failed = Some(failure);
                break;
            }
        };
        let plan = checked_plan(store, span, proposed).await?;
        store.commit_batch(&plan).await?;
        report.batches += 1;
        report.rows += rows.len() as u64;
        report.accepted += plan
            .nodes
            .iter()
            .filter(|n| n.status != NodeStatus::Rejected)
            .count() as u64;
        report.rejected += plan.count(NodeStatus::Rejected);
        report.superseded += plan.count(NodeStatus::Superseded);
        report.pending += plan.pending_conflicts();
        state.last_event_id = last.event_id;
        state.checksum = last.checksum.clone();
    }
    report.last_event_id = state.last_event_id;
    info!(
        space,
        batches = report.batches,
        accepted = report.accepted,
        rejected = report.rejected,
        superseded = report.superseded,
        pending = report.pending,
        last_event_id = report.last_event_id,
        "semantic compile finished"
    );
    Ok(report)
}

/// Grounds each proposed node against the space's evidence and plans the batch's conflicts.
async fn checked_plan<B: SemanticBackend + ?Sized>(
    store: &B,
    span: BatchSpan,
    proposed: Vec<super::parse::ProposedNode>,
) -> Result<BatchPlan> {
    let ids: Vec<u64> = proposed
        .iter()
        .flat_map(|p| p.cites.iter().map(|c| c.event_id))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let evidence: HashMap<u64, Evidence> = store
        .get(&span.space, &ids)
        .await?
        .into_iter()
        .map(|e| (e.event_id, e))
        .collect();
    let checked: Vec<CheckedNode> = proposed
        .into_iter()
        .map(|p| CheckedNode {
            verdict: check(&p, &evidence),
            proposed: p,
        })
        .collect();
    let keys: Vec<NodeKey> = checked
        .iter()
        .filter(|c| c.verdict.is_ok())
        .map(|c| {
            NodeKey {
                subject: c.proposed.subject.clone(),
                predicate: c.proposed.predicate.clone(),
            }
            .normalized()
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let group = if keys.is_empty() {
        NodeGroup::default()
    } else {
        store.node_group(&span.space, &keys).await?
    };
    Ok(plan(span, checked, group))
}
