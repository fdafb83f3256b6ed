//! Method dispatch: one request frame → one response or error frame. Connection-level
//! methods (`hello`, `session.resume`, `admin.*`) are handled here; session methods run on a
//! [`Runtime`] through [`execute`] — directly in the local profile, on the session's owner
//! (possibly over RPC) in the cluster profile. Runtime errors become protocol errors only in
//! `lumina_runtime::Error::to_error_object`.

use std::sync::Arc;

use lumina_protocol::methods::*;
use lumina_protocol::{ClientFrame, ErrorCode, ErrorObject, ServerFrame, PROTOCOL_VERSION};
use lumina_runtime::{Outbound, Runtime};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::server::Mode;
use crate::ws::Conn;

pub const READ: &str = "lumina:session:read";
pub const WRITE: &str = "lumina:session:write";
pub const ADMIN: &str = "lumina:admin";

pub type Reply = Result<Value, ErrorObject>;

/// The scope a method needs; `None` for methods this server does not know.
pub fn scope_for(method: &str) -> Option<&'static str> {
    match method {
        HELLO => Some(""),
        SESSION_LIST | SESSION_INFO | SESSION_RESUME | SESSION_EVENTS | MCP_STATUS => Some(READ),
        SESSION_CREATE | SESSION_SUBMIT | SESSION_INTERRUPT | SESSION_ARCHIVE
        | PERMISSION_RESPOND | GOAL_START | GOAL_PAUSE | GOAL_RESUME | GOAL_CANCEL | MCP_TRUST => {
            Some(WRITE)
        }
        ADMIN_DRAIN | ADMIN_SHUTDOWN => Some(ADMIN),
        _ => None,
    }
}

pub async fn handle(conn: Arc<Conn>, frame: ClientFrame) {
    let id = frame.id.clone();
    let method = frame.method.clone();
    let span = tracing::info_span!(
        "request",
        method = %method,
        instance_id = %conn.state.info.instance_id,
        session_id = tracing::field::Empty,
    );
    if let Some(session_id) = frame.params.get("session_id").and_then(|v| v.as_str()) {
        span.record("session_id", session_id);
    }
    let out = match dispatch(&conn, frame).instrument(span).await {
        Dispatched::Reply(Ok(result)) => ServerFrame::Response { id, result },
        Dispatched::Reply(Err(error)) => {
            tracing::debug!(%method, code = %error.code, "request failed");
            ServerFrame::Error {
                id: Some(id),
                error,
            }
        }
        Dispatched::Sent => return,
    };
    conn.send(out).await;
}

enum Dispatched {
    Reply(Reply),
    /// The handler already sent its response (it had to precede other frames).
    Sent,
}

async fn dispatch(conn: &Arc<Conn>, frame: ClientFrame) -> Dispatched {
    let Some(scope) = scope_for(&frame.method) else {
        return Dispatched::Reply(Err(ErrorObject::new(
            ErrorCode::UnknownMethod,
            format!("unknown method `{}`", frame.method),
        )));
    };
    if !scope.is_empty() && !conn.identity.scopes.iter().any(|s| s == scope) {
        return Dispatched::Reply(Err(ErrorObject::new(
            ErrorCode::Forbidden,
            format!("this token lacks the `{scope}` scope"),
        )));
    }
    let state = &conn.state;
    let reply = match frame.method.as_str() {
        HELLO => hello(conn, frame.params),
        SESSION_RESUME => match resume(conn, &frame.id, frame.params).await {
            Ok(()) => return Dispatched::Sent,
            Err(error) => Err(error),
        },
        ADMIN_SHUTDOWN => match &state.mode {
            Mode::Local { .. } => {
                state.shutdown.cancel();
                ok(Ack { ok: true })
            }
            Mode::Cluster(node) => {
                node.begin_shutdown();
                ok(Ack { ok: true })
            }
        },
        ADMIN_DRAIN => match &state.mode {
            Mode::Local { .. } => Err(ErrorObject::new(
                ErrorCode::NotImplemented,
                "drain applies to the cluster profile; use admin.shutdown locally",
            )),
            Mode::Cluster(node) => node.drain().await.and_then(ok),
        },
        method => match &state.mode {
            Mode::Local { runtime, .. } => {
                execute(
                    runtime,
                    &state.info.instance_id,
                    method,
                    frame.params,
                    state.shutdown.is_cancelled(),
                )
                .await
            }
            Mode::Cluster(node) => node.route(&conn.identity, method, frame.params).await,
        },
    };
    Dispatched::Reply(reply)
}

fn hello(conn: &Conn, params: Value) -> Reply {
    let p: HelloParams = parse(params)?;
    if !p.protocols.is_empty() && !p.protocols.contains(&PROTOCOL_VERSION) {
        return Err(ErrorObject::new(
            ErrorCode::UnsupportedVersion,
            format!("this server speaks protocol {PROTOCOL_VERSION} only"),
        ));
    }
    ok(HelloResult {
        protocol: PROTOCOL_VERSION,
        server: conn.state.info.clone(),
        identity: conn.identity.clone(),
    })
}

/// Subscribes the connection: the response first, then events from `after_seq` on.
async fn resume(conn: &Arc<Conn>, id: &str, params: Value) -> Result<(), ErrorObject> {
    let p: SessionResumeParams = parse(params)?;
    let (result, rx) = match &conn.state.mode {
        Mode::Local { runtime, .. } => {
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            // Subscribe before answering so nothing committed after the answer is missed.
            let rx = session.subscribe(p.after_seq);
            let info = session.info().await.map_err(rt)?;
            let result = SessionResumeResult {
                head_seq: info.head_seq,
                session: info,
                pending_permissions: session.pending_permissions().await,
            };
            (result, rx)
        }
        Mode::Cluster(node) => node.subscribe(&conn.identity, &p).await?,
    };
    conn.send(ServerFrame::Response {
        id: id.to_string(),
        result: to_value(result)?,
    })
    .await;
    let out = conn.out.clone();
    let task = tokio::spawn(forward(rx, out));
    conn.replace_subscription(&p.session_id, task);
    Ok(())
}

async fn forward(mut rx: mpsc::Receiver<Outbound>, out: mpsc::Sender<ServerFrame>) {
    while let Some(item) = rx.recv().await {
        let frame = match item {
            Outbound::Event(e) => ServerFrame::Event((*e).clone()),
            Outbound::Delta(d) => ServerFrame::Delta((*d).clone()),
        };
        if out.send(frame).await.is_err() {
            break;
        }
    }
}

/// Runs a session method on a runtime that may write the session (local, or the owner).
pub async fn execute(
    runtime: &Runtime,
    instance_id: &str,
    method: &str,
    params: Value,
    draining: bool,
) -> Reply {
    match method {
        SESSION_CREATE => {
            if draining {
                return Err(draining_error());
            }
            let p: SessionCreateParams = parse(params)?;
            let session = runtime.create_session(p).await.map_err(rt)?;
            ok(SessionResult { session })
        }
        SESSION_LIST => {
            let p: SessionListParams = parse(params)?;
            let sessions = runtime
                .list_sessions(p.include_archived)
                .await
                .map_err(rt)?;
            ok(SessionListResult { sessions })
        }
        SESSION_INFO => {
            let p: SessionRef = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(SessionInfoResult {
                session: session.info().await.map_err(rt)?,
                owner: instance_id.to_string(),
                fence: session.journal().fence(),
            })
        }
        SESSION_EVENTS => {
            let p: SessionEventsParams = parse(params)?;
            let limit = p.limit.unwrap_or(500).clamp(1, 1000) as usize;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            let mut events = session
                .journal()
                .read(p.after_seq, limit + 1)
                .await
                .map_err(rt)?;
            let more = events.len() > limit;
            events.truncate(limit);
            let head_seq = session.journal().with_projection(|p| p.head_seq).await;
            ok(SessionEventsResult {
                events,
                head_seq,
                more,
            })
        }
        SESSION_SUBMIT => {
            let p: SessionSubmitParams = parse(params)?;
            if draining {
                return Err(draining_error());
            }
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(session.submit(p).await.map_err(rt)?)
        }
        SESSION_INTERRUPT => {
            let p: SessionInterruptParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(SessionInterruptResult {
                interrupted: session.interrupt(p.run_id.as_deref()).await.map_err(rt)?,
            })
        }
        SESSION_ARCHIVE => {
            let p: SessionRef = parse(params)?;
            runtime.archive(&p.session_id).await.map_err(rt)?;
            ok(Ack { ok: true })
        }
        PERMISSION_RESPOND => {
            let p: PermissionRespondParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            session
                .respond_permission(&p.request_id, p.decision, p.reason)
                .map_err(rt)?;
            ok(Ack { ok: true })
        }
        GOAL_START => {
            let p: GoalStartParams = parse(params)?;
            if draining {
                return Err(draining_error());
            }
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(session.goal_start(p).await.map_err(rt)?)
        }
        GOAL_RESUME => {
            let p: GoalResumeParams = parse(params)?;
            if draining {
                return Err(draining_error());
            }
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(session.goal_resume(p).await.map_err(rt)?)
        }
        GOAL_PAUSE | GOAL_CANCEL => {
            let p: GoalRef = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            let result = if method == GOAL_PAUSE {
                session.goal_pause(p).await
            } else {
                session.goal_cancel(p).await
            };
            ok(result.map_err(rt)?)
        }
        MCP_STATUS => {
            let p: SessionRef = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(crate::mcp::status(&session).await)
        }
        MCP_TRUST => {
            let p: McpTrustParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            crate::mcp::trust(&session, &p.server)?;
            ok(Ack { ok: true })
        }
        other => Err(ErrorObject::new(
            ErrorCode::UnknownMethod,
            format!("unknown method `{other}`"),
        )),
    }
}

pub fn draining_error() -> ErrorObject {
    ErrorObject::new(
        ErrorCode::Draining,
        "the backend is draining or shutting down",
    )
}

pub fn ok<T: Serialize>(value: T) -> Reply {
    to_value(value)
}

pub fn to_value<T: Serialize>(value: T) -> Result<Value, ErrorObject> {
    serde_json::to_value(value)
        .map_err(|e| ErrorObject::new(ErrorCode::Internal, format!("encoding the result: {e}")))
}

pub fn parse<T: DeserializeOwned>(params: Value) -> Result<T, ErrorObject> {
    let params = if params.is_null() {
        Value::Object(Default::default())
    } else {
        params
    };
    serde_json::from_value(params)
        .map_err(|e| ErrorObject::new(ErrorCode::InvalidParams, format!("invalid params: {e}")))
}

pub fn rt(err: lumina_runtime::Error) -> ErrorObject {
    err.to_error_object()
}
