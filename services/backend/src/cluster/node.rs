//! One cluster instance: per-tenant runtimes over the fenced PostgreSQL journal, Redis leases
//! for ownership, the lease keeper that evicts lost sessions at once, and readiness.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use axum::http::HeaderMap;
use lumina_auth::Authenticator;
use lumina_cluster::{
    Lease, LeaseKeeper, Leases, Ownerships, Redis, Registration, Registry, RpcClient,
};
use lumina_config::{AppRoot, Env};
use lumina_journal::postgres::PgJournal;
use lumina_journal::{Fence, JournalStore, SessionKey};
use lumina_memory_postgres::{PgMemory, PgMemoryOptions};
use lumina_protocol::methods::{DrainResult, Identity};
use lumina_rag_postgres::PgRag;
use lumina_runtime::{Ownership, Runtime, RuntimeOptions};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::config::ClusterConfig;
use super::profile::presented_jwt;
use super::relay::Relay;
use crate::limits::TenantLimits;
use crate::metrics::Metrics;

/// What a node is built from (see `cluster::start`).
pub struct NodeParts {
    pub config: ClusterConfig,
    pub app_root: AppRoot,
    pub env: Env,
    pub project_root: std::path::PathBuf,
    pub pg: PgJournal,
    pub store: Arc<dyn JournalStore>,
    pub redis: Redis,
    pub leases: Leases,
    pub keeper: LeaseKeeper,
    pub registration: Registration,
    pub registry: Registry,
    pub ownerships: Ownerships,
    pub rpc: RpcClient,
    pub auth: Authenticator,
    pub metrics: Metrics,
    pub limits: Arc<TenantLimits>,
    pub shutdown: CancellationToken,
}

pub struct Node {
    pub config: ClusterConfig,
    app_root: AppRoot,
    env: Env,
    project_root: std::path::PathBuf,
    pub(super) pg: PgJournal,
    pub(super) store: Arc<dyn JournalStore>,
    pub(super) redis: Redis,
    pub(super) leases: Leases,
    pub(super) keeper: LeaseKeeper,
    pub(super) registration: Registration,
    pub(super) registry: Registry,
    ownerships: Ownerships,
    pub(super) rpc: RpcClient,
    auth: Authenticator,
    pub metrics: Metrics,
    pub(super) limits: Arc<TenantLimits>,
    pub(super) draining: AtomicBool,
    pub shutdown: CancellationToken,
    runtimes: Mutex<HashMap<String, Runtime>>,
    /// Serializes lease acquisition per process (acquire is rare and fast).
    acquire_lock: tokio::sync::Mutex<()>,
    /// Sessions of dead instances another survivor is preferred to take, with when this
    /// one first saw them free.
    deferred: Mutex<HashMap<String, tokio::time::Instant>>,
    pub(super) relay: Relay,
    /// The cluster subscriptions served here, whose journals one task checks every second.
    pub(super) heads: Arc<super::heads::HeadWatch>,
    /// Member tasks of other owners' teams running here (`team_distributed`).
    pub(super) member_jobs: super::team::MemberJobs,
    this: Weak<Node>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The rendezvous weight of `taker` for `key` (FNV-1a: the same on every instance).
fn rendezvous(key: &str, taker: &str) -> u64 {
    key.bytes()
        .chain([0])
        .chain(taker.bytes())
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// The Redis key of a session: tenants never share one.
pub fn session_key(tenant: &str, session_id: &str) -> String {
    format!("{tenant}/{session_id}")
}

impl Node {
    pub fn new(parts: NodeParts, relay: Relay) -> Arc<Node> {
        lumina_runtime::team::install_builtin_teams(&parts.app_root);
        Arc::new_cyclic(|this| Node {
            config: parts.config,
            app_root: parts.app_root,
            env: parts.env,
            project_root: parts.project_root,
            pg: parts.pg,
            store: parts.store,
            redis: parts.redis,
            leases: parts.leases,
            keeper: parts.keeper,
            registration: parts.registration,
            registry: parts.registry,
            ownerships: parts.ownerships,
            rpc: parts.rpc,
            auth: parts.auth,
            metrics: parts.metrics,
            limits: parts.limits,
            draining: AtomicBool::new(false),
            shutdown: parts.shutdown,
            runtimes: Mutex::new(HashMap::new()),
            acquire_lock: tokio::sync::Mutex::new(()),
            deferred: Mutex::new(HashMap::new()),
            relay,
            heads: super::heads::HeadWatch::new(),
            member_jobs: Default::default(),
            this: this.clone(),
        })
    }

    pub fn instance_id(&self) -> &str {
        &self.config.instance_id
    }

    pub fn relay_hints(&self) -> &lumina_cluster::Hints {
        &self.relay.hints
    }

    /// This instance's `state/tool-results/` (session artifacts stay on the disk of the
    /// instance whose tool wrote them).
    pub fn tool_results_dir(&self) -> std::path::PathBuf {
        self.app_root.tool_results_dir()
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// The runtime of a tenant (created on first use; all share the store and the leases).
    pub fn runtime(&self, tenant: &str) -> Runtime {
        let mut runtimes = self.runtimes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(runtime) = runtimes.get(tenant) {
            return runtime.clone();
        }
        let ownership = Arc::new(LeaseOwnership {
            node: self.this.clone(),
            tenant: tenant.to_string(),
        });
        // The tenant's Memory Fabric in the journal's PostgreSQL (pgvector; same pool). Its
        // writes need no lease fence of their own: evidence is appended only after the
        // fenced journal append succeeded, and ingestion is idempotent per source event, so
        // a fenced-out owner cannot add evidence the journal does not hold.
        let memory = PgMemory::from_pool(
            self.pg.pool().clone(),
            PgMemoryOptions {
                tenant: tenant.to_string(),
                ..PgMemoryOptions::default()
            },
            None,
        );
        // Project-document RAG (docs/rag.md): `rag_ingest` / `rag_search` over the tenant's
        // own rows (tenant, project) of the `rag_*` tables, apart from the memory tables, on
        // the same pool. Full text only, as the cluster's Memory Fabric (no embedder here).
        // Unfenced like memory: the index is derived from the project's files, and
        // ingestion is idempotent.
        let mut tools = lumina_tools::builtin_registry();
        let rag = lumina_rag::Rag::new(
            Arc::new(PgRag::from_pool(self.pg.pool().clone(), tenant)),
            None,
            lumina_rag::RagOptions::default(),
        );
        for tool in lumina_rag::tools::tools(Arc::new(rag)) {
            tools.register(tool);
        }
        let mut runtime = Runtime::new(
            RuntimeOptions {
                app_root: self.app_root.clone(),
                // Runs read their settings from this snapshot: whatever the files say,
                // this runtime is the cluster profile's (the shell refuses to run
                // unconfined there, docs/sandbox.md).
                env: self
                    .env
                    .clone()
                    .with("LUMINA_SESSION_RUNTIME_BACKEND", "cluster"),
                tenant: tenant.to_string(),
                default_project_root: self.project_root.clone(),
            },
            self.store.clone(),
            tools,
            ownership,
        )
        // Each tenant has its own MCP server processes. Nobody can finish a browser sign-in
        // on a pod: servers that need OAuth report it instead of waiting for one.
        .with_mcp(lumina_mcp::McpManager::new(lumina_mcp::ManagerOptions {
            interactive_auth: false,
            ..lumina_mcp::ManagerOptions::new(self.app_root.clone())
        }))
        .with_observer(Arc::new(self.relay.clone()))
        .with_memory(Arc::new(memory));
        if self.config.team_distributed {
            // Member tasks of this instance's teams run on other live instances
            // (docs/teams.md#distributed-members).
            runtime = runtime.with_member_placement(Arc::new(super::team::ClusterPlacement::new(
                self.this.clone(),
                self.instance_id(),
            )));
        }
        runtimes.insert(tenant.to_string(), runtime.clone());
        runtime
    }

    fn runtimes(&self) -> Vec<(String, Runtime)> {
        let runtimes = self.runtimes.lock().unwrap_or_else(|p| p.into_inner());
        runtimes
            .iter()
            .map(|(t, r)| (t.clone(), r.clone()))
            .collect()
    }

    /// Verifies the bearer JWT of an upgrade request (`Authorization`, else the configured
    /// proxy header).
    pub async fn authenticate(&self, headers: &HeaderMap) -> Option<(Identity, Option<i64>)> {
        let token = presented_jwt(headers, self.config.jwt_proxy_header.as_ref())?;
        match self.auth.verify(token).await {
            Ok(principal) => Some((
                Identity {
                    sub: principal.sub,
                    tenant: principal.tenant,
                    scopes: principal.scopes,
                },
                Some(principal.expires_at),
            )),
            Err(err) => {
                tracing::info!(reason = %err, "bearer token refused");
                None
            }
        }
    }

    /// Takes (or confirms) the lease of a session for this instance.
    async fn acquire(&self, tenant: &str, session_id: &str) -> lumina_runtime::Result<Fence> {
        let key = session_key(tenant, session_id);
        if let Some(lease) = self.keeper.lease(&key) {
            return Ok(lease.fence);
        }
        if self.is_draining() {
            return Err(lumina_runtime::Error::Draining);
        }
        let _guard = self.acquire_lock.lock().await;
        if let Some(lease) = self.keeper.lease(&key) {
            return Ok(lease.fence);
        }
        // The journal's recorded fence is the floor: a Redis that lost its counters must
        // not hand out a token PostgreSQL would refuse.
        let floor = self
            .store
            .fence(&SessionKey::new(tenant, session_id))
            .await
            .or_else(|err| match err {
                lumina_journal::Error::NotFound(_) => Ok(0),
                other => Err(other),
            })
            .map_err(|e| lumina_runtime::Error::Unavailable(format!("journal: {e}")))?;
        let acquired = match self
            .leases
            .acquire_with_floor(&key, &self.keeper.holder(), floor)
            .await
        {
            // Redis lost this instance's entry (a restart) before the heartbeat noticed:
            // register again now (a new incarnation) and try once more.
            Err(lumina_cluster::ClusterError::NotRegistered(_)) => {
                self.registration
                    .confirm()
                    .await
                    .map_err(|e| lumina_runtime::Error::Unavailable(format!("registry: {e}")))?;
                self.leases
                    .acquire_with_floor(&key, &self.keeper.holder(), floor)
                    .await
            }
            other => other,
        }
        .map_err(|e| lumina_runtime::Error::Unavailable(format!("leases: {e}")))?;
        match acquired {
            Some(lease) => {
                let fence = lease.fence;
                // Claimed in PostgreSQL before anything else: a former owner that still
                // believes it owns the session can commit nothing from here on. A session
                // being created has no row yet; its creation records the fence.
                let session = SessionKey::new(tenant, session_id);
                match self.store.claim(&session, fence).await {
                    Ok(()) | Err(lumina_journal::Error::NotFound(_)) => {}
                    Err(err) => {
                        let _ = self.leases.release(&lease).await;
                        return Err(err.into());
                    }
                }
                self.keeper.hold(lease);
                if let Err(err) = self.ownerships.record(self.instance_id(), &key).await {
                    tracing::debug!(error = %err, "ownership index not updated");
                }
                self.metrics.leases_acquired.inc();
                self.metrics
                    .sessions_owned
                    .set(self.keeper.held().len() as i64);
                tracing::info!(session = %key, fence, instance_id = %self.instance_id(), "lease acquired");
                Ok(fence)
            }
            None => {
                let owner = self
                    .leases
                    .owner(&key)
                    .await
                    .ok()
                    .flatten()
                    .map(|(owner, _)| owner)
                    .unwrap_or_default();
                Err(lumina_runtime::Error::OwnedElsewhere {
                    session: session_id.to_string(),
                    owner,
                })
            }
        }
    }

    /// A lease was lost: stop all work on the session at once (the Redis bookkeeping after,
    /// so an unreachable Redis cannot delay the eviction). The keeper already stopped
    /// holding it. A loss reported late — after the session was taken again with a newer
    /// fence (a Redis restart: the old lease is noticed lost while the next request already
    /// re-claimed the session) — stops nothing: only a session still open with the lost
    /// fence (or an older one) is evicted, and a newer lease stays held.
    pub async fn lease_lost(&self, lost: &Lease) {
        let key = lost.session_key.as_str();
        let newer = self
            .keeper
            .lease(key)
            .filter(|held| held.fence > lost.fence)
            .map(|held| held.fence);
        if let Some(held) = newer {
            tracing::info!(session = %key, lost = lost.fence, held, "a lost lease was superseded already; nothing to stop");
            self.metrics.leases_lost.inc();
            return;
        }
        if let Some((tenant, session_id)) = key.split_once('/') {
            let evicted = self
                .runtime(tenant)
                .evict_fenced_at(session_id, lost.fence)
                .await;
            tracing::warn!(session = %key, fence = lost.fence, evicted, "lease lost; stopped work on the session");
        }
        self.metrics.leases_lost.inc();
        self.metrics
            .sessions_owned
            .set(self.keeper.held().len() as i64);
        if self.keeper.lease(key).is_none() {
            let _ = self.ownerships.forget(self.instance_id(), key).await;
        }
    }

    /// Takes over the sessions of instances that died (left the registry without draining):
    /// each session whose holder is gone is opened here, which claims it and journals its
    /// interrupted work, so the session is ready when its client comes back.
    ///
    /// Survivors share the work: each session has one preferred taker among the live
    /// instances (rendezvous hashing), which takes it in its first round; the others take
    /// it only if it is still free a round later (the preferred one died too, or drains).
    pub async fn sweep_dead_instances(&self) {
        if self.is_draining() {
            return;
        }
        // Re-join every round: a restarted Redis forgot the membership set.
        if let Err(err) = self.ownerships.join(self.instance_id()).await {
            tracing::debug!(error = %err, "sweep: cannot join");
        }
        let (members, live) = match (
            self.ownerships.members().await,
            self.registry.live_instances().await,
        ) {
            (Ok(members), Ok(live)) => (members, live),
            (Err(err), _) | (_, Err(err)) => {
                tracing::debug!(error = %err, "sweep skipped");
                return;
            }
        };
        let takers: Vec<&str> = live
            .iter()
            .filter(|l| !l.draining)
            .map(|l| l.instance_id.as_str())
            .collect();
        tracing::trace!(?members, ?takers, "sweep round");
        for dead in members.iter().filter(|m| {
            m.as_str() != self.instance_id() && !live.iter().any(|l| &l.instance_id == *m)
        }) {
            let Ok(keys) = self.ownerships.owned_by(dead).await else {
                continue;
            };
            let mut pending = false;
            for key in &keys {
                let done = match self.leases.owner(key).await {
                    Ok(None) => self.take_over(key, dead, &takers).await,
                    // Held by a live instance (taken over already, or the dead one's id
                    // came back): not ours to sweep.
                    Ok(Some(_)) => true,
                    Err(_) => false,
                };
                if done {
                    let _ = self.ownerships.forget(dead, key).await;
                    lock(&self.deferred).remove(key);
                } else {
                    pending = true;
                }
            }
            if !pending {
                let _ = self.ownerships.leave(dead).await;
            }
        }
    }

    /// Opens a free session of a dead instance if this instance is its preferred taker, or
    /// if it stayed free for a sweep round. Returns whether the session is handled.
    async fn take_over(&self, key: &str, dead: &str, takers: &[&str]) -> bool {
        let preferred = takers
            .iter()
            .max_by_key(|taker| rendezvous(key, taker))
            .is_none_or(|taker| *taker == self.instance_id());
        if !preferred {
            let now = tokio::time::Instant::now();
            let first_seen = *lock(&self.deferred).entry(key.to_string()).or_insert(now);
            if now.duration_since(first_seen) < self.sweep_interval() * 2 {
                return false;
            }
        }
        let Some((tenant, session_id)) = key.split_once('/') else {
            return true;
        };
        match self.runtime(tenant).session(session_id).await {
            Ok(_) => {
                tracing::info!(session = %key, dead = %dead, preferred, "took over a session of a dead instance");
                true
            }
            Err(err) => {
                tracing::debug!(session = %key, error = %err, "takeover deferred");
                false
            }
        }
    }

    /// How often survivors look for sessions of dead instances.
    pub fn sweep_interval(&self) -> Duration {
        (self.config.lease_ttl / 8).max(Duration::from_millis(100))
    }

    /// Brings counters kept elsewhere (the lease keeper's renewals) into the registry.
    pub fn sync_metrics(&self) {
        let renewals = self.keeper.renewals();
        let counted = self.metrics.leases_renewed.get();
        if renewals > counted {
            self.metrics.leases_renewed.inc_by(renewals - counted);
        }
    }

    /// Readiness: Redis, PostgreSQL, schema version, registration, not draining.
    pub async fn readiness(&self) -> (bool, Value) {
        let timeout = Duration::from_secs(2);
        let redis = matches!(
            tokio::time::timeout(timeout, self.redis.ping()).await,
            Ok(Ok(()))
        );
        let postgres = matches!(
            tokio::time::timeout(timeout, self.pg.health()).await,
            Ok(Ok(()))
        );
        let schema = match tokio::time::timeout(timeout, self.pg.schema_version()).await {
            // Additive migrations: old pods stay ready while an upgrade's hook runs.
            Ok(Ok(Some(v))) => v >= lumina_journal::postgres::SCHEMA_VERSION,
            _ => false,
        };
        let registered = self.registration.is_registered();
        let draining = self.is_draining() || self.shutdown.is_cancelled();
        let ready = redis && postgres && schema && registered && !draining;
        (
            ready,
            json!({
                "redis": redis, "postgres": postgres, "schema": schema,
                "registered": registered, "draining": draining,
            }),
        )
    }

    /// Drain: take no new leases, let running turns finish (or interrupt them after the
    /// drain timeout so they are journaled as interrupted), then release every lease so
    /// other instances take the sessions over.
    pub async fn drain(&self) -> Result<DrainResult, lumina_protocol::ErrorObject> {
        self.draining.store(true, Ordering::SeqCst);
        self.metrics.draining.set(1);
        if let Err(err) = self.registration.set_draining(true).await {
            tracing::warn!(error = %err, "could not publish the draining flag");
        }
        let mut released = 0;
        let runtimes = self.runtimes();
        for (_, runtime) in &runtimes {
            if !runtime.wait_idle(self.config.drain_timeout).await {
                runtime.cancel_all().await;
                runtime.wait_idle(Duration::from_secs(5)).await;
            }
            if let Some(mcp) = runtime.mcp() {
                mcp.shutdown().await;
            }
        }
        for (tenant, runtime) in &runtimes {
            for session_id in runtime.open_session_ids().await {
                runtime.evict(&session_id).await;
                let key = session_key(tenant, &session_id);
                let _ = self.ownerships.forget(self.instance_id(), &key).await;
                if self.keeper.release(&key).await.unwrap_or(false) {
                    released += 1;
                }
            }
        }
        // Leases held for sessions never opened by a runtime.
        if let Ok(n) = self.keeper.release_all().await {
            released += n;
        }
        self.metrics.sessions_owned.set(0);
        tracing::info!(released, "drained");
        Ok(DrainResult { ok: true, released })
    }

    /// Shutdown: drain, then stop serving (the process exits 0).
    pub fn begin_shutdown(&self) {
        let Some(node) = self.this.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            let _ = node.drain().await;
            node.shutdown.cancel();
        });
    }
}

/// The cluster's [`Ownership`]: a Redis lease per session, fenced by its token.
struct LeaseOwnership {
    node: Weak<Node>,
    tenant: String,
}

#[async_trait]
impl Ownership for LeaseOwnership {
    async fn acquire(&self, session_id: &str) -> lumina_runtime::Result<Fence> {
        let node = self
            .node
            .upgrade()
            .ok_or_else(|| lumina_runtime::Error::Unavailable("instance stopping".into()))?;
        node.acquire(&self.tenant, session_id).await
    }

    fn holds(&self, session_id: &str, fence: Fence) -> bool {
        self.node.upgrade().is_some_and(|node| {
            node.keeper
                .lease(&session_key(&self.tenant, session_id))
                .is_some_and(|lease| lease.fence == fence)
        })
    }

    async fn release(&self, session_id: &str) {
        if let Some(node) = self.node.upgrade() {
            let key = session_key(&self.tenant, session_id);
            let _ = node.ownerships.forget(node.instance_id(), &key).await;
            let _ = node.keeper.release(&key).await;
        }
    }
}
