//! In-test HTTP servers (axum) for the eras without a reference server on this machine:
//! a 2024-11-05 HTTP+SSE server and a stateless 2026-07-28 server that checks the headers
//! and `_meta` the client must send.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use lumina_mcp::client::{ClientSession, ConnectOptions, Endpoint, HttpMode, TransportKind};
use lumina_mcp::{version, ServerState};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::support::{self, Env};

async fn serve(app: Router) -> Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(port)
}

fn tools_list() -> Value {
    json!([{"name": "echo", "description": "Echo", "inputSchema": {"type": "object",
        "properties": {"message": {"type": "string"}}}, "annotations": {"readOnlyHint": true}}])
}

fn echo_result(params: &Value) -> Value {
    let text = params["arguments"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    json!({"content": [{"type": "text", "text": format!("echo: {text}")}]})
}

// ---- legacy HTTP+SSE -----------------------------------------------------------------

#[derive(Clone, Default)]
struct Legacy {
    stream: Arc<Mutex<Option<mpsc::UnboundedSender<String>>>>,
}

async fn legacy_get(State(st): State<Legacy>) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    let _ = tx.send("event: endpoint\ndata: /messages?session=abc\n\n".into());
    *st.stream.lock().unwrap() = Some(tx);
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|s| (Ok::<_, Infallible>(s), rx))
    });
    (
        [("content-type", "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}

async fn legacy_post(State(st): State<Legacy>, body: String) -> StatusCode {
    let Ok(msg) = serde_json::from_str::<Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let Some(id) = msg.get("id").cloned() else {
        return StatusCode::ACCEPTED;
    };
    let result = match msg["method"].as_str() {
        Some("initialize") => {
            json!({"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
            "serverInfo": {"name": "legacy", "version": "1"}})
        }
        Some("tools/list") => json!({"tools": tools_list()}),
        Some("tools/call") => echo_result(&msg["params"]),
        _ => json!({}),
    };
    let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
    if let Some(tx) = st.stream.lock().unwrap().as_ref() {
        let _ = tx.send(format!("event: message\ndata: {reply}\n\n"));
    }
    StatusCode::ACCEPTED
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_sse_server_is_detected_and_used() -> Result<()> {
    let app = Router::new()
        .route("/sse", get(legacy_get))
        .route("/messages", post(legacy_post))
        .with_state(Legacy::default());
    let port = serve(app).await?;
    let endpoint = Endpoint::Http {
        url: url::Url::parse(&format!("http://127.0.0.1:{port}/sse"))?,
        headers: Vec::new(),
        mode: HttpMode::Auto,
        oauth: None,
    };
    // POST /sse gets 405 (probe and initialize): the client falls back to HTTP+SSE.
    let session = ClientSession::connect(&endpoint, &ConnectOptions::default()).await?;
    assert_eq!(session.info().transport, TransportKind::Sse);
    assert_eq!(session.protocol_version(), version::V2024_11_05);
    let tools = session.list_tools().await?;
    assert_eq!(tools.len(), 1);
    let result = session
        .call_tool(
            "echo",
            json!({"message": "hi"}),
            std::time::Duration::from_secs(30),
            None,
        )
        .await?;
    assert_eq!(lumina_mcp::result_text(&result), "echo: hi");
    session.close().await;
    Ok(())
}

// ---- stateless 2026-07-28 --------------------------------------------------------------

#[derive(Clone, Default)]
struct Modern {
    methods: Arc<Mutex<Vec<String>>>,
    problems: Arc<Mutex<Vec<String>>>,
}

fn rpc_reply(status: StatusCode, id: &Value, body: Value) -> Response {
    let key = if body.get("code").is_some() {
        "error"
    } else {
        "result"
    };
    (
        status,
        axum::Json(json!({"jsonrpc": "2.0", "id": id, key: body})),
    )
        .into_response()
}

async fn modern_post(State(st): State<Modern>, headers: HeaderMap, body: String) -> Response {
    let Ok(msg) = serde_json::from_str::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let method = msg["method"].as_str().unwrap_or("").to_string();
    st.methods.lock().unwrap().push(method.clone());
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let mut problems = Vec::new();
    if header("mcp-protocol-version") != version::STATELESS {
        problems.push(format!(
            "{method}: MCP-Protocol-Version is {:?}",
            header("mcp-protocol-version")
        ));
    }
    if header("mcp-method") != method {
        problems.push(format!(
            "{method}: Mcp-Method is {:?}",
            header("mcp-method")
        ));
    }
    if headers.contains_key("mcp-session-id") {
        problems.push(format!("{method}: sent a session id"));
    }
    let Some(id) = msg.get("id").cloned() else {
        st.problems.lock().unwrap().extend(problems);
        return StatusCode::ACCEPTED.into_response();
    };
    let params = &msg["params"];
    if method == "tools/call" && header("mcp-name") != params["name"].as_str().unwrap_or("") {
        problems.push(format!("tools/call: Mcp-Name is {:?}", header("mcp-name")));
    }
    let meta = &params["_meta"];
    if meta["io.modelcontextprotocol/protocolVersion"] != version::STATELESS
        || !meta["io.modelcontextprotocol/clientCapabilities"].is_object()
        || meta["io.modelcontextprotocol/clientInfo"]["name"] != "lumina"
    {
        problems.push(format!("{method}: incomplete _meta {meta}"));
    }
    if !problems.is_empty() {
        st.problems.lock().unwrap().extend(problems);
        return rpc_reply(
            StatusCode::BAD_REQUEST,
            &id,
            json!({"code": -32020, "message": "header mismatch"}),
        );
    }
    let result = match method.as_str() {
        "server/discover" => {
            json!({"resultType": "complete", "supportedVersions": [version::STATELESS],
            "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "1"}}})
        }
        "tools/list" => {
            json!({"resultType": "complete", "tools": tools_list(), "ttlMs": 0, "cacheScope": "private"})
        }
        "tools/call" => {
            let mut r = echo_result(params);
            r["resultType"] = json!("complete");
            r
        }
        _ => {
            return rpc_reply(
                StatusCode::NOT_FOUND,
                &id,
                json!({"code": -32601, "message": "Method not found"}),
            )
        }
    };
    rpc_reply(StatusCode::OK, &id, result)
}

/// GET and DELETE do not exist in the stateless revision: recorded, then 405.
async fn not_allowed(State(st): State<Modern>, method: axum::http::Method) -> StatusCode {
    st.methods.lock().unwrap().push(method.to_string());
    StatusCode::METHOD_NOT_ALLOWED
}

#[tokio::test(flavor = "multi_thread")]
async fn stateless_server_is_detected_and_used_through_the_manager() -> Result<()> {
    let state = Modern::default();
    let app = Router::new()
        .route(
            "/mcp",
            post(modern_post).get(not_allowed).delete(not_allowed),
        )
        .with_state(state.clone());
    let port = serve(app).await?;
    let env = Env::new()?;
    env.write_user_config(
        &json!({"mcpServers": {"modern": {"url": format!("http://127.0.0.1:{port}/mcp")}}}),
    )?;
    let manager = env.manager();
    let tools = manager.tools(&env.project).await;
    let echo = support::find_tool(&tools, "mcp__modern__echo")?;
    assert!(echo.descriptor().read_only);
    let out = echo.call(&env.ctx(), json!({"message": "now"})).await;
    assert_eq!((out.content.as_str(), out.is_error), ("echo: now", false));

    let status = support::status_of(&manager, &env.project, "modern").await?;
    assert_eq!(status.state, ServerState::Connected);
    assert_eq!(status.protocol_version.as_deref(), Some(version::STATELESS));
    manager.shutdown().await;
    assert_eq!(*state.problems.lock().unwrap(), Vec::<String>::new());
    assert_eq!(
        *state.methods.lock().unwrap(),
        ["server/discover", "tools/list", "tools/call"]
    );
    Ok(())
}

// ---- Streamable HTTP with sessions that expire ---------------------------------------

#[derive(Clone, Default)]
struct Sessions {
    inner: Arc<Mutex<SessionLog>>,
}

#[derive(Default)]
struct SessionLog {
    issued: usize,
    current: Option<String>,
    expire_next_call: bool,
    events: Vec<String>,
}

async fn sessions_post(State(st): State<Sessions>, headers: HeaderMap, body: String) -> Response {
    let Ok(msg) = serde_json::from_str::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let method = msg["method"].as_str().unwrap_or("").to_string();
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let mut log = st.inner.lock().unwrap();
    match method.as_str() {
        // A legacy server's 400 with a body that is not a modern JSON-RPC error.
        "server/discover" => return (StatusCode::BAD_REQUEST, "no such thing").into_response(),
        "initialize" => {
            log.issued += 1;
            let sid = format!("s{}", log.issued);
            log.events.push(format!("initialize -> {sid}"));
            log.current = Some(sid.clone());
            let result = json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}});
            let mut resp = rpc_reply(StatusCode::OK, &id, result);
            resp.headers_mut()
                .insert("mcp-session-id", sid.parse().unwrap());
            return resp;
        }
        _ => {}
    }
    if header("mcp-session-id") != log.current || log.current.is_none() {
        log.events.push(format!(
            "{method}: unknown session {:?}",
            header("mcp-session-id")
        ));
        return StatusCode::NOT_FOUND.into_response();
    }
    if header("mcp-protocol-version").as_deref() != Some("2025-06-18") {
        log.events.push(format!("{method}: bad version header"));
    }
    if msg.get("id").is_none() {
        return StatusCode::ACCEPTED.into_response();
    }
    match method.as_str() {
        "tools/list" => rpc_reply(StatusCode::OK, &id, json!({"tools": tools_list()})),
        "tools/call" if log.expire_next_call => {
            log.expire_next_call = false;
            log.events.push("tools/call: session forgotten".into());
            log.current = None;
            StatusCode::NOT_FOUND.into_response()
        }
        "tools/call" => {
            log.events.push("tools/call".into());
            rpc_reply(StatusCode::OK, &id, echo_result(&msg["params"]))
        }
        _ => rpc_reply(StatusCode::OK, &id, json!({})),
    }
}

async fn sessions_delete(State(st): State<Sessions>, headers: HeaderMap) -> StatusCode {
    let sid = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    st.inner
        .lock()
        .unwrap()
        .events
        .push(format!("DELETE {sid}"));
    StatusCode::OK
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_session_is_reinitialized_and_the_call_retried() -> Result<()> {
    let state = Sessions::default();
    state.inner.lock().unwrap().expire_next_call = true;
    let app = Router::new()
        .route("/mcp", post(sessions_post).delete(sessions_delete))
        .with_state(state.clone());
    let port = serve(app).await?;
    let env = Env::new()?;
    env.write_user_config(&json!({"mcpServers": {"web": {"url": format!("http://127.0.0.1:{port}/mcp"), "type": "http"}}}))?;
    let manager = env.manager();
    let tools = manager.tools(&env.project).await;
    let echo = support::find_tool(&tools, "mcp__web__echo")?;
    let out = echo.call(&env.ctx(), json!({"message": "again"})).await;
    assert_eq!((out.content.as_str(), out.is_error), ("echo: again", false));
    let status = support::status_of(&manager, &env.project, "web").await?;
    assert_eq!(
        (status.state, status.transport),
        (ServerState::Connected, TransportKind::Http)
    );
    manager.shutdown().await;
    assert_eq!(
        state.inner.lock().unwrap().events,
        [
            "initialize -> s1",
            "tools/call: session forgotten",
            "initialize -> s2",
            "tools/call",
            "DELETE s2",
        ]
    );
    Ok(())
}
