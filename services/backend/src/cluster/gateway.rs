//! Gateway side: any instance serves any session. Reads come straight from PostgreSQL (the
//! only source of truth); mutations run on the session's owner — this instance when it holds
//! or can take the lease, otherwise the owner over Redis Streams RPC.

use std::sync::Arc;
use std::time::Duration;

use lumina_cluster::ClusterError;
use lumina_journal::SessionKey;
use lumina_protocol::methods::*;
use lumina_protocol::{ErrorCode, ErrorObject, EventFrame};
use lumina_runtime::projection::{self, Projection};
use lumina_runtime::{journal::to_frame, Outbound};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::node::{session_key, Node};
use super::subscribe;
use crate::rpc::{self, parse, to_value, Reply};

/// The RPC method every forwarded session request uses.
pub const RPC_SESSION: &str = "session";

/// A session request forwarded to its owner.
#[derive(Debug, Serialize, Deserialize)]
pub struct Forwarded {
    pub tenant: String,
    pub method: String,
    pub params: Value,
}

/// The owner's answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForwardReply {
    Ok(Value),
    Err(ErrorObject),
}

impl Node {
    /// Routes a session method for an authenticated identity.
    pub async fn route(
        self: &Arc<Self>,
        identity: &Identity,
        method: &str,
        params: Value,
    ) -> Reply {
        let tenant = identity.tenant.as_str();
        match method {
            SESSION_CREATE => {
                rpc::execute(
                    &self.runtime(tenant),
                    self.instance_id(),
                    method,
                    params,
                    self.is_draining(),
                )
                .await
            }
            SESSION_LIST => {
                let p: SessionListParams = parse(params)?;
                let records = self
                    .store
                    .list_sessions(tenant, p.include_archived)
                    .await
                    .map_err(journal_error)?;
                rpc::ok(SessionListResult {
                    sessions: records.iter().map(projection::session_info).collect(),
                })
            }
            SESSION_EVENTS => {
                let p: SessionEventsParams = parse(params)?;
                self.require_session(tenant, &p.session_id).await?;
                let limit = p.limit.unwrap_or(500).clamp(1, 1000) as usize;
                let key = SessionKey::new(tenant, &p.session_id);
                let stored = self
                    .store
                    .read(&key, p.after_seq, limit + 1)
                    .await
                    .map_err(journal_error)?;
                let mut events: Vec<EventFrame> = stored
                    .iter()
                    .filter_map(|s| to_frame(&p.session_id, s))
                    .collect();
                let more = events.len() > limit;
                events.truncate(limit);
                let head_seq = self.store.head(&key).await.map_err(journal_error)?;
                rpc::ok(SessionEventsResult {
                    events,
                    head_seq,
                    more,
                })
            }
            SESSION_INFO => {
                let p: SessionRef = parse(params)?;
                let record = self.require_session(tenant, &p.session_id).await?;
                let owner = self
                    .leases
                    .owner(&session_key(tenant, &p.session_id))
                    .await
                    .map_err(cluster_error)?;
                let (owner, fence) = owner.unwrap_or_default();
                rpc::ok(SessionInfoResult {
                    session: projection::session_info(&record),
                    owner,
                    fence,
                })
            }
            _ => {
                let session_id = params
                    .get("session_id")
                    .and_then(|v| v.as_str())
                    .ok_or_else(|| {
                        ErrorObject::new(
                            ErrorCode::InvalidParams,
                            "invalid params: missing `session_id`",
                        )
                    })?
                    .to_string();
                self.require_session(tenant, &session_id).await?;
                self.forward_to_owner(tenant, &session_id, method, params)
                    .await
            }
        }
    }

    async fn require_session(
        &self,
        tenant: &str,
        session_id: &str,
    ) -> Result<lumina_journal::SessionRecord, ErrorObject> {
        self.store
            .session(tenant, session_id)
            .await
            .map_err(journal_error)?
            .ok_or_else(|| {
                ErrorObject::new(
                    ErrorCode::NotFound,
                    format!("session {session_id} not found"),
                )
            })
    }

    /// Runs a mutation on the owner. While the owner is unreachable (dead but its lease not
    /// yet expired) it retries until the lease TTL has passed and another instance — this
    /// one or a live peer — takes the session over.
    async fn forward_to_owner(
        self: &Arc<Self>,
        tenant: &str,
        session_id: &str,
        method: &str,
        params: Value,
    ) -> Reply {
        let key = session_key(tenant, session_id);
        let deadline = tokio::time::Instant::now() + self.config.lease_ttl + Duration::from_secs(3);
        loop {
            let owner = self.leases.owner(&key).await.map_err(cluster_error)?;
            let attempt = match owner {
                Some((owner, _)) if owner == self.instance_id() => {
                    self.execute_local(tenant, method, params.clone()).await
                }
                Some((owner, _)) => {
                    self.call_owner(&owner, tenant, method, params.clone())
                        .await
                }
                None if !self.is_draining() => {
                    self.execute_local(tenant, method, params.clone()).await
                }
                None => match self.pick_peer().await {
                    Some(peer) => self.call_owner(&peer, tenant, method, params.clone()).await,
                    None => Err(ErrorObject::new(
                        ErrorCode::Draining,
                        "no instance can take the session now",
                    )),
                },
            };
            match attempt {
                // Ownership moved (or the owner is gone): route again, until the deadline.
                Err(e) if retryable(&e) && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                other => return other,
            }
        }
    }

    async fn execute_local(&self, tenant: &str, method: &str, params: Value) -> Reply {
        rpc::execute(
            &self.runtime(tenant),
            self.instance_id(),
            method,
            params,
            self.is_draining(),
        )
        .await
    }

    async fn call_owner(&self, owner: &str, tenant: &str, method: &str, params: Value) -> Reply {
        let payload = to_value(Forwarded {
            tenant: tenant.to_string(),
            method: method.to_string(),
            params,
        })?;
        // The caller's span continues on the owner: one request, one trace.
        let traceparent = crate::telemetry::current_traceparent();
        let timer = self.metrics.rpc_latency.start_timer();
        let result = self
            .rpc
            .call_traced(
                owner,
                RPC_SESSION,
                payload,
                Duration::from_secs(30),
                traceparent.as_deref(),
            )
            .await;
        timer.observe_duration();
        let outcome = match &result {
            Ok(_) => "ok",
            Err(ClusterError::Timeout) => "timeout",
            Err(_) => "error",
        };
        self.metrics
            .rpc_requests
            .with_label_values(&[outcome])
            .inc();
        match result {
            Ok(value) => match serde_json::from_value::<ForwardReply>(value) {
                Ok(ForwardReply::Ok(v)) => Ok(v),
                Ok(ForwardReply::Err(e)) => Err(e),
                Err(e) => Err(ErrorObject::new(
                    ErrorCode::Internal,
                    format!("malformed reply from {owner}: {e}"),
                )),
            },
            Err(err) => Err(cluster_error(err)),
        }
    }

    /// A live instance that is not draining, other than this one.
    async fn pick_peer(&self) -> Option<String> {
        let instances = self.registry.live_instances().await.ok()?;
        instances
            .into_iter()
            .find(|i| i.instance_id != self.instance_id() && !i.draining)
            .map(|i| i.instance_id)
    }

    /// Serves a request forwarded by another instance, as a child of the caller's span.
    pub async fn handle_forwarded(
        &self,
        forwarded: Forwarded,
        traceparent: Option<&str>,
    ) -> ForwardReply {
        let span = tracing::info_span!(
            "forwarded",
            method = %forwarded.method,
            instance_id = %self.instance_id(),
        );
        if let Some(traceparent) = traceparent {
            crate::telemetry::set_remote_parent(&span, traceparent);
        }
        self.run_forwarded(forwarded).instrument(span).await
    }

    async fn run_forwarded(&self, forwarded: Forwarded) -> ForwardReply {
        let key = session_key(
            &forwarded.tenant,
            forwarded
                .params
                .get("session_id")
                .and_then(|v| v.as_str())
                .unwrap_or_default(),
        );
        // Only the lease holder (or nobody) may run it here; otherwise the caller re-routes.
        if let Ok(Some((owner, _))) = self.leases.owner(&key).await {
            if owner != self.instance_id() {
                return ForwardReply::Err(ErrorObject::new(
                    ErrorCode::Fenced,
                    format!("session is owned by {owner}"),
                ));
            }
        }
        match self
            .execute_local(&forwarded.tenant, &forwarded.method, forwarded.params)
            .await
        {
            Ok(v) => ForwardReply::Ok(v),
            Err(e) => ForwardReply::Err(e),
        }
    }

    /// `session.resume` on any instance: the journal backlog, then hints, gap-filled from
    /// PostgreSQL.
    pub async fn subscribe(
        self: &Arc<Self>,
        identity: &Identity,
        params: &SessionResumeParams,
    ) -> Result<(SessionResumeResult, mpsc::Receiver<Outbound>), ErrorObject> {
        let tenant = identity.tenant.as_str();
        let record = self.require_session(tenant, &params.session_id).await?;
        let key = SessionKey::new(tenant, &params.session_id);
        // Pending permission requests come from a replay of the journal.
        let mut replay = Projection::default();
        let mut after = 0;
        loop {
            let page = self
                .store
                .read(&key, after, 1000)
                .await
                .map_err(journal_error)?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for frame in page.iter().filter_map(|s| to_frame(&params.session_id, s)) {
                replay.apply(&frame);
            }
        }
        let rx = subscribe::start(self.clone(), key, params.after_seq).await?;
        let mut session = projection::session_info(&record);
        session.head_seq = replay.head_seq;
        Ok((
            SessionResumeResult {
                head_seq: replay.head_seq,
                session,
                pending_permissions: replay.pending_permissions(),
            },
            rx,
        ))
    }
}

fn retryable(error: &ErrorObject) -> bool {
    matches!(error.code, ErrorCode::Fenced | ErrorCode::Unavailable)
}

pub fn journal_error(err: lumina_journal::Error) -> ErrorObject {
    lumina_runtime::Error::from(err).to_error_object()
}

pub fn cluster_error(err: ClusterError) -> ErrorObject {
    match err {
        ClusterError::Timeout => ErrorObject::new(
            ErrorCode::Unavailable,
            "the owning instance did not answer in time",
        ),
        ClusterError::Remote(message) => ErrorObject::new(ErrorCode::Internal, message),
        other => ErrorObject::new(ErrorCode::Unavailable, other.to_string()),
    }
}
