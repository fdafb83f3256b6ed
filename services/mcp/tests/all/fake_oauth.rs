//! An in-test OAuth-protected MCP server on one port: Protected Resource Metadata,
//! authorization server metadata, dynamic registration, an authorization endpoint that
//! approves at once (redirecting to the client's redirect URI), a token endpoint that
//! checks PKCE, `resource` and refresh tokens, and a handshake-era MCP server with one
//! `echo` tool that wants `Authorization: Bearer <issued token>`: Streamable HTTP at `/mcp`
//! and the legacy HTTP+SSE transport at `/sse` (posting to `/messages`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub registrations: u32,
    pub authorizations: u32,
    pub code_grants: u32,
    pub refresh_grants: u32,
    pub unauthorized: u32,
}

#[derive(Default)]
struct St {
    base: String,
    expires_in: u64,
    counts: Counts,
    /// code → (code_challenge, redirect_uri, resource)
    codes: HashMap<String, (String, String, String)>,
    access: Vec<String>,
    refresh: Vec<String>,
    seq: u32,
    /// The open legacy SSE stream.
    sse: Option<mpsc::UnboundedSender<String>>,
}

#[derive(Clone)]
pub struct FakeOAuth {
    st: Arc<Mutex<St>>,
    pub base: String,
}

impl FakeOAuth {
    /// Starts the server; access tokens live `expires_in` seconds.
    pub async fn start(expires_in: u64) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
        let st = Arc::new(Mutex::new(St {
            base: base.clone(),
            expires_in,
            ..St::default()
        }));
        let app = Router::new()
            .route("/.well-known/oauth-protected-resource/mcp", get(prm))
            .route("/.well-known/oauth-protected-resource/sse", get(prm_sse))
            .route("/.well-known/oauth-authorization-server", get(as_metadata))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route(
                "/mcp",
                post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
            )
            .route(
                "/sse",
                get(sse).post(|| async { StatusCode::METHOD_NOT_ALLOWED }),
            )
            .route("/messages", post(messages))
            .with_state(st.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { st, base })
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    pub fn sse_url(&self) -> String {
        format!("{}/sse", self.base)
    }

    pub fn counts(&self) -> Counts {
        self.st.lock().unwrap().counts.clone()
    }

    /// The access tokens issued so far.
    pub fn issued(&self) -> Vec<String> {
        self.st.lock().unwrap().access.clone()
    }

    /// Invalidates every access token (and, with `refresh`, every refresh token).
    pub fn revoke(&self, refresh: bool) {
        let mut st = self.st.lock().unwrap();
        st.access.clear();
        if refresh {
            st.refresh.clear();
        }
    }
}

type Shared = State<Arc<Mutex<St>>>;

async fn prm(State(st): Shared) -> Json<Value> {
    let base = st.lock().unwrap().base.clone();
    Json(
        json!({"resource": format!("{base}/mcp"), "authorization_servers": [base],
        "scopes_supported": ["mcp:tools"]}),
    )
}

async fn prm_sse(State(st): Shared) -> Json<Value> {
    let base = st.lock().unwrap().base.clone();
    Json(json!({"resource": format!("{base}/sse"), "authorization_servers": [base]}))
}

async fn as_metadata(State(st): Shared) -> Json<Value> {
    let base = st.lock().unwrap().base.clone();
    Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    }))
}

async fn register(State(st): Shared, Json(body): Json<Value>) -> Response {
    let mut st = st.lock().unwrap();
    st.counts.registrations += 1;
    let id = format!("client-{}", st.counts.registrations);
    (
        StatusCode::CREATED,
        Json(
            json!({"client_id": id, "redirect_uris": body["redirect_uris"],
            "token_endpoint_auth_method": "none"}),
        ),
    )
        .into_response()
}

async fn authorize(State(st): Shared, Query(q): Query<HashMap<String, String>>) -> Response {
    let mut st = st.lock().unwrap();
    st.counts.authorizations += 1;
    let p = |k: &str| q.get(k).cloned().unwrap_or_default();
    if p("response_type") != "code" || p("code_challenge_method") != "S256" {
        return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
    }
    st.seq += 1;
    let code = format!("code-{}", st.seq);
    st.codes.insert(
        code.clone(),
        (p("code_challenge"), p("redirect_uri"), p("resource")),
    );
    let mut to = url::Url::parse(&p("redirect_uri")).unwrap();
    to.query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &p("state"));
    (StatusCode::FOUND, [(header::LOCATION, to.to_string())]).into_response()
}

fn oauth_error(e: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": e}))).into_response()
}

async fn token(State(st): Shared, body: String) -> Response {
    let f: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let mut st = st.lock().unwrap();
    let p = |k: &str| f.get(k).cloned().unwrap_or_default();
    let resources = [format!("{}/mcp", st.base), format!("{}/sse", st.base)];
    if !resources.contains(&p("resource")) {
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
            let rt = p("refresh_token");
            if !st.refresh.contains(&rt) {
                return oauth_error("invalid_grant");
            }
            st.refresh.retain(|r| *r != rt); // rotation
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
        json!({"access_token": access, "token_type": "Bearer", "expires_in": st.expires_in,
        "refresh_token": refresh, "scope": "mcp:tools"}),
    )
    .into_response()
}

/// `None` when the request carries an issued token, else the `401` (whose challenge names
/// the PRM of `resource_path`).
fn unauthorized(st: &mut St, headers: &HeaderMap, resource_path: &str) -> Option<Response> {
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
        "Bearer error=\"invalid_token\", resource_metadata=\"{}/.well-known/oauth-protected-resource{resource_path}\"",
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

/// The JSON-RPC answer to `msg` (`None` for notifications).
fn answer(msg: &Value) -> Option<Value> {
    let id = msg.get("id")?.clone();
    let reply = match msg["method"].as_str() {
        Some("initialize") => json!({"result": {"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "fake-oauth", "version": "1"}}}),
        Some("tools/list") => json!({"result": {"tools": [{"name": "echo",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}}]}}),
        Some("tools/call") => {
            let text = msg["params"]["arguments"]["message"].as_str().unwrap_or("");
            json!({"result": {"content": [{"type": "text", "text": format!("echo: {text}")}]}})
        }
        Some("ping") => json!({"result": {}}),
        _ => json!({"error": {"code": -32601, "message": "method not found"}}),
    };
    let mut body = json!({"jsonrpc": "2.0", "id": id});
    if let (Some(b), Some(r)) = (body.as_object_mut(), reply.as_object()) {
        b.extend(r.clone());
    }
    Some(body)
}

async fn mcp(State(st): Shared, headers: HeaderMap, Json(msg): Json<Value>) -> Response {
    if let Some(refused) = unauthorized(&mut st.lock().unwrap(), &headers, "/mcp") {
        return refused;
    }
    match answer(&msg) {
        Some(reply) => Json(reply).into_response(),
        None => StatusCode::ACCEPTED.into_response(),
    }
}

async fn sse(State(st): Shared, headers: HeaderMap) -> Response {
    let mut st = st.lock().unwrap();
    if let Some(refused) = unauthorized(&mut st, &headers, "/sse") {
        return refused;
    }
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    let _ = tx.send("event: endpoint\ndata: /messages\n\n".into());
    st.sse = Some(tx);
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|s| (Ok::<_, Infallible>(s), rx))
    });
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}

async fn messages(State(st): Shared, headers: HeaderMap, Json(msg): Json<Value>) -> Response {
    let mut st = st.lock().unwrap();
    if let Some(refused) = unauthorized(&mut st, &headers, "/sse") {
        return refused;
    }
    if let (Some(reply), Some(tx)) = (answer(&msg), st.sse.as_ref()) {
        let _ = tx.send(format!("event: message\ndata: {reply}\n\n"));
    }
    StatusCode::ACCEPTED.into_response()
}
