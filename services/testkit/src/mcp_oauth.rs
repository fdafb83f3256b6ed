//! An OAuth-protected MCP server on a loopback port, for tests of MCP sign-in (a person
//! opening the authorization URL): one axum server that is both the authorization server
//! and the resource.
//!
//! - `GET /.well-known/oauth-protected-resource/mcp` — Protected Resource Metadata naming
//!   this server as the authorization server;
//! - `GET /.well-known/oauth-authorization-server` — its metadata (code flow, PKCE `S256`,
//!   dynamic registration, public clients);
//! - `POST /register` — dynamic client registration;
//! - `GET /authorize` — the page a person's browser opens: it approves at once and
//!   redirects to the client's registered redirect URI with `code` and `state` (a test
//!   "signs in" by following the URL with an HTTP client that follows redirects);
//! - `POST /token` — the code exchange (PKCE, redirect URI and `resource` checked) and
//!   refresh;
//! - `POST /mcp` — a handshake-era Streamable HTTP MCP endpoint (plain JSON answers) with
//!   one read-only tool, `lookup`, that wants `Authorization: Bearer <issued token>` and
//!   otherwise answers `401` with a `WWW-Authenticate` challenge naming the metadata.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The tool the server offers (`mcp__<server>__lookup` to the model).
pub const LOOKUP_TOOL: &str = "lookup";

/// What the server saw, for assertions.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OAuthCounts {
    pub registrations: u32,
    /// Authorization requests (browser visits of `/authorize`) that were approved.
    pub authorizations: u32,
    pub code_grants: u32,
    pub refresh_grants: u32,
    /// MCP requests refused for lack of a valid bearer token.
    pub unauthorized: u32,
    /// `tools/call` requests served (with a valid token).
    pub tool_calls: u32,
}

#[derive(Default)]
struct St {
    base: String,
    counts: OAuthCounts,
    /// client_id → registered redirect URIs.
    clients: HashMap<String, Vec<String>>,
    /// code → (code_challenge, redirect_uri, resource).
    codes: HashMap<String, (String, String, String)>,
    access: Vec<String>,
    refresh: Vec<String>,
    seq: u32,
}

type Shared = Arc<Mutex<St>>;

fn lock(st: &Shared) -> std::sync::MutexGuard<'_, St> {
    st.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running server; it stops when dropped.
pub struct OAuthMcpServer {
    st: Shared,
    base: String,
    task: tokio::task::JoinHandle<()>,
}

impl OAuthMcpServer {
    /// Starts the server on a free loopback port (inside a tokio runtime).
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
        let st: Shared = Arc::new(Mutex::new(St {
            base: base.clone(),
            ..St::default()
        }));
        let app = Router::new()
            .route("/.well-known/oauth-protected-resource/mcp", get(prm))
            .route("/.well-known/oauth-authorization-server", get(as_metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route(
                "/mcp",
                post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
            )
            .with_state(st.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { st, base, task })
    }

    /// The MCP endpoint (the server's `"url"` in `mcp.json`).
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// The authorization endpoint (an authorization URL starts with it).
    pub fn authorize_url(&self) -> String {
        format!("{}/authorize", self.base)
    }

    pub fn counts(&self) -> OAuthCounts {
        lock(&self.st).counts.clone()
    }

    /// The access tokens issued so far (to check that none leaks).
    pub fn issued(&self) -> Vec<String> {
        lock(&self.st).access.clone()
    }

    /// What `lookup` answers for `topic`.
    pub fn lookup_answer(topic: &str) -> String {
        format!("protected answer about {topic}")
    }
}

impl Drop for OAuthMcpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn prm(State(st): State<Shared>) -> Json<Value> {
    let base = lock(&st).base.clone();
    Json(
        json!({"resource": format!("{base}/mcp"), "authorization_servers": [base],
        "scopes_supported": ["docs:read"]}),
    )
}

async fn as_metadata(State(st): State<Shared>) -> Json<Value> {
    let base = lock(&st).base.clone();
    Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": ["docs:read"],
    }))
}

async fn register(State(st): State<Shared>, Json(body): Json<Value>) -> Response {
    let uris: Vec<String> = body["redirect_uris"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if uris.is_empty() {
        return oauth_error("invalid_redirect_uri");
    }
    let mut st = lock(&st);
    st.counts.registrations += 1;
    let id = format!("client-{}", st.counts.registrations);
    st.clients.insert(id.clone(), uris.clone());
    (
        StatusCode::CREATED,
        Json(json!({"client_id": id, "redirect_uris": uris,
            "token_endpoint_auth_method": "none"})),
    )
        .into_response()
}

async fn authorize(State(st): State<Shared>, Query(q): Query<HashMap<String, String>>) -> Response {
    let mut st = lock(&st);
    let p = |k: &str| q.get(k).cloned().unwrap_or_default();
    let registered = st
        .clients
        .get(&p("client_id"))
        .is_some_and(|uris| uris.contains(&p("redirect_uri")));
    if p("response_type") != "code"
        || p("code_challenge_method") != "S256"
        || p("code_challenge").is_empty()
        || !registered
    {
        return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
    }
    let Ok(mut to) = url::Url::parse(&p("redirect_uri")) else {
        return (StatusCode::BAD_REQUEST, "bad redirect_uri").into_response();
    };
    st.counts.authorizations += 1;
    st.seq += 1;
    let code = format!("code-{}", st.seq);
    st.codes.insert(
        code.clone(),
        (p("code_challenge"), p("redirect_uri"), p("resource")),
    );
    to.query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &p("state"));
    (StatusCode::FOUND, [(header::LOCATION, to.to_string())]).into_response()
}

fn oauth_error(e: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": e}))).into_response()
}

async fn token(State(st): State<Shared>, body: String) -> Response {
    let f: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let mut st = lock(&st);
    let p = |k: &str| f.get(k).cloned().unwrap_or_default();
    if p("resource") != format!("{}/mcp", st.base) {
        return oauth_error("invalid_target");
    }
    match p("grant_type").as_str() {
        "authorization_code" => {
            st.counts.code_grants += 1;
            let Some((challenge, redirect, resource)) = st.codes.remove(&p("code")) else {
                return oauth_error("invalid_grant");
            };
            let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(p("code_verifier").as_bytes()));
            if computed != challenge || redirect != p("redirect_uri") || resource != p("resource") {
                return oauth_error("invalid_grant");
            }
        }
        "refresh_token" => {
            st.counts.refresh_grants += 1;
            let presented = p("refresh_token");
            if !st.refresh.contains(&presented) {
                return oauth_error("invalid_grant");
            }
            st.refresh.retain(|r| *r != presented);
        }
        _ => return oauth_error("unsupported_grant_type"),
    }
    st.seq += 1;
    let (access, refresh) = (
        format!("at-{}-secret", st.seq),
        format!("rt-{}-secret", st.seq),
    );
    st.access.push(access.clone());
    st.refresh.push(refresh.clone());
    Json(
        json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600,
        "refresh_token": refresh, "scope": "docs:read"}),
    )
    .into_response()
}

/// `None` when the request carries an issued token, else the `401`.
fn unauthorized(st: &mut St, headers: &HeaderMap) -> Option<Response> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if st.access.iter().any(|t| t == bearer) {
        return None;
    }
    st.counts.unauthorized += 1;
    let challenge = format!(
        "Bearer error=\"invalid_token\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
        st.base
    );
    Some(
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response(),
    )
}

async fn mcp(State(st): State<Shared>, headers: HeaderMap, Json(msg): Json<Value>) -> Response {
    let mut st = lock(&st);
    if let Some(refused) = unauthorized(&mut st, &headers) {
        return refused;
    }
    let Some(id) = msg.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response(); // a notification
    };
    let reply = match msg["method"].as_str() {
        Some("initialize") => json!({"result": {"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "lumina-testkit-oauth", "version": "1"}}}),
        Some("tools/list") => json!({"result": {"tools": [{
            "name": LOOKUP_TOOL,
            "description": "Looks a topic up in the protected documentation.",
            "inputSchema": {"type": "object", "properties": {"topic": {"type": "string"}},
                "required": ["topic"]},
            "annotations": {"readOnlyHint": true}}]}}),
        Some("tools/call") if msg["params"]["name"] == LOOKUP_TOOL => {
            st.counts.tool_calls += 1;
            let topic = msg["params"]["arguments"]["topic"].as_str().unwrap_or("");
            let text = OAuthMcpServer::lookup_answer(topic);
            json!({"result": {"content": [{"type": "text", "text": text}]}})
        }
        Some("ping") => json!({"result": {}}),
        _ => json!({"error": {"code": -32601, "message": "method not found"}}),
    };
    let mut body = json!({"jsonrpc": "2.0", "id": id});
    if let (Some(b), Some(r)) = (body.as_object_mut(), reply.as_object()) {
        b.extend(r.clone());
    }
    Json(body).into_response()
}
