//! One configured server inside the manager: its connection, tool cache and restart budget.
//!
//! Connects are serialized per server (`inner` is held across them). A session that ended
//! (crashed process, broken stream) is replaced on the next use, at most
//! `max_restarts_per_minute` times a minute; past that the server is `failed` until the
//! budget frees up. An HTTP server that needs a sign-in is `failed` with "needs
//! authorization: …" (and the URL to open) without spending that budget; the slot
//! reconnects by itself when the sign-in completes (`auth.rs`).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{ManagerOptions, ServerState};
use crate::client::auth::OAuth;
use crate::client::{
    CallToolResult, ClientSession, ConnectOptions, Endpoint, HttpMode, ProtocolPref, ToolInfo,
    TransportKind,
};
use crate::config::{ConfigError, ServerConfig, TransportSpec};
use crate::expand::process_env;
use crate::Error;

const RESTART_WINDOW: Duration = Duration::from_secs(60);
/// Characters of a failure reason kept (stderr lines are already cut to 200; an
/// authorization URL needs room).
const REASON_KEEP: usize = 1200;

pub(crate) struct ServerSlot {
    pub(crate) config: ServerConfig,
    pub(crate) fingerprint: String,
    project_root: PathBuf,
    pub(super) opts: ManagerOptions,
    pub(crate) trusted: AtomicBool,
    inner: tokio::sync::Mutex<Inner>,
    view: Mutex<View>,
    /// This slot, for tasks that outlive a call (the sign-in watcher).
    pub(super) me: Weak<ServerSlot>,
    /// The server's authorization (HTTP servers), kept across reconnects.
    pub(super) oauth: Mutex<Option<Arc<OAuth>>>,
    /// The last connect failed for lack of authorization.
    pub(super) auth_blocked: AtomicBool,
}

#[derive(Default)]
struct Inner {
    session: Option<Arc<ClientSession>>,
    tools: Option<Vec<ToolInfo>>,
    started: bool,
    restarts: VecDeque<Instant>,
    last_failure: Option<String>,
    /// The era and transport found by the last successful connect: reconnects skip the
    /// `server/discover` probe and the HTTP+SSE fallback. Cleared when a connect fails.
    era: Option<(ProtocolPref, TransportKind)>,
}

/// What `status` reads without waiting for a connect in progress.
struct View {
    state: ServerState,
    session: Option<Arc<ClientSession>>,
    tools: Vec<String>,
}

impl ServerSlot {
    pub(crate) fn new(
        config: ServerConfig,
        project_root: PathBuf,
        opts: ManagerOptions,
        trusted: bool,
        me: Weak<ServerSlot>,
    ) -> Self {
        Self {
            fingerprint: config.def.fingerprint(),
            config,
            project_root,
            opts,
            trusted: AtomicBool::new(trusted),
            inner: tokio::sync::Mutex::new(Inner::default()),
            view: Mutex::new(View {
                state: ServerState::Connecting,
                session: None,
                tools: Vec::new(),
            }),
            me,
            oauth: Mutex::new(None),
            auth_blocked: AtomicBool::new(false),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    /// Trusted and not disabled.
    pub(crate) fn usable(&self) -> bool {
        !self.config.def.disabled && self.trusted.load(Ordering::Acquire)
    }

    pub(crate) fn state(&self) -> ServerState {
        if self.config.def.disabled {
            return ServerState::Disabled;
        }
        if !self.trusted.load(Ordering::Acquire) {
            return ServerState::Untrusted;
        }
        let view = self.view.lock().unwrap_or_else(|p| p.into_inner());
        match (
            &view.state,
            view.session.as_ref().and_then(|s| s.closed_reason()),
        ) {
            (ServerState::Connected, Some(reason)) => ServerState::Failed(reason),
            (state, _) => state.clone(),
        }
    }

    pub(crate) fn is_connected(&self) -> bool {
        let view = self.view.lock().unwrap_or_else(|p| p.into_inner());
        view.session.is_some()
    }

    /// Whether no connection was ever attempted.
    pub(crate) fn is_idle(&self) -> bool {
        self.inner.try_lock().is_ok_and(|i| !i.started)
    }

    pub(crate) fn transport(&self) -> TransportKind {
        let view = self.view.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = &view.session {
            return s.info().transport;
        }
        match &self.config.def.transport {
            TransportSpec::Stdio { .. } => TransportKind::Stdio,
            TransportSpec::Http {
                mode: HttpMode::LegacySse,
                ..
            } => TransportKind::Sse,
            TransportSpec::Http { .. } => TransportKind::Http,
        }
    }

    pub(crate) fn protocol_version(&self) -> Option<String> {
        let view = self.view.lock().unwrap_or_else(|p| p.into_inner());
        view.session
            .as_ref()
            .map(|s| s.protocol_version().to_string())
    }

    pub(crate) fn tool_names(&self) -> Vec<String> {
        self.view
            .lock()
            .map(|v| v.tools.clone())
            .unwrap_or_default()
    }

    pub(crate) fn process_id(&self) -> Option<u32> {
        let view = self.view.lock().unwrap_or_else(|p| p.into_inner());
        view.session.as_ref().and_then(|s| s.process_id())
    }

    pub(super) fn set_view(&self, state: ServerState, session: Option<Arc<ClientSession>>) {
        let mut view = self.view.lock().unwrap_or_else(|p| p.into_inner());
        view.state = state;
        view.session = session;
    }

    /// The server's tools, connecting (or reconnecting) first when needed.
    pub(crate) async fn tools(&self) -> Result<Vec<ToolInfo>, Error> {
        let mut inner = self.inner.lock().await;
        let session = self
            .ensure(&mut inner)
            .await
            .map_err(|e| Error::Closed(e.to_string()))?;
        if let (Some(tools), false) = (&inner.tools, session.tools_changed()) {
            return Ok(tools.clone());
        }
        match session.list_tools().await {
            Ok(tools) => {
                if let Ok(mut v) = self.view.lock() {
                    v.tools = tools.iter().map(|t| t.name.clone()).collect();
                }
                inner.tools = Some(tools.clone());
                Ok(tools)
            }
            Err(e) => {
                tracing::warn!(server = %self.name(), error = %e, "listing mcp tools failed");
                if matches!(e, Error::Auth(_)) {
                    self.auth_blocked.store(true, Ordering::Release);
                    inner.session = None;
                    inner.tools = None;
                    self.set_view(ServerState::Failed(trim(&e.to_string())), None);
                }
                Err(e)
            }
        }
    }

    /// Calls a tool; an expired HTTP session is re-initialized once.
    pub(crate) async fn call_tool(
        &self,
        tool: &str,
        args: Value,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<CallToolResult, Error> {
        let session = self.session().await?;
        match session
            .call_tool(tool, args.clone(), timeout, Some(cancel))
            .await
        {
            Err(Error::SessionExpired) => {
                tracing::info!(server = %self.name(), "mcp session expired; reconnecting");
                self.forget(&session, "the session expired").await;
                self.session()
                    .await?
                    .call_tool(tool, args, timeout, Some(cancel))
                    .await
            }
            Err(e @ Error::Http(_)) => {
                // The server is unreachable: reconnect on the next use.
                self.forget(&session, &e.to_string()).await;
                Err(e)
            }
            Err(e @ Error::Auth(_)) => {
                // A sign-in is needed (or under way): `/mcp` shows why; reconnect after it.
                self.auth_blocked.store(true, Ordering::Release);
                self.forget(&session, &e.to_string()).await;
                Err(e)
            }
            other => other,
        }
    }

    async fn session(&self) -> Result<Arc<ClientSession>, Error> {
        let mut inner = self.inner.lock().await;
        self.ensure(&mut inner)
            .await
            .map_err(|e| Error::Closed(e.to_string()))
    }

    async fn forget(&self, session: &Arc<ClientSession>, reason: &str) {
        let mut inner = self.inner.lock().await;
        if inner
            .session
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, session))
        {
            inner.session = None;
            inner.tools = None;
            inner.last_failure = Some(reason.to_string());
            self.set_view(ServerState::Failed(trim(reason)), None);
        }
    }

    /// A live session: the current one, or a new one within the restart budget.
    async fn ensure(&self, inner: &mut Inner) -> Result<Arc<ClientSession>, Unavailable> {
        if let Some(session) = &inner.session {
            match session.closed_reason() {
                None => return Ok(session.clone()),
                Some(reason) => {
                    tracing::warn!(server = %self.name(), reason, "mcp server connection lost");
                    session.close().await;
                    inner.last_failure = Some(reason);
                    inner.session = None;
                    inner.tools = None;
                }
            }
        }
        if let Some(reason) = self.pending_sign_in() {
            // Waiting for a person: no connect attempt, no restart spent.
            self.set_view(ServerState::Failed(trim(&reason)), None);
            return Err(Unavailable::SignInPending(reason));
        }
        let now = Instant::now();
        inner
            .restarts
            .retain(|t| now.duration_since(*t) < RESTART_WINDOW);
        if inner.started {
            if inner.restarts.len() >= self.opts.max_restarts_per_minute {
                let reason = Unavailable::RestartLimit {
                    restarts: inner.restarts.len(),
                    last_failure: inner.last_failure.clone(),
                };
                self.set_view(ServerState::Failed(trim(&reason.to_string())), None);
                return Err(reason);
            }
            inner.restarts.push_back(now);
        }
        inner.started = true;
        self.set_view(ServerState::Connecting, None);
        match self.connect(inner.era).await {
            Ok(session) => {
                self.auth_blocked.store(false, Ordering::Release);
                let info = session.info();
                let era = if info.stateless {
                    ProtocolPref::Stateless
                } else {
                    ProtocolPref::Handshake
                };
                inner.era = Some((era, info.transport));
                let session = Arc::new(session);
                self.set_view(ServerState::Connected, Some(session.clone()));
                inner.session = Some(session.clone());
                Ok(session)
            }
            Err(reason) => {
                tracing::warn!(server = %self.name(), %reason, "mcp server connection failed");
                let text = reason.to_string();
                self.set_view(ServerState::Failed(trim(&text)), None);
                inner.last_failure = Some(text);
                inner.era = None;
                Err(reason)
            }
        }
    }

    async fn connect(
        &self,
        era: Option<(ProtocolPref, TransportKind)>,
    ) -> Result<ClientSession, Unavailable> {
        let mut endpoint =
            self.config
                .def
                .resolve(self.name(), &self.project_root, &process_env)?;
        let mut protocol = self.config.def.protocol;
        if let (ProtocolPref::Auto, Some((known, kind))) = (protocol, era) {
            protocol = known;
            if let (
                TransportKind::Sse,
                Endpoint::Http {
                    mode: mode @ HttpMode::Auto,
                    ..
                },
            ) = (kind, &mut endpoint)
            {
                *mode = HttpMode::LegacySse;
            }
        }
        let opts = ConnectOptions {
            protocol,
            probe_timeout: None,
            request_timeout: self.opts.request_timeout,
            label: self.name().to_string(),
            auth: self.oauth_for(&endpoint),
        };
        match tokio::time::timeout(
            self.opts.connect_timeout,
            ClientSession::connect(&endpoint, &opts),
        )
        .await
        {
            Ok(Ok(session)) => Ok(session),
            Ok(Err(e)) => {
                if matches!(e, Error::Auth(_)) {
                    self.auth_blocked.store(true, Ordering::Release);
                }
                Err(Unavailable::Connect(e))
            }
            Err(_) => Err(Unavailable::ConnectTimeout {
                secs: self.opts.connect_timeout.as_secs(),
            }),
        }
    }

    pub(crate) async fn close(&self) {
        if let Some(auth) = self.current_oauth() {
            auth.cancel_pending();
        }
        let session = self.inner.lock().await.session.take();
        if let Some(session) = session {
            session.close().await;
        }
        self.set_view(ServerState::Connecting, None);
    }
}

/// Why a server has no live session (the text `/mcp` shows, trimmed).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unavailable {
    /// A sign-in is under way; the text says where.
    #[error("{0}")]
    SignInPending(String),
    #[error(
        "restarted {restarts} times within a minute; last error: {}",
        .last_failure.as_deref().unwrap_or("unknown")
    )]
    RestartLimit {
        restarts: usize,
        last_failure: Option<String>,
    },
    /// The definition does not resolve (a `${VAR}` is not set, a bad URL).
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Connect(Error),
    #[error("connecting timed out after {secs} s")]
    ConnectTimeout { secs: u64 },
}

pub(super) fn trim(s: &str) -> String {
    s.chars().take(REASON_KEEP).collect()
}
