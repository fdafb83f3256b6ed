//! The local profile (docs/design.md#local-profile): one process, SQLite, 127.0.0.1 on a
//! free port (or `--port`, or the port of the crashed backend it replaces), a random bearer
//! token, and `<AppRoot>/state/run/backend.json` so clients can find it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::http::HeaderMap;
use lumina_config::{AppRoot, Env};
use lumina_journal::sqlite::SqliteJournal;
use lumina_journal::LOCAL_FENCE;
use lumina_mcp::{ManagerOptions, McpManager};
use lumina_protocol::methods::{
    DrainResult, Identity, ServerInfo, SessionResumeParams, SessionResumeResult,
};
use lumina_protocol::{ErrorCode, ErrorObject, Method, PROTOCOL_VERSION, WS_PATH};
use lumina_runtime::{AlwaysOwned, Runtime, RuntimeOptions};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::auth::LocalAuth;
use crate::console::ConsoleAuth;
use crate::endpoint::{self, Endpoint};
use crate::execute::{self, Owner, Reply};
use crate::hot_window::{ConversationConfig, LocalWindows};
use crate::limits::{LimitOptions, LocalWindow, TenantLimits};
use crate::memory_setup;
use crate::metered::MeteredStore;
use crate::metrics::Metrics;
use crate::profile::{AppState, ConsoleSignIn, Profile, Subscription};
use crate::server;

pub use crate::auth::LOCAL_TENANT;

/// The local profile: one runtime, the one user's token, no other instance.
struct LocalProfile {
    runtime: Runtime,
    limits: Arc<TenantLimits>,
    auth: LocalAuth,
    console: ConsoleAuth,
    tool_results_dir: PathBuf,
    instance_id: String,
    shutdown: CancellationToken,
}

#[async_trait::async_trait]
impl Profile for LocalProfile {
    async fn authenticate(&self, headers: &HeaderMap) -> Option<(Identity, Option<i64>)> {
        // The bearer token (CLI, TUI), else the web console's session cookie.
        self.auth
            .authenticate(headers)
            .or_else(|| self.console.authenticate(headers))
            .map(|identity| (identity, None))
    }

    async fn call(&self, identity: &Identity, method: Method, params: Value) -> Reply {
        let owner = Owner {
            instance_id: &self.instance_id,
            draining: self.shutdown.is_cancelled(),
            limits: &self.limits,
            caller_sub: Some(&identity.sub),
        };
        execute::execute(&self.runtime, &owner, method, params).await
    }

    async fn subscribe(
        &self,
        _identity: &Identity,
        params: &SessionResumeParams,
    ) -> Result<Subscription, ErrorObject> {
        let session = self
            .runtime
            .session(&params.session_id)
            .await
            .map_err(execute::rt)?;
        // Subscribe before answering so nothing committed after the answer is missed.
        let rx = session.subscribe(params.after_seq);
        let info = session.info().await.map_err(execute::rt)?;
        let result = SessionResumeResult {
            head_seq: info.head_seq,
            session: info,
            pending_permissions: session.pending_permissions().await,
        };
        Ok((result, rx))
    }

    async fn drain(&self) -> Result<DrainResult, ErrorObject> {
        Err(ErrorObject::new(
            ErrorCode::NotImplemented,
            "drain applies to the cluster profile; use admin.shutdown locally",
        ))
    }

    fn shutdown(&self) {
        self.shutdown.cancel();
    }

    async fn readiness(&self) -> (bool, Value) {
        let stopping = self.shutdown.is_cancelled();
        (!stopping, serde_json::json!({ "shutting_down": stopping }))
    }

    fn runtime(&self) -> Option<&Runtime> {
        Some(&self.runtime)
    }

    fn console(&self) -> Option<&dyn ConsoleSignIn> {
        Some(&self.console)
    }

    fn tool_results_dir(&self) -> Option<PathBuf> {
        Some(self.tool_results_dir.clone())
    }
}

/// What `serve` needs.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    pub app_root: AppRoot,
    pub env: Env,
    /// Port to bind on 127.0.0.1 (0 = any free port).
    pub port: u16,
    /// Project root for sessions created without one.
    pub project_root: PathBuf,
    /// Lets `a2a_delegate` and remote team members call `http://` agents on loopback
    /// addresses (the public-address guard's test switch). Tests only; `serve` never sets it.
    pub allow_loopback_agents: bool,
}

/// A local backend ready to serve.
pub struct LocalBackend {
    pub state: Arc<AppState>,
    pub listener: TcpListener,
    pub addr: SocketAddr,
    pub token: String,
}

/// Opens the journal, recovers interrupted sessions and binds the listener.
pub async fn build(options: &LocalOptions) -> anyhow::Result<LocalBackend> {
    build_with_tools(options, lumina_tools::builtin_registry()).await
}

/// [`build`] with the given built-in tools instead of [`lumina_tools::builtin_registry`]:
/// tests only, for a backend whose `web_fetch` and browser tools may reach the test's own
/// loopback server ([`lumina_tools::builtin_registry_with`] and their
/// `allow_private_target_for_tests`). `serve` never calls it: no setting, environment
/// variable or flag reaches it.
#[doc(hidden)]
pub async fn build_with_tools(
    options: &LocalOptions,
    tools: lumina_tools::ToolRegistry,
) -> anyhow::Result<LocalBackend> {
    let app_root = &options.app_root;
    app_root
        .ensure_dirs()
        .with_context(|| format!("cannot create the AppRoot at {}", app_root.path().display()))?;
    lumina_runtime::team::install_builtin_teams(app_root);
    let settings = lumina_config::load(app_root, None, &options.env, &Default::default())
        .context("cannot load settings")?;
    let store = SqliteJournal::open(app_root.sessions_dir(), LOCAL_TENANT)
        .context("cannot open the session journal")?;
    let metrics = Metrics::new().context("metrics")?;
    let store: Arc<dyn lumina_journal::JournalStore> =
        Arc::new(MeteredStore::new(Arc::new(store), metrics.clone()));
    // The embedder the settings select (read at start-up), loaded once for the Memory
    // Fabric and project-document RAG alike; none leaves both lexical.
    let models = settings.memory_models();
    let root = app_root.path().to_path_buf();
    let select_models = models.clone();
    let embedder = tokio::task::spawn_blocking(move || {
        memory_setup::select_embedder(&root, &select_models)
    })
    .await
    .unwrap_or_else(|err| {
        tracing::warn!(error = %err, "selecting the embedding model failed; retrieval stays lexical");
        None
    });
    // Project-document RAG (docs/rag.md): `rag_ingest` / `rag_search` over one SQLite
    // database per project under the AppRoot, apart from the memory files.
    let mut tools = tools;
    let rag = Arc::new(lumina_rag::Rag::new(
        Arc::new(lumina_rag::sqlite::SqliteRag::new(app_root.clone())),
        embedder.clone(),
        lumina_rag::RagOptions::default(),
    ));
    for tool in lumina_rag::tools::tools(rag) {
        tools.register(tool);
    }
    let runtime = Runtime::new(
        RuntimeOptions {
            app_root: app_root.clone(),
            env: options.env.clone(),
            tenant: LOCAL_TENANT.into(),
            default_project_root: options.project_root.clone(),
        },
        store,
        tools,
        Arc::new(AlwaysOwned(LOCAL_FENCE)),
    )
    .with_mcp(McpManager::new(ManagerOptions {
        mcp_tool_timeout_ms: settings.mcp_tool_timeout_ms,
        ..ManagerOptions::new(app_root.clone())
    }))
    .with_a2a_client(lumina_a2a::A2aClient::new(lumina_a2a::ClientOptions {
        allow_loopback: options.allow_loopback_agents,
        ..Default::default()
    }));
    // The Memory Fabric (docs/design.md#memory-fabric): SQLite under the AppRoot, with the
    // embedder and reranker the settings select (read at start-up). A store that does not
    // open leaves the runtime without memory, and an unusable model leaves recall lexical:
    // neither stops the backend.
    let root = app_root.path().to_path_buf();
    let memory = tokio::task::spawn_blocking(move || {
        memory_setup::open_local_memory_with(&root, &models, embedder)
    })
    .await
    .unwrap_or_else(|err| {
        tracing::warn!(error = %err, "opening the memory store failed; running without memory");
        None
    });
    let runtime = match memory {
        Some(memory) => runtime.with_memory(Arc::new(memory)),
        None => runtime,
    };
    let recovered = runtime
        .recover_all()
        .await
        .context("crash recovery failed")?;
    if recovered > 0 {
        tracing::info!(
            sessions = recovered,
            "recovered sessions left open by a previous run"
        );
    }
    let listener = bind(options.port, &app_root.backend_file()).await?;
    let addr = listener.local_addr()?;
    let token = LocalAuth::generate_token();
    crate::doctor::log_confinement(false);
    let shutdown = CancellationToken::new();
    let limits = TenantLimits::new(
        LimitOptions::from_settings(&settings),
        Box::new(LocalWindow::default()),
        metrics.clone(),
    );
    let profile: Arc<dyn crate::profile::Profile> = Arc::new(LocalProfile {
        limits: limits.clone(),
        runtime: runtime.clone(),
        auth: LocalAuth::new(token.clone()),
        console: ConsoleAuth::persistent(app_root.console_sessions_file()),
        tool_results_dir: app_root.tool_results_dir(),
        instance_id: format!("local-{}", std::process::id()),
        shutdown: shutdown.clone(),
    });
    let a2a_url = options
        .env
        .get_nonempty("LUMINA_A2A_PUBLIC_URL")
        .map(str::to_owned)
        .unwrap_or_else(|| format!("http://{addr}{}", crate::a2a::A2A_PATH));
    let a2a = crate::a2a::service(
        profile.clone(),
        &app_root.sessions_dir().join("a2a.sqlite"),
        &a2a_url,
        addr,
    )
    .context("cannot open the A2A task store")?;
    let peers = crate::a2a::peer_verifier(&settings.peer).context("the `peer` settings")?;
    let state = Arc::new(AppState {
        limits,
        profile,
        metrics,
        info: ServerInfo {
            name: "lumina-backend".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            profile: "local".into(),
            instance_id: format!("local-{}", std::process::id()),
            max_frame_bytes: settings.max_frame_bytes,
        },
        max_frame_bytes: settings.max_frame_bytes,
        shutdown,
        conversations: ConversationConfig::new(
            Arc::new(LocalWindows::default()),
            &settings,
            app_root,
        ),
        a2a: Some(crate::profile::A2aMount {
            service: a2a,
            peers: peers.map(|verifier| crate::profile::PeerMount {
                verifier,
                tenants: crate::profile::PeerTenants::One(LOCAL_TENANT.into()),
                nonces: None,
            }),
        }),
    });
    Ok(LocalBackend {
        state,
        listener,
        addr,
        token,
    })
}

/// Binds 127.0.0.1: on `port` when one is given; else on the port of the backend this one
/// replaces (an endpoint file left behind by a crash) when it is free, so the web console
/// pages open on it reconnect by themselves; else on any free port.
async fn bind(port: u16, endpoint_file: &Path) -> anyhow::Result<TcpListener> {
    if port != 0 {
        return TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| format!("cannot bind 127.0.0.1:{port}"));
    }
    let previous = endpoint::read(endpoint_file)
        .filter(|e| !endpoint::is_live_backend(e.pid))
        .and_then(|e| endpoint::port_of(&e.url));
    if let Some(previous) = previous {
        match TcpListener::bind(("127.0.0.1", previous)).await {
            Ok(listener) => return Ok(listener),
            Err(err) => tracing::info!(
                port = previous,
                error = %err,
                "the previous backend's port is taken; binding a free one"
            ),
        }
    }
    TcpListener::bind(("127.0.0.1", 0))
        .await
        .context("cannot bind 127.0.0.1")
}

/// `lumina-backend serve`: runs until SIGINT/SIGTERM or `admin.shutdown`, then interrupts
/// running work, journals it, and removes the endpoint file.
pub async fn serve(options: LocalOptions) -> anyhow::Result<()> {
    let backend = build(&options).await?;
    let endpoint_path = options.app_root.backend_file();
    let pid = std::process::id();
    endpoint::claim(
        &endpoint_path,
        &Endpoint {
            url: format!("ws://{}{}", backend.addr, WS_PATH),
            token: backend.token.clone(),
            pid,
            protocol: PROTOCOL_VERSION,
            started_at: lumina_journal::now_ms(),
        },
    )?;
    tracing::info!(addr = %backend.addr, pid, "local backend listening");
    let state = backend.state.clone();
    let signals = tokio::spawn(wait_for_signal(state.shutdown.clone()));
    let served = server::serve(backend.listener, state.clone()).await;
    signals.abort();
    stop_runs(&state).await;
    endpoint::release(&endpoint_path, pid);
    served.context("server error")?;
    tracing::info!("local backend stopped");
    Ok(())
}

/// Interrupts running runs and waits (bounded) for them to journal their end.
pub async fn stop_runs(state: &AppState) {
    if let Some(runtime) = state.runtime() {
        runtime.cancel_all().await;
        runtime.wait_idle(Duration::from_secs(5)).await;
        if let Some(mcp) = runtime.mcp() {
            mcp.shutdown().await;
        }
    }
}

async fn wait_for_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("cannot install signal handlers; stop with admin.shutdown");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("sigterm: shutting down"),
        _ = int.recv() => tracing::info!("sigint: shutting down"),
        _ = shutdown.cancelled() => {}
    }
    shutdown.cancel();
}
