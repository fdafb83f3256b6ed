//! MCP authorization (2025-11-25 "Authorization"; OAuth 2.1) for the HTTP transports.
//!
//! An [`OAuth`] belongs to one server URL and lives across reconnects. The transports ask
//! it for a bearer header before each request and hand it every `401` and every
//! `403 insufficient_scope`; it answers "retry" once it has a (better) token:
//!
//! - `401`: a newer token than the one sent → retry; else refresh (once), else authorize
//!   (once) — discovery (`discovery.rs`, `wellknown.rs`), a client identity
//!   (`registration.rs`), the authorization code flow with PKCE `S256`, `state` and
//!   `resource` through a [`UserAgent`] (`authorize.rs`), the token exchange (`token.rs`).
//! - `403` with `error="insufficient_scope"`: step-up — re-authorize with the union of the
//!   granted and the challenged scopes, unless the token already has them, at most
//!   [`MAX_STEP_UPS`] times per request.
//!
//! Flows are serialized; time spent in them does not count against request timeouts
//! ([`OAuth::busy_time`]). With an interactive agent the flow finishes in the background
//! and requests fail with [`AuthError::Pending`] (the URL to open) meanwhile. Tokens are
//! refreshed shortly before they expire and, with a [`TokenStore`], survive restarts.

mod agent;
mod assertion;
mod authorize;
mod challenge;
mod discovery;
mod error;
mod flow;
mod loopback;
mod net;
mod pkce;
mod registration;
mod store;
mod token;
mod wellknown;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use url::Url;

pub use agent::{Callback, HeadlessAgent, Redirect, UserAgent};
pub use assertion::SigningKey;
pub use challenge::{parse as parse_challenges, split_scopes, BearerChallenge, Challenge};
pub use discovery::{AsMetadata, Discovered, MetadataError};
pub use error::AuthError;
pub use loopback::{LoopbackAgent, UrlHook};
pub use net::is_secure_endpoint;
pub use pkce::{challenge_s256, Pkce};
pub use registration::{AuthMethod, ClientInfo, ClientKind, PreRegistered};
pub use store::{Stored, TokenStore};
pub use token::{basic_auth, Tokens};
pub use wellknown::{
    authorization_server_metadata_urls, canonical_resource, protected_resource_metadata_urls,
    resource_matches,
};

use crate::Error;
use net::AuthHttp;

/// Re-authorizations for more scope allowed per request (so at most three authorization
/// requests in all, with the first one).
pub const MAX_STEP_UPS: u32 = 2;

/// How one server is authorized.
#[derive(Clone)]
pub struct OAuthConfig {
    /// The MCP server's URL (the resource; discovery starts here).
    pub server_url: Url,
    /// Pre-registered credentials (`"oauth"` in the server definition).
    pub client: Option<PreRegistered>,
    /// Scopes to request in addition to what the server asks for.
    pub scopes: Vec<String>,
    /// The HTTPS URL of this client's Client ID Metadata Document, used as `client_id`
    /// where the authorization server supports it.
    pub client_metadata_url: Option<String>,
    /// `client_name` in dynamic registrations.
    pub client_name: String,
    /// The server's name, for logs.
    pub label: String,
}

impl OAuthConfig {
    pub fn new(server_url: Url, label: impl Into<String>) -> Self {
        Self {
            server_url,
            client: None,
            scopes: Vec::new(),
            client_metadata_url: None,
            client_name: "Lumina".into(),
            label: label.into(),
        }
    }
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("server", &self.server_url.origin().ascii_serialization())
            .field("client", &self.client)
            .field("scopes", &self.scopes)
            .field("client_metadata_url", &self.client_metadata_url)
            .finish_non_exhaustive()
    }
}

/// Per-request retry bookkeeping (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Tries {
    refreshed: bool,
    authorized: bool,
    step_ups: u32,
}

/// One server's authorization state. Share it as `Arc<OAuth>`.
pub struct OAuth {
    cfg: OAuthConfig,
    agent: Option<Arc<dyn UserAgent>>,
    store: Option<TokenStore>,
    http: AuthHttp,
    state: Mutex<State>,
    /// Held by whoever runs a flow (refresh, authorization).
    flow: tokio::sync::Mutex<()>,
    busy: Mutex<Busy>,
    /// Serializes token file writes (the last snapshot wins).
    save: Mutex<()>,
    changed: watch::Sender<u64>,
    cancel: Mutex<CancellationToken>,
}

#[derive(Default)]
struct State {
    stored: Stored,
    /// Bumped whenever the tokens change.
    generation: u64,
    /// The authorization URL a person has yet to open.
    pending: Option<String>,
    /// Why the last background sign-in ended without tokens.
    sign_in_failure: Option<AuthError>,
    /// No refresh attempt before this (after one failed for a network reason).
    refresh_backoff: Option<Instant>,
}

#[derive(Default)]
struct Busy {
    total: Duration,
    since: Option<Instant>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("cfg", &self.cfg)
            .field("authorized", &self.is_authorized())
            .field("pending", &self.pending_authorization().is_some())
            .finish_non_exhaustive()
    }
}

impl OAuth {
    /// `agent`: how to ask for a sign-in (`None`: stored tokens and refresh only).
    /// `store`: where tokens persist (`None`: memory only). Stored state is loaded now.
    pub fn new(
        cfg: OAuthConfig,
        agent: Option<Arc<dyn UserAgent>>,
        store: Option<TokenStore>,
    ) -> Result<Arc<Self>, AuthError> {
        let stored = store.as_ref().map(TokenStore::load).unwrap_or_default();
        Ok(Arc::new(Self {
            cfg,
            agent,
            store,
            http: AuthHttp::new()?,
            state: Mutex::new(State {
                stored,
                ..State::default()
            }),
            flow: tokio::sync::Mutex::new(()),
            busy: Mutex::new(Busy::default()),
            save: Mutex::new(()),
            changed: watch::channel(0).0,
            cancel: Mutex::new(CancellationToken::new()),
        }))
    }

    pub fn config(&self) -> &OAuthConfig {
        &self.cfg
    }

    /// Whether an access token is held (valid or not).
    pub fn is_authorized(&self) -> bool {
        self.with_state(|s| s.stored.tokens.is_some())
    }

    /// The authorization URL a person still has to open, if a sign-in is under way.
    pub fn pending_authorization(&self) -> Option<String> {
        self.with_state(|s| s.pending.clone())
    }

    /// Why the last background sign-in ended without tokens (until a new one starts or
    /// tokens arrive).
    pub fn sign_in_failure(&self) -> Option<String> {
        self.sign_in_error().map(|e| e.to_string())
    }

    /// [`Self::sign_in_failure`] as the typed error (a timeout is
    /// [`AuthError::SignInTimedOut`]).
    pub fn sign_in_error(&self) -> Option<AuthError> {
        self.with_state(|s| s.sign_in_failure.clone())
    }

    /// Changes whenever the tokens change or a background sign-in ends (either way).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Abandons a sign-in under way (its listener stops).
    pub fn cancel_pending(&self) {
        let mut c = self.cancel.lock().unwrap_or_else(|p| p.into_inner());
        c.cancel();
        *c = CancellationToken::new();
    }

    /// Forgets the tokens and the registration, here and in the token file.
    pub fn sign_out(&self) {
        self.with_state(|s| {
            s.stored = Stored::default();
            s.generation += 1;
        });
        if let Some(store) = &self.store {
            store.clear();
        }
    }

    /// Total time spent running flows so far (request timeouts exclude it).
    pub fn busy_time(&self) -> Duration {
        let b = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        b.total + b.since.map(|s| s.elapsed()).unwrap_or_default()
    }

    /// The `Authorization` header for the next request (refreshing a token about to expire
    /// first) and the token generation it belongs to.
    pub(crate) async fn bearer(&self) -> (Option<HeaderValue>, u64) {
        self.refresh_if_expiring().await;
        self.with_state(|s| {
            let header = s.stored.tokens.as_ref().and_then(|t| {
                let mut v =
                    HeaderValue::from_str(&format!("Bearer {}", t.access_token.expose())).ok()?;
                v.set_sensitive(true);
                Some(v)
            });
            (header, s.generation)
        })
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    fn generation(&self) -> u64 {
        self.with_state(|s| s.generation)
    }

    /// Marks a flow running until the guard drops.
    fn busy_guard(&self) -> BusyGuard<'_> {
        let mut b = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        b.since.get_or_insert_with(Instant::now);
        BusyGuard(self)
    }

    /// Writes the current state to the token file (if any); failures are logged.
    fn persist(&self) {
        let Some(store) = &self.store else { return };
        let _order = self.save.lock().unwrap_or_else(|p| p.into_inner());
        let snapshot = self.with_state(|s| s.stored.clone());
        if let Err(e) = store.save(&snapshot) {
            tracing::warn!(server = %self.cfg.label, error = %e, "cannot store mcp oauth tokens");
        }
    }
}

struct BusyGuard<'a>(&'a OAuth);

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        let mut b = self.0.busy.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(since) = b.since.take() {
            b.total += since.elapsed();
        }
    }
}

/// Adds the bearer token of `auth` (if any) to `req`; returns the token generation sent.
pub(crate) async fn with_bearer(
    auth: Option<&Arc<OAuth>>,
    req: reqwest::RequestBuilder,
) -> (reqwest::RequestBuilder, u64) {
    let Some(auth) = auth else {
        return (req, 0);
    };
    match auth.bearer().await {
        (Some(header), generation) => (
            req.header(reqwest::header::AUTHORIZATION, header),
            generation,
        ),
        (None, generation) => (req, generation),
    }
}

/// Sends what `build` makes with the bearer token, and again after each authorization
/// that asks for a retry.
pub(crate) async fn send(
    auth: Option<&Arc<OAuth>>,
    build: impl Fn() -> reqwest::RequestBuilder,
) -> Result<reqwest::Response, Error> {
    let mut tries = Tries::default();
    loop {
        let (req, sent) = with_bearer(auth, build()).await;
        let resp = req.send().await.map_err(Error::http)?;
        if !after_response(auth, resp.status(), resp.headers(), sent, &mut tries).await? {
            return Ok(resp);
        }
    }
}

/// After a response: `Ok(true)` when the request should be sent again (with the new
/// authorization). `sent` is the token generation the request carried.
async fn after_response(
    auth: Option<&Arc<OAuth>>,
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    sent: u64,
    tries: &mut Tries,
) -> Result<bool, Error> {
    let code = status.as_u16();
    if code != 401 && code != 403 {
        return Ok(false);
    }
    let challenge = BearerChallenge::from_headers(headers);
    let Some(auth) = auth else {
        if code == 401 {
            return Err(Error::Auth(AuthError::Needed(
                "the server answered HTTP 401 Unauthorized and OAuth is not enabled for this \
                 connection (check the credentials in its headers)"
                    .into(),
            )));
        }
        return Ok(false);
    };
    let outcome = if code == 401 {
        auth.on_unauthorized(&challenge, sent, tries).await
    } else if challenge.is_insufficient_scope() {
        auth.on_insufficient_scope(&challenge, sent, tries).await
    } else {
        return Ok(false);
    };
    outcome.map(|()| true).map_err(Error::Auth)
}
