//! Lumina as an A2A agent (docs/a2a.md): the `lumina-a2a` service with the agent runtime as
//! its executor ([`executor::RuntimeExecutor`]) and a durable task store
//! ([`store::SqliteTaskStore`]), mounted at `/a2a` (card at `/.well-known/agent-card.json`)
//! on the backend's HTTP listener; JSON-RPC calls take the WebSocket's bearer rules
//! ([`ProfileAuth`]), or a peer deployment's signature (`lumina-peer`, [`PeerAuth`]). Also the `lumina-backend a2a …` commands: `tck-fixture` serves the same
//! router and service with the TCK fixture executor; `card` prints the Agent Card.

pub mod executor;
pub mod pg_store;
mod sign_in;
pub mod store;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use axum::http::HeaderMap;
use lumina_a2a::http::{Authenticator, Principal, Unauthenticated};
use lumina_protocol::Scope;

use crate::profile::{A2aMount, PeerTenants, Profile};

/// Where the JSON-RPC endpoint is mounted.
pub const A2A_PATH: &str = "/a2a";

/// Signed calls of peer deployments (docs/a2a.md#the-signed-peer-channel): the verified
/// node becomes the subject `peer:<node>` of its tenant, with the Lumina scopes its signed
/// scope maps to (`a2a:read` → read; `a2a:write` → read and write).
pub struct PeerAuth {
    verifier: Arc<lumina_peer::Verifier>,
    tenants: PeerTenants,
    nonces: Option<lumina_cluster::Nonces>,
}

/// The verifier of the `peer` settings, or `None` when no node may call.
pub fn peer_verifier(
    settings: &lumina_config::PeerSettings,
) -> Result<Option<Arc<lumina_peer::Verifier>>, lumina_peer::Error> {
    let verifier = lumina_peer::Verifier::from_settings(settings)?;
    Ok(verifier.accepts_any().then(|| Arc::new(verifier)))
}

impl PeerAuth {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Unauthenticated> {
        // A header sent twice is malformed, not "the first one".
        let single = |name: &str| {
            let mut values = headers.get_all(name).iter();
            match (values.next(), values.next()) {
                (Some(v), None) => v.to_str().ok(),
                _ => None,
            }
        };
        let verified = match &self.nonces {
            None => self.verifier.verify(single).map_err(|_| Unauthenticated)?,
            Some(nonces) => {
                let unspent = self
                    .verifier
                    .verify_unspent(single)
                    .map_err(|_| Unauthenticated)?;
                let keep =
                    std::time::Duration::from_secs(u64::try_from(unspent.ttl_secs()).unwrap_or(1));
                // Fail closed: a memory that cannot answer cannot tell a replay.
                let fresh = match nonces.remember(&unspent.nonce_key(), keep).await {
                    Ok(fresh) => fresh,
                    Err(err) => {
                        tracing::warn!(error = %err, "peer nonce memory unavailable; refusing");
                        false
                    }
                };
                unspent.spend(fresh).map_err(|_| Unauthenticated)?
            }
        };
        let Some(tenant) = self.tenants.of(&verified.node) else {
            tracing::warn!(node = %verified.node, "peer node has no tenant (peer.nodes.<node>.tenant); refusing");
            return Err(Unauthenticated);
        };
        let write = verified.scope == lumina_peer::SCOPE_WRITE;
        let mut scopes = vec![Scope::Read.as_str().to_owned()];
        if write {
            scopes.push(Scope::Write.as_str().to_owned());
        }
        let identity = lumina_protocol::methods::Identity {
            sub: format!("peer:{}", verified.node),
            tenant: tenant.to_owned(),
            scopes,
        };
        Ok(Principal {
            owner: format!("{}/{}", identity.tenant, identity.sub),
            can_read: true,
            can_write: write,
            identity: serde_json::to_value(&identity).unwrap_or_default(),
        })
    }
}

/// Whether a request carries a peer signature (any of its headers).
fn signed(headers: &HeaderMap) -> bool {
    [
        lumina_peer::HEADER_SIGNATURE,
        lumina_peer::HEADER_NODE,
        lumina_peer::HEADER_ALG,
    ]
    .iter()
    .any(|h| headers.contains_key(*h))
}

/// JSON-RPC credentials: exactly what the WebSocket upgrade accepts (the local token; in the
/// cluster a JWT, read scope for get/list/subscribe, write for send/cancel), or a peer
/// deployment's signature. Tasks are scoped to tenant and subject.
pub struct ProfileAuth {
    pub profile: Arc<dyn Profile>,
    pub peers: Option<PeerAuth>,
}

#[async_trait]
impl Authenticator for ProfileAuth {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Unauthenticated> {
        // A signed call is judged by its signature alone: a refused one does not fall
        // back to other credentials.
        if signed(headers) {
            return match &self.peers {
                Some(peers) => peers.authenticate(headers).await,
                None => Err(Unauthenticated),
            };
        }
        let (identity, _) = self
            .profile
            .authenticate(headers)
            .await
            .ok_or(Unauthenticated)?;
        let has = |scope: Scope| identity.scopes.iter().any(|s| s == scope.as_str());
        Ok(Principal {
            owner: format!("{}/{}", identity.tenant, identity.sub),
            can_read: has(Scope::Read),
            can_write: has(Scope::Write),
            identity: serde_json::to_value(&identity).unwrap_or_default(),
        })
    }
}

/// The backend's A2A service over `profile`, with tasks in `store_path` (SQLite).
pub fn service(
    profile: Arc<dyn Profile>,
    store_path: &Path,
    url: &str,
    listen: SocketAddr,
) -> anyhow::Result<lumina_a2a::A2aService> {
    let store: Arc<dyn lumina_a2a::TaskStore> = Arc::new(store::SqliteTaskStore::open(store_path)?);
    Ok(service_with(profile, store, url, Some(listen)))
}

/// The backend's A2A service over `profile` with tasks in `store` (the cluster's
/// PostgreSQL).
pub fn service_with(
    profile: Arc<dyn Profile>,
    store: Arc<dyn lumina_a2a::TaskStore>,
    url: &str,
    listen: Option<SocketAddr>,
) -> lumina_a2a::A2aService {
    let card = card_document(url, listen);
    lumina_a2a::A2aService::new(
        store.clone(),
        Arc::new(executor::RuntimeExecutor::new(profile, store)),
        card,
        Some(lumina_a2a::PushSender::new(
            lumina_a2a::PushOptions::default(),
        )),
    )
}

/// The routes to merge into the server's router.
pub fn router(mount: A2aMount, profile: Arc<dyn Profile>) -> axum::Router {
    let auth = ProfileAuth {
        profile,
        peers: mount.peers.map(|peers| PeerAuth {
            verifier: peers.verifier,
            tenants: peers.tenants,
            nonces: peers.nonces,
        }),
    };
    lumina_a2a::router(mount.service, Arc::new(auth), A2A_PATH)
}

use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Subcommand)]
pub enum A2aCommand {
    /// Serve the A2A server with the TCK fixture executor (JSON-RPC at /, the card at
    /// /.well-known/agent-card.json) until Ctrl-C. In-memory tasks; loopback webhooks allowed.
    TckFixture {
        /// Address to listen on; the bound address is printed first.
        #[arg(long, default_value = "127.0.0.1:9999")]
        listen: SocketAddr,
        /// The URL the card advertises (default: http://<bound address>).
        #[arg(long)]
        public_url: Option<String>,
    },
    /// Make an Ed25519 key for the signed peer channel: prints the private seed (for this
    /// node's `peer.ed25519_private_key`) and the public key (for the other nodes'
    /// `peer.nodes.<node>.ed25519_public_key`).
    PeerKeygen,
    /// Print the HKDF-derived key of `node` from the `peer.derive_master` setting (for that
    /// node's `peer.derived_key`).
    PeerDerive {
        #[arg(long)]
        node: String,
        #[arg(long, env = "LUMINA_HOME")]
        app_root: Option<std::path::PathBuf>,
    },
    /// Print the Agent Card this backend serves (as JSON).
    Card {
        /// The URL the card advertises (default: $LUMINA_A2A_PUBLIC_URL, else the local
        /// listener's http://127.0.0.1:<port>/a2a).
        #[arg(long, env = "LUMINA_A2A_PUBLIC_URL")]
        public_url: Option<String>,
    },
}

pub async fn run(command: A2aCommand) -> anyhow::Result<()> {
    match command {
        A2aCommand::TckFixture { listen, public_url } => {
            let listener = tokio::net::TcpListener::bind(listen).await?;
            println!("{}", listener.local_addr()?);
            let shutdown = CancellationToken::new();
            let stop = shutdown.clone();
            tokio::spawn(async move {
                let _ = tokio::signal::ctrl_c().await;
                stop.cancel();
            });
            lumina_a2a::fixture::serve(listener, public_url, shutdown).await?;
            Ok(())
        }
        A2aCommand::PeerKeygen => {
            let pair = lumina_peer::generate_ed25519()?;
            println!("ed25519_private_key: {}", pair.private_seed.expose());
            println!("ed25519_public_key:  {}", pair.public_key);
            Ok(())
        }
        A2aCommand::PeerDerive { node, app_root } => {
            let env = lumina_config::Env::from_process();
            let app_root = lumina_config::AppRoot::resolve(app_root.as_deref(), &env)?;
            let settings = lumina_config::load(&app_root, None, &env, &Default::default())?;
            let Some(master) = settings.peer.derive_master.as_ref() else {
                anyhow::bail!("the setting peer.derive_master is not set");
            };
            if !lumina_config::is_token(&node) {
                anyhow::bail!("a node name is 1-128 characters of A-Z a-z 0-9 . _ -");
            }
            if master.expose().len() < 32 {
                anyhow::bail!("peer.derive_master must be at least 32 bytes");
            }
            println!(
                "{}",
                lumina_peer::derive_key_base64(master.expose().as_bytes(), &node)
            );
            Ok(())
        }
        A2aCommand::Card { public_url } => {
            let url = public_url.unwrap_or_else(|| "http://127.0.0.1:0/a2a".to_owned());
            let card = card_document(&url, None);
            println!("{}", String::from_utf8_lossy(&card.body));
            Ok(())
        }
    }
}

/// The backend's card: the agent runtime's catalog at `url`.
pub fn card_document(url: &str, listen: Option<SocketAddr>) -> lumina_a2a::CardDocument {
    let options = lumina_a2a::CardOptions {
        name: "Lumina".into(),
        description: "Lumina agent runtime: coding and research agent sessions with tools, skills, memory and approvals".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        url: url.to_owned(),
        listen,
        url_setting: "LUMINA_A2A_PUBLIC_URL".into(),
        input_modes: vec!["text/plain".into(), "application/json".into()],
        output_modes: vec!["text/plain".into()],
        push_notifications: true,
        bearer_auth: true,
        streaming: true,
    };
    lumina_a2a::CardDocument::build(&options, catalog())
}

/// The capability catalog of the agent runtime as A2A skills.
pub fn catalog() -> Vec<lumina_a2a::AgentSkill> {
    vec![lumina_a2a::AgentSkill {
        id: "agent-run".into(),
        name: "Agent run".into(),
        description: "Runs one Lumina agent turn on the message in the context's session (a context is a session, a task is a run)".into(),
        tags: vec!["agent".into(), "coding".into(), "research".into()],
        examples: vec!["Summarise the README of this project".into()],
    }]
}
