//! The cluster profile (SYSTEM §2, §6): N interchangeable instances in front of PostgreSQL and
//! Redis. Any instance accepts a WebSocket authenticated by a JWT; session mutations run on
//! the lease-holding owner (forwarded over Redis Streams RPC); the owner's fenced PostgreSQL
//! writes are the only source of truth.
//!
//! - `config.rs`: fail-closed settings.
//! - `node.rs`: the instance — per-tenant runtimes, leases, readiness, drain.
//! - `gateway.rs`: routing of requests to owners; reads from PostgreSQL.
//! - `subscribe.rs` / `relay.rs`: events to subscribers on any instance.
//! - `profile.rs`: the instance as the server's `Profile`.
//! - `team.rs`: distributed team members (`team_distributed`): placement and the worker's
//!   RPC methods.
//!
//! A2A (`/a2a`, the Agent Card) is served by every instance over the shared PostgreSQL task
//! store (`crate::a2a::pg_store`); its executor goes through the same `Profile`, so a
//! message reaches the session's owner like a WebSocket call.

pub mod config;
pub mod gateway;
pub mod heads;
pub mod hot;
pub mod node;
pub mod profile;
pub mod relay;
pub mod subscribe;
pub mod team;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use lumina_auth::{AuthConfig, Authenticator, JwksSource};
use lumina_cluster::{
    ConnOptions, HandlerError, Hints, LeaseKeeper, Leases, Ownerships, Redis, Registry, RpcClient,
    RpcOptions, RpcServer, Windows,
};
use lumina_config::{AppRoot, Env};
use lumina_journal::postgres::PgJournal;
use lumina_protocol::methods::ServerInfo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::ClusterConfig;
pub use node::Node;

use crate::hot_window::ConversationConfig;
use crate::limits::{LimitOptions, SubmitWindow, TenantLimits};
use crate::metered::MeteredStore;
use crate::metrics::Metrics;
use crate::profile::AppState;
use crate::server;
use config::JwksLocation;
use gateway::{ForwardReply, Forwarded};
use node::NodeParts;
use relay::Relay;

/// The per-tenant submit window in Redis, shared by every instance.
struct RedisWindow(Windows);

#[async_trait::async_trait]
impl SubmitWindow for RedisWindow {
    async fn count(&self, tenant: &str, minute: u64) -> Option<u64> {
        match self
            .0
            .incr(tenant, minute, std::time::Duration::from_secs(120))
            .await
        {
            Ok(count) => Some(count),
            Err(err) => {
                tracing::debug!(error = %err, "submit window not counted; letting it through");
                None
            }
        }
    }
}

/// What `cluster serve` needs besides settings.
pub struct ClusterOptions {
    pub app_root: AppRoot,
    pub env: Env,
    pub project_root: PathBuf,
}

/// A node ready to serve.
pub struct Started {
    pub state: Arc<AppState>,
    pub listener: TcpListener,
    pub node: Arc<Node>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Connects to every dependency, fail-closed: any missing setting or unreachable service is
/// an error naming it (never a secret).
pub async fn start(options: ClusterOptions) -> anyhow::Result<Started> {
    let settings = lumina_config::load(&options.app_root, None, &options.env, &Default::default())
        .context("cannot load settings")?;
    let config = ClusterConfig::from_settings(&settings)?;
    let metrics = Metrics::new().context("metrics")?;

    let pg = PgJournal::connect(config.postgres_url.expose(), 16)
        .context("postgres_url: cannot connect to PostgreSQL")?;
    pg.health()
        .await
        .context("postgres_url: PostgreSQL is not answering")?;
    match pg.schema_version().await.context("postgres_url: cannot read the schema version")? {
        // Migrations are additive: a newer schema (applied by an upgrade's migration hook
        // while this version still runs) is fine; an older one is not.
        Some(v) if v >= lumina_journal::postgres::SCHEMA_VERSION => {}
        found => anyhow::bail!(
            "the database schema is at version {found:?}, this build needs {}: run `lumina-backend migrate`",
            lumina_journal::postgres::SCHEMA_VERSION
        ),
    }
    let store: Arc<dyn lumina_journal::JournalStore> =
        Arc::new(MeteredStore::new(Arc::new(pg.clone()), metrics.clone()));

    let redis = Redis::connect(
        config.redis_url.expose(),
        ConnOptions::for_cluster(&config.cluster_id),
    )
    .await
    .context("redis_url: cannot connect to Redis")?;
    redis
        .ping()
        .await
        .context("redis_url: Redis is not answering")?;

    let jwks = match &config.jwks {
        JwksLocation::Url(url) => JwksSource::Url(url.clone()),
        JwksLocation::File(file) => JwksSource::File(PathBuf::from(file)),
    };
    let auth = Authenticator::new(AuthConfig::new(
        &config.jwt_issuer,
        &config.jwt_audience,
        jwks,
    ))
    .await
    .context("jwt_jwks_url / jwt_jwks_file: cannot load the JWKS")?;

    let leases = Leases::new(redis.clone());
    let registry = Registry::new(redis.clone());
    // The registry entry is this instance's liveness, and so every lease's: its TTL is the
    // lease TTL.
    let registration = registry
        .register(
            &config.instance_id,
            &config.advertise_addr,
            config.lease_ttl,
        )
        .await
        .context("redis_url: cannot register this instance")?;
    let (keeper, mut lost) = LeaseKeeper::start(leases.clone(), &registration);
    let ownerships = Ownerships::new(redis.clone());
    ownerships
        .join(&config.instance_id)
        .await
        .context("redis_url: cannot join the cluster")?;
    let rpc = RpcClient::start(redis.clone(), &config.instance_id, RpcOptions::default())
        .context("redis_url: cannot start the RPC client")?;
    let hints = Hints::start(redis.clone());
    let listener = TcpListener::bind(config.listen_addr)
        .await
        .with_context(|| format!("cluster_listen_addr: cannot bind {}", config.listen_addr))?;
    let shutdown = CancellationToken::new();
    // Submits per minute count across the cluster, in Redis.
    let limits = TenantLimits::new(
        LimitOptions::from_settings(&settings),
        Box::new(RedisWindow(Windows::new(redis.clone()))),
        metrics.clone(),
    );
    crate::doctor::log_confinement(true);
    let info = ServerInfo {
        name: "lumina-backend".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        profile: "cluster".into(),
        instance_id: config.instance_id.clone(),
        max_frame_bytes: settings.max_frame_bytes,
    };
    // Hot windows of idle conversations leave Redis after a day; a miss is rebuilt.
    let conversations = ConversationConfig::new(
        Arc::new(hot::RedisWindows(lumina_cluster::HotWindows::new(
            redis.clone(),
            std::time::Duration::from_secs(24 * 3600),
        ))),
        &settings,
        &options.app_root,
    );
    // A2A (docs/a2a.md#the-cluster): tasks in the shared PostgreSQL, signed peer calls'
    // nonces in Redis, so any instance answers for any task and a replay to another
    // instance is refused.
    let a2a_url = options
        .env
        .get_nonempty("LUMINA_A2A_PUBLIC_URL")
        .map(str::to_owned)
        .unwrap_or_else(|| format!("http://{}{}", config.advertise_addr, crate::a2a::A2A_PATH));
    let a2a_store: Arc<dyn lumina_a2a::TaskStore> =
        Arc::new(crate::a2a::pg_store::PgTaskStore::new(pg.pool().clone()));
    let peers = crate::a2a::peer_verifier(&settings.peer)
        .context("the `peer` settings")?
        .map(|verifier| crate::profile::PeerMount {
            verifier,
            tenants: crate::profile::PeerTenants::per_node(&settings.peer),
            nonces: Some(lumina_cluster::Nonces::new(redis.clone())),
        });
    let node = Node::new(
        NodeParts {
            config: config.clone(),
            app_root: options.app_root,
            env: options.env,
            project_root: options.project_root,
            pg,
            store,
            redis: redis.clone(),
            leases,
            keeper,
            registration,
            registry,
            ownerships,
            rpc,
            auth,
            metrics: metrics.clone(),
            limits: limits.clone(),
            shutdown: shutdown.clone(),
        },
        Relay::new(hints),
    );

    let mut tasks = Vec::new();
    // Lost leases stop work at once.
    let lost_node = node.clone();
    tasks.push(tokio::spawn(async move {
        while let Some(lease) = lost.recv().await {
            lost_node.lease_lost(&lease).await;
        }
    }));
    // Sessions of dead instances are taken over promptly.
    let sweep_node = node.clone();
    let sweep_every = node.sweep_interval();
    tasks.push(tokio::spawn(async move {
        loop {
            tokio::time::sleep(sweep_every).await;
            tracing::trace!("sweep");
            sweep_node.sweep_dead_instances().await;
        }
    }));
    // Subscriptions whose journal moved without a hint catch up.
    tasks.push(tokio::spawn(node.heads.clone().run(
        node.store.clone(),
        heads::PERIOD,
        shutdown.clone(),
    )));
    // Requests forwarded by other instances.
    let rpc_node = node.clone();
    let handler = move |request: lumina_cluster::RpcRequest| {
        let node = rpc_node.clone();
        async move {
            if request.method.starts_with("team.member_") {
                return node
                    .handle_member_rpc(&request.method, request.payload)
                    .await;
            }
            let forwarded: Forwarded = serde_json::from_value(request.payload)
                .map_err(|e| HandlerError(format!("malformed forwarded request: {e}")))?;
            let reply: ForwardReply = node
                .handle_forwarded(forwarded, request.trace.as_deref())
                .await;
            serde_json::to_value(reply).map_err(|e| HandlerError(e.to_string()))
        }
    };
    let server = RpcServer::bind(redis, &config.instance_id, handler, RpcOptions::default())
        .await
        .context("redis_url: cannot start the RPC server")?;
    let rpc_shutdown = shutdown.clone();
    tasks.push(tokio::spawn(server.run(rpc_shutdown)));

    let cluster_profile: Arc<dyn crate::profile::Profile> =
        Arc::new(profile::ClusterProfile(node.clone()));
    let a2a = crate::a2a::service_with(
        cluster_profile.clone(),
        a2a_store,
        &a2a_url,
        Some(config.listen_addr),
    );
    let state = Arc::new(AppState {
        profile: cluster_profile,
        limits,
        metrics,
        info,
        max_frame_bytes: settings.max_frame_bytes,
        shutdown,
        conversations,
        a2a: Some(crate::profile::A2aMount {
            service: a2a,
            peers,
        }),
    });
    Ok(Started {
        state,
        listener,
        node,
        tasks,
    })
}

/// `lumina-backend cluster serve`: serves until SIGTERM (which drains first) or
/// `admin.shutdown`, then exits 0.
pub async fn serve(options: ClusterOptions) -> anyhow::Result<()> {
    let started = start(options).await?;
    let node = started.node.clone();
    tracing::info!(
        instance_id = %node.instance_id(),
        addr = %started.listener.local_addr()?,
        "cluster instance listening"
    );
    let signal_node = node.clone();
    let signals = tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("sigterm: draining"),
            _ = int.recv() => tracing::info!("sigint: draining"),
        }
        signal_node.begin_shutdown();
    });
    let served = server::serve(started.listener, started.state.clone()).await;
    signals.abort();
    for task in started.tasks {
        task.abort();
    }
    served.context("server error")?;
    tracing::info!("cluster instance stopped");
    Ok(())
}

/// `lumina-backend migrate`: applies the SQL migrations (safe to run concurrently).
pub async fn migrate(app_root: &AppRoot, env: &Env) -> anyhow::Result<()> {
    let settings = lumina_config::load(app_root, None, env, &Default::default())
        .context("cannot load settings")?;
    let Some(url) = settings.postgres_url.as_ref().filter(|u| !u.is_empty()) else {
        anyhow::bail!("migrate needs postgres_url (LUMINA_POSTGRES_URL)");
    };
    let pg = PgJournal::connect(url.expose(), 2)
        .context("postgres_url: cannot connect to PostgreSQL")?;
    let report = pg.migrate().await.context("migration failed")?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// `lumina-backend cluster drain`: `admin.drain` on one instance, waiting for its answer
/// (which comes once every lease is released).
pub async fn drain_instance(url: &str, env: &Env) -> anyhow::Result<()> {
    let token = env
        .get_nonempty("LUMINA_ADMIN_JWT")
        .or_else(|| env.get_nonempty("LUMINA_JWT"))
        .context("drain needs an admin JWT in LUMINA_ADMIN_JWT (or LUMINA_JWT)")?;
    let options = lumina_client::ConnectOptions {
        call_timeout: std::time::Duration::from_secs(600),
        ..Default::default()
    };
    let (client, _notifications) = lumina_client::Client::connect_with(url, Some(token), options)
        .await
        .with_context(|| format!("cannot connect to {url}"))?;
    let result = client
        .calls()
        .admin_drain(&lumina_protocol::methods::Empty {})
        .await
        .context("admin.drain failed")?;
    println!("{}", serde_json::to_string(&result)?);
    Ok(())
}
