//! What a server needs from the profile it runs (local: one process and SQLite; cluster: N
//! instances over PostgreSQL and Redis), as one trait, so the server, the connection and
//! the dispatcher never ask which profile they serve.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use axum::http::HeaderMap;
use lumina_protocol::methods::{
    ConsoleTicketResult, DrainResult, Identity, ServerInfo, SessionResumeParams,
    SessionResumeResult,
};
use lumina_protocol::{ErrorObject, Method};
use lumina_runtime::{Outbound, Runtime};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::execute::Reply;
use crate::hot_window::ConversationConfig;
use crate::limits::TenantLimits;
use crate::metrics::Metrics;

/// A subscription: the `session.resume` answer and the session's events from then on.
pub type Subscription = (SessionResumeResult, mpsc::Receiver<Outbound>);

/// A server profile.
#[async_trait]
pub trait Profile: Send + Sync + 'static {
    /// The identity of an upgrade request's bearer token and the token's expiry (unix
    /// seconds), or `None` when it is refused.
    async fn authenticate(&self, headers: &HeaderMap) -> Option<(Identity, Option<i64>)>;

    /// Runs a session method (route `any`, `store` or `owner` in the method table) for
    /// `identity`.
    async fn call(&self, identity: &Identity, method: Method, params: Value) -> Reply;

    /// `session.resume`.
    async fn subscribe(
        &self,
        identity: &Identity,
        params: &SessionResumeParams,
    ) -> Result<Subscription, ErrorObject>;

    /// `admin.drain`: hand every session to the other instances.
    async fn drain(&self) -> Result<DrainResult, ErrorObject>;

    /// `admin.shutdown`: stop serving (the cluster drains first).
    fn shutdown(&self);

    /// `/readyz`: whether to send traffic here, and the checks behind it.
    async fn readiness(&self) -> (bool, Value);

    /// Called before `/metrics` is rendered, to bring counters kept elsewhere in.
    fn sync_metrics(&self) {}

    /// The local profile's runtime (`None` in the cluster, where runtimes are per tenant).
    fn runtime(&self) -> Option<&Runtime> {
        None
    }

    /// The web console's one-time tickets and cookie sessions (local profile only; the
    /// cluster console signs in with a JWT).
    fn console(&self) -> Option<&dyn ConsoleSignIn> {
        None
    }

    /// Where this instance keeps the tools' per-session results (`state/tool-results/`,
    /// with each session's `artifacts/`): its own disk, so in the cluster a session's
    /// artifacts are on the instance that ran the tool.
    fn tool_results_dir(&self) -> Option<PathBuf> {
        None
    }
}

/// The web console's sign-in as the server uses it (docs/console.md#sign-in); the console
/// module implements it.
pub trait ConsoleSignIn: Send + Sync {
    /// A fresh single-use ticket.
    fn mint_ticket(&self) -> ConsoleTicketResult;
    /// Uses up a ticket: the new session's cookie value, or `None`.
    fn redeem(&self, ticket: &str) -> Option<String>;
    /// Ends a cookie's session.
    fn revoke(&self, session: &str);
    /// The identity of a GET the console page makes itself (an artifact's image) with a live
    /// session cookie, or `None`.
    fn authenticate_get(&self, headers: &HeaderMap) -> Option<Identity>;
}

/// Everything a connection needs.
pub struct AppState {
    pub profile: Arc<dyn Profile>,
    pub metrics: Metrics,
    /// Per-tenant limits on connections and submits (the profile applies the run limit).
    pub limits: Arc<TenantLimits>,
    pub info: ServerInfo,
    /// Frames above this get a `frame_too_large` error frame.
    pub max_frame_bytes: usize,
    /// Cancelled to stop the server (signal or `admin.shutdown`).
    pub shutdown: CancellationToken,
    /// The Conversation API's hot windows and settings.
    pub conversations: ConversationConfig,
    /// The A2A service mounted at `/a2a` (docs/a2a.md) and the peer deployments whose
    /// signed calls it accepts, if this profile serves it.
    pub a2a: Option<A2aMount>,
}

/// The A2A service and who besides the profile's users may call it.
#[derive(Clone)]
pub struct A2aMount {
    pub service: lumina_a2a::A2aService,
    /// Verifies the signed calls of peer deployments (`peer.nodes`); `None` when none
    /// are configured.
    pub peers: Option<PeerMount>,
}

/// Which tenant a verified node's calls run in.
#[derive(Clone, Debug)]
pub enum PeerTenants {
    /// The profile's one tenant (local).
    One(String),
    /// Each node's `peer.nodes.<node>.tenant` (cluster); a node without one is refused.
    PerNode(BTreeMap<String, String>),
}

impl PeerTenants {
    /// The cluster's: every node's configured tenant.
    pub fn per_node(settings: &lumina_config::PeerSettings) -> Self {
        Self::PerNode(
            settings
                .nodes
                .iter()
                .filter_map(|(node, n)| Some((node.clone(), n.tenant.clone()?)))
                .filter(|(_, tenant)| !tenant.is_empty())
                .collect(),
        )
    }

    pub(crate) fn of(&self, node: &str) -> Option<&str> {
        match self {
            Self::One(tenant) => Some(tenant),
            Self::PerNode(map) => map.get(node).map(String::as_str),
        }
    }
}

/// What a profile needs to accept signed calls.
#[derive(Clone)]
pub struct PeerMount {
    pub verifier: Arc<lumina_peer::Verifier>,
    pub tenants: PeerTenants,
    /// The replay memory every instance shares (cluster: Redis); `None`: the verifier's
    /// own, per process (local).
    pub nonces: Option<lumina_cluster::Nonces>,
}

impl AppState {
    /// The local profile's runtime (`None` in the cluster profile).
    pub fn runtime(&self) -> Option<&Runtime> {
        self.profile.runtime()
    }
}
