//! Distributed team members (`team_distributed`, docs/teams.md#distributed-members): the
//! runtime's [`MemberPlacement`] over the registry and the Streams RPC (the owner's side),
//! and the RPC methods a worker serves — run a member task, stop it, say whether it still
//! runs it. The task's events and its result travel through the journal, not the replies.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use lumina_cluster::HandlerError;
use lumina_runtime::team::{MemberJob, MemberPlacement, MemberRun, PlacementError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::node::Node;

/// Run a member task (the worker replies once it claimed it).
pub const RPC_MEMBER_RUN: &str = "team.member_run";
/// Stop a member task.
pub const RPC_MEMBER_CANCEL: &str = "team.member_cancel";
/// Whether the worker still runs a member task.
pub const RPC_MEMBER_STATUS: &str = "team.member_status";

/// How long the owner waits for a worker to claim a task.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the owner waits for an answer to a stop or a status question.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a worker checks that the session's owner still lives.
const OWNER_CHECK: Duration = Duration::from_millis(500);

#[derive(Debug, Serialize, Deserialize)]
struct RunRequest {
    tenant: String,
    job: MemberJob,
}

#[derive(Debug, Serialize, Deserialize)]
struct TaskRef {
    tenant: String,
    session_id: String,
    task_id: String,
}

fn job_key(tenant: &str, session_id: &str, task_id: &str) -> String {
    format!("{tenant}/{session_id}/{task_id}")
}

/// The member tasks this instance runs for other owners, by `tenant/session/task`.
#[derive(Default)]
pub struct MemberJobs(Mutex<HashMap<String, CancellationToken>>);

impl MemberJobs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The owner's side: where member tasks go.
pub struct ClusterPlacement {
    pub(super) node: Weak<Node>,
    instance_id: String,
    /// Spreads tasks over the live instances in turn.
    next: AtomicUsize,
}

impl ClusterPlacement {
    pub fn new(node: Weak<Node>, instance_id: &str) -> Self {
        Self {
            node,
            instance_id: instance_id.to_string(),
            next: AtomicUsize::new(0),
        }
    }

    async fn ask(&self, instance: &str, method: &str, task: TaskRef) -> Option<Value> {
        let node = self.node.upgrade()?;
        let payload = serde_json::to_value(task).ok()?;
        node.rpc
            .call(instance, method, payload, ASK_TIMEOUT)
            .await
            .ok()
    }
}

#[async_trait::async_trait]
impl MemberPlacement for ClusterPlacement {
    fn instance_id(&self) -> &str {
        &self.instance_id
    }

    async fn pick(&self, avoid: &[String]) -> Option<String> {
        let node = self.node.upgrade()?;
        let live = node.registry.live_instances().await.ok()?;
        let candidates: Vec<String> = live
            .into_iter()
            .filter(|i| {
                i.instance_id != self.instance_id && !i.draining && !avoid.contains(&i.instance_id)
            })
            .map(|i| i.instance_id)
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        candidates.get(turn % candidates.len()).cloned()
    }

    async fn start(
        &self,
        instance: &str,
        tenant: &str,
        job: &MemberJob,
    ) -> Result<Option<String>, PlacementError> {
        let node = self
            .node
            .upgrade()
            .ok_or_else(|| PlacementError("instance stopping".into()))?;
        let payload = serde_json::to_value(RunRequest {
            tenant: tenant.to_string(),
            job: job.clone(),
        })
        .map_err(|e| PlacementError(e.to_string()))?;
        let reply = node
            .rpc
            .call(instance, RPC_MEMBER_RUN, payload, START_TIMEOUT)
            .await
            .map_err(|e| PlacementError(e.to_string()))?;
        Ok(reply
            .get("incarnation")
            .and_then(Value::as_str)
            .map(str::to_owned))
    }

    async fn alive(&self, instance: &str, incarnation: Option<&str>) -> bool {
        let Some(node) = self.node.upgrade() else {
            return true;
        };
        match node.registry.incarnation(instance).await {
            Ok(None) => false,
            Ok(Some(now)) => incarnation.is_none_or(|then| then == now),
            // Redis trouble: nothing is known, keep waiting.
            Err(_) => true,
        }
    }

    async fn cancel(&self, instance: &str, tenant: &str, session_id: &str, task_id: &str) {
        let task = TaskRef {
            tenant: tenant.to_string(),
            session_id: session_id.to_string(),
            task_id: task_id.to_string(),
        };
        self.ask(instance, RPC_MEMBER_CANCEL, task).await;
    }

    async fn running(
        &self,
        instance: &str,
        tenant: &str,
        session_id: &str,
        task_id: &str,
    ) -> Option<bool> {
        let task = TaskRef {
            tenant: tenant.to_string(),
            session_id: session_id.to_string(),
            task_id: task_id.to_string(),
        };
        self.ask(instance, RPC_MEMBER_STATUS, task)
            .await?
            .get("running")
            .and_then(Value::as_bool)
    }
}

impl Node {
    /// Serves the member-task RPC methods (`team.member_*`).
    pub async fn handle_member_rpc(
        self: &Arc<Self>,
        method: &str,
        payload: Value,
    ) -> Result<Value, HandlerError> {
        let malformed = |e: serde_json::Error| HandlerError(format!("malformed {method}: {e}"));
        match method {
            RPC_MEMBER_RUN => {
                let request: RunRequest = serde_json::from_value(payload).map_err(malformed)?;
                self.run_member(request).await
            }
            RPC_MEMBER_CANCEL => {
                let task: TaskRef = serde_json::from_value(payload).map_err(malformed)?;
                let key = job_key(&task.tenant, &task.session_id, &task.task_id);
                let token = self.member_jobs.lock().get(&key).cloned();
                if let Some(token) = &token {
                    token.cancel();
                }
                Ok(json!({ "cancelled": token.is_some() }))
            }
            RPC_MEMBER_STATUS => {
                let task: TaskRef = serde_json::from_value(payload).map_err(malformed)?;
                let key = job_key(&task.tenant, &task.session_id, &task.task_id);
                Ok(json!({ "running": self.member_jobs.lock().contains_key(&key) }))
            }
            other => Err(HandlerError(format!("unknown rpc method `{other}`"))),
        }
    }

    /// Claims a member task for this instance and runs it in the background; answers once
    /// it is claimed (the result goes to the journal).
    async fn run_member(self: &Arc<Self>, request: RunRequest) -> Result<Value, HandlerError> {
        if self.is_draining() {
            return Err(HandlerError("this instance is draining".into()));
        }
        let RunRequest { tenant, job } = request;
        let key = job_key(&tenant, &job.session_id, &job.task_id);
        let cancel = self.shutdown.child_token();
        self.member_jobs.lock().insert(key.clone(), cancel.clone());
        let liveness = self.registration.liveness();
        let alive: lumina_runtime::journal::Alive = Arc::new(move || liveness.borrow().is_valid());
        let claimed = self
            .runtime(&tenant)
            .claim_member_task(&job, self.instance_id(), alive, cancel.clone())
            .await;
        let claimed = match claimed {
            Ok(claimed) => claimed,
            Err(err) => {
                self.member_jobs.lock().remove(&key);
                tracing::info!(session_id = %job.session_id, task_id = %job.task_id, error = %err, "member task not claimed");
                return Err(HandlerError(err.to_string()));
            }
        };
        tracing::info!(session_id = %job.session_id, task_id = %job.task_id, agent = %job.agent, fence = job.fence, owner = %job.owner, "running a member task for its owner");
        let node = self.clone();
        tokio::spawn(async move {
            let run = claimed.run();
            tokio::pin!(run);
            let mut check = tokio::time::interval(OWNER_CHECK);
            check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let ended = loop {
                tokio::select! {
                    ended = &mut run => break ended,
                    _ = check.tick() => {
                        // The owner is gone: its successor closes the task and runs it again.
                        if matches!(node.registry.is_live(&job.owner).await, Ok(false)) {
                            cancel.cancel();
                        }
                    }
                }
            };
            node.member_jobs.lock().remove(&key);
            match ended {
                Ok(MemberRun::Ended(status)) => {
                    tracing::info!(session_id = %job.session_id, task_id = %job.task_id, status = %status.as_str(), "member task ended")
                }
                Ok(MemberRun::Stopped) => {
                    tracing::info!(session_id = %job.session_id, task_id = %job.task_id, "member task stopped: its writes were refused")
                }
                Err(err) => {
                    tracing::warn!(session_id = %job.session_id, task_id = %job.task_id, error = %err, "member task failed without an end")
                }
            }
        });
        Ok(json!({ "incarnation": self.registration.incarnation() }))
    }
}
