//! Gateway side: any instance serves any session. Reads come straight from PostgreSQL (the
//! only source of truth); mutations run on the session's owner — this instance when it holds
//! or can take the lease, otherwise the owner over Redis Streams RPC.

use std::sync::Arc;
use std::time::Duration;

use lumina_cluster::ClusterError;
use lumina_journal::SessionKey;
use lumina_protocol::methods::*;
use lumina_protocol::{ErrorCode, ErrorObject, EventFrame, Method, Route};
use lumina_runtime::projection::{self, Projection};
use lumina_runtime::{journal::to_frame, Outbound};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::node::{session_key, Node};
use super::subscribe;
use crate::execute::{execute, ok, parse, to_value, Owner, Reply};

/// The RPC method every forwarded session request uses.
pub const RPC_SESSION: &str = "session";

/// How often a gateway waiting for an owner's answer checks that the owner still lives.
const OWNER_CHECK: Duration = Duration::from_millis(100);

/// Pause before routing a request again after ownership moved.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// A session request forwarded to its owner.
#[derive(Debug, Serialize, Deserialize)]
pub struct Forwarded {
    pub tenant: String,
    /// The caller's subject, for the approvals audit (absent from older instances).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
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
    /// Routes a session method for an authenticated identity, as the method table says:
    /// `any` here, `store` from PostgreSQL, `owner` on the session's owner.
    pub async fn route(
        self: &Arc<Self>,
        identity: &Identity,
        method: Method,
        params: Value,
    ) -> Reply {
        let tenant = identity.tenant.as_str();
        let sub = Some(identity.sub.as_str());
        match method.route() {
            Route::Any => self.execute_local(tenant, sub, method, params).await,
            Route::Store => self.read(tenant, sub, method, params).await,
            Route::Owner => self.on_owner(tenant, sub, method, params).await,
            Route::Connection | Route::Instance => Err(ErrorObject::new(
                ErrorCode::Internal,
                format!("`{method}` is not a session method"),
            )),
        }
    }

    /// A read any instance answers from PostgreSQL.
    async fn read(
        self: &Arc<Self>,
        tenant: &str,
        sub: Option<&str>,
        method: Method,
        params: Value,
    ) -> Reply {
        match method {
            Method::AuditList => {
                ok(crate::audit::list(&*self.store, tenant, parse(params)?).await?)
            }
            Method::SessionList => {
                let p: SessionListParams = parse(params)?;
                let records = self
                    .store
                    .list_sessions(tenant, p.include_archived)
                    .await
                    .map_err(journal_error)?;
                ok(SessionListResult {
                    sessions: records.iter().map(projection::session_info).collect(),
                })
            }
            Method::SessionEvents => {
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
                ok(SessionEventsResult {
                    events,
                    head_seq,
                    more,
                })
            }
            Method::SessionInfo => {
                let p: SessionRef = parse(params)?;
                let record = self.require_session(tenant, &p.session_id).await?;
                let owner = self
                    .leases
                    .owner(&session_key(tenant, &p.session_id))
                    .await
                    .map_err(cluster_error)?;
                let (owner, fence) = owner.unwrap_or_default();
                ok(SessionInfoResult {
                    session: projection::session_info(&record),
                    owner,
                    fence,
                })
            }
            // A store read without a reader here is still answered right by the owner.
            _ => self.on_owner(tenant, sub, method, params).await,
        }
    }

    /// A method of one session, on its owner.
    async fn on_owner(
        self: &Arc<Self>,
        tenant: &str,
        sub: Option<&str>,
        method: Method,
        params: Value,
    ) -> Reply {
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
        self.forward_to_owner(tenant, sub, &session_id, method, params)
            .await
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

    /// Runs a mutation on the owner. The owner is the lease holder only while its registry
    /// entry lives: a dead owner's session is free at once, and this instance (or, while it
    /// drains, a live peer) takes it over. Ownership moving meanwhile is retried until the
    /// lease TTL (plus slack) has passed.
    async fn forward_to_owner(
        self: &Arc<Self>,
        tenant: &str,
        sub: Option<&str>,
        session_id: &str,
        method: Method,
        params: Value,
    ) -> Reply {
        let key = session_key(tenant, session_id);
        let deadline = tokio::time::Instant::now() + self.config.lease_ttl + Duration::from_secs(3);
        loop {
            let owner = self.leases.owner(&key).await.map_err(cluster_error)?;
            let attempt = match owner {
                Some((owner, _)) if owner == self.instance_id() => {
                    self.execute_local(tenant, sub, method, params.clone())
                        .await
                }
                Some((owner, _)) => {
                    self.call_live_owner(&key, &owner, tenant, sub, method, params.clone())
                        .await
                }
                None if !self.is_draining() => {
                    self.execute_local(tenant, sub, method, params.clone())
                        .await
                }
                None => match self.pick_peer().await {
                    Some(peer) => {
                        self.call_owner(&peer, tenant, sub, method, params.clone())
                            .await
                    }
                    None => Err(ErrorObject::new(
                        ErrorCode::Draining,
                        "no instance can take the session now",
                    )),
                },
            };
            match attempt {
                // Ownership moved (or the owner is gone): route again, until the deadline.
                Err(e) if retryable(&e) && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                other => return other,
            }
        }
    }

    /// Calls `owner` and waits for its answer only while it stays the session's live owner:
    /// the moment its registry entry lapses (it died) or another instance holds the lease,
    /// the call is given up and the caller routes again — a dead owner never costs the
    /// RPC deadline. (Given up is safe: a forwarded request that still runs on a woken
    /// owner is refused there, since the lease is no longer its own, and a submit that did
    /// run is found again by its idempotency key.)
    async fn call_live_owner(
        &self,
        key: &str,
        owner: &str,
        tenant: &str,
        sub: Option<&str>,
        method: Method,
        params: Value,
    ) -> Reply {
        let call = self.call_owner(owner, tenant, sub, method, params);
        tokio::pin!(call);
        let mut check = tokio::time::interval(OWNER_CHECK);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        check.tick().await;
        loop {
            tokio::select! {
                reply = &mut call => return reply,
                _ = check.tick() => match self.leases.owner(key).await {
                    Ok(Some((current, _))) if current == owner => {}
                    Ok(_) => {
                        self.metrics.rpc_requests.with_label_values(&["owner_gone"]).inc();
                        tracing::info!(session = %key, owner, "owner gone while waiting for its answer; routing again");
                        return Err(ErrorObject::new(
                            ErrorCode::Unavailable,
                            format!("the owning instance {owner} is gone"),
                        ));
                    }
                    // Redis trouble: the answer may still come.
                    Err(_) => {}
                },
            }
        }
    }

    async fn execute_local(
        &self,
        tenant: &str,
        sub: Option<&str>,
        method: Method,
        params: Value,
    ) -> Reply {
        let owner = Owner {
            instance_id: self.instance_id(),
            draining: self.is_draining(),
            limits: &self.limits,
            caller_sub: sub,
        };
        execute(&self.runtime(tenant), &owner, method, params).await
    }

    async fn call_owner(
        &self,
        owner: &str,
        tenant: &str,
        sub: Option<&str>,
        method: Method,
        params: Value,
    ) -> Reply {
        let payload = to_value(Forwarded {
            tenant: tenant.to_string(),
            sub: sub.map(str::to_owned),
            method: method.name().to_string(),
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
        let Some(method) = Method::from_name(&forwarded.method) else {
            return ForwardReply::Err(ErrorObject::new(
                ErrorCode::UnknownMethod,
                format!("unknown method `{}`", forwarded.method),
            ));
        };
        match self
            .execute_local(
                &forwarded.tenant,
                forwarded.sub.as_deref(),
                method,
                forwarded.params,
            )
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
