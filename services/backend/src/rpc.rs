//! Method dispatch: one request frame → one response or error frame. The only place where
//! runtime errors become protocol errors is `lumina_runtime::Error::to_error_object`.

use std::sync::Arc;

use lumina_protocol::methods::*;
use lumina_protocol::{ClientFrame, ErrorCode, ErrorObject, ServerFrame, PROTOCOL_VERSION};
use lumina_runtime::Outbound;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::ws::Conn;

const READ: &str = "lumina:session:read";
const WRITE: &str = "lumina:session:write";
const ADMIN: &str = "lumina:admin";

type Reply = Result<Value, ErrorObject>;

pub async fn handle(conn: Arc<Conn>, frame: ClientFrame) {
    let id = frame.id.clone();
    let method = frame.method.clone();
    let reply = dispatch(&conn, frame).await;
    let out = match reply {
        Ok(Dispatched::Reply(Ok(result))) => ServerFrame::Response { id, result },
        Ok(Dispatched::Reply(Err(error))) | Err(error) => {
            tracing::debug!(%method, code = %error.code, "request failed");
            ServerFrame::Error {
                id: Some(id),
                error,
            }
        }
        Ok(Dispatched::Sent) => return,
    };
    conn.send(out).await;
}

enum Dispatched {
    Reply(Reply),
    /// The handler already sent its response (it had to precede other frames).
    Sent,
}

async fn dispatch(conn: &Arc<Conn>, frame: ClientFrame) -> Result<Dispatched, ErrorObject> {
    let runtime = &conn.state.runtime;
    let params = frame.params;
    let reply = match frame.method.as_str() {
        HELLO => {
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
        SESSION_CREATE => {
            need(conn, WRITE)?;
            let p: SessionCreateParams = parse(params)?;
            let session = runtime.create_session(p).await.map_err(rt)?;
            ok(SessionResult { session })
        }
        SESSION_LIST => {
            need(conn, READ)?;
            let p: SessionListParams = parse(params)?;
            let sessions = runtime
                .list_sessions(p.include_archived)
                .await
                .map_err(rt)?;
            ok(SessionListResult { sessions })
        }
        SESSION_INFO => {
            need(conn, READ)?;
            let p: SessionRef = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(SessionInfoResult {
                session: session.info().await.map_err(rt)?,
                owner: conn.state.info.instance_id.clone(),
                fence: session.journal().fence(),
            })
        }
        SESSION_RESUME => {
            need(conn, READ)?;
            let p: SessionResumeParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            // Subscribe before answering so nothing committed after the answer is missed.
            let mut rx = session.subscribe(p.after_seq);
            let info = session.info().await.map_err(rt)?;
            let result = SessionResumeResult {
                head_seq: info.head_seq,
                session: info,
                pending_permissions: session.pending_permissions().await,
            };
            conn.send(ServerFrame::Response {
                id: frame.id.clone(),
                result: to_value(result)?,
            })
            .await;
            let out = conn.out.clone();
            let task = tokio::spawn(async move {
                while let Some(item) = rx.recv().await {
                    let frame = match item {
                        Outbound::Event(e) => ServerFrame::Event((*e).clone()),
                        Outbound::Delta(d) => ServerFrame::Delta((*d).clone()),
                    };
                    if out.send(frame).await.is_err() {
                        break;
                    }
                }
            });
            conn.replace_subscription(&p.session_id, task);
            return Ok(Dispatched::Sent);
        }
        SESSION_EVENTS => {
            need(conn, READ)?;
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
            need(conn, WRITE)?;
            let p: SessionSubmitParams = parse(params)?;
            if conn.state.shutdown.is_cancelled() {
                return Err(ErrorObject::new(
                    ErrorCode::Draining,
                    "the backend is shutting down",
                ));
            }
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(session.submit(p).await.map_err(rt)?)
        }
        SESSION_INTERRUPT => {
            need(conn, WRITE)?;
            let p: SessionInterruptParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(SessionInterruptResult {
                interrupted: session.interrupt(p.run_id.as_deref()),
            })
        }
        SESSION_ARCHIVE => {
            need(conn, WRITE)?;
            let p: SessionRef = parse(params)?;
            runtime.archive(&p.session_id).await.map_err(rt)?;
            ok(Ack { ok: true })
        }
        PERMISSION_RESPOND => {
            need(conn, WRITE)?;
            let p: PermissionRespondParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            session
                .respond_permission(&p.request_id, p.decision, p.reason)
                .map_err(rt)?;
            ok(Ack { ok: true })
        }
        ADMIN_SHUTDOWN => {
            need(conn, ADMIN)?;
            conn.state.shutdown.cancel();
            ok(Ack { ok: true })
        }
        ADMIN_DRAIN => {
            need(conn, ADMIN)?;
            Err(ErrorObject::new(
                ErrorCode::NotImplemented,
                "drain applies to the cluster profile; use admin.shutdown locally",
            ))
        }
        other => Err(ErrorObject::new(
            ErrorCode::UnknownMethod,
            format!("unknown method `{other}`"),
        )),
    };
    Ok(Dispatched::Reply(reply))
}

fn ok<T: Serialize>(value: T) -> Reply {
    to_value(value)
}

fn to_value<T: Serialize>(value: T) -> Result<Value, ErrorObject> {
    serde_json::to_value(value)
        .map_err(|e| ErrorObject::new(ErrorCode::Internal, format!("encoding the result: {e}")))
}

fn parse<T: DeserializeOwned>(params: Value) -> Result<T, ErrorObject> {
    let params = if params.is_null() {
        Value::Object(Default::default())
    } else {
        params
    };
    serde_json::from_value(params)
        .map_err(|e| ErrorObject::new(ErrorCode::InvalidParams, format!("invalid params: {e}")))
}

fn need(conn: &Conn, scope: &str) -> Result<(), ErrorObject> {
    if conn.identity.scopes.iter().any(|s| s == scope) {
        Ok(())
    } else {
        Err(ErrorObject::new(
            ErrorCode::Forbidden,
            format!("this token lacks the `{scope}` scope"),
        ))
    }
}

fn rt(err: lumina_runtime::Error) -> ErrorObject {
    err.to_error_object()
}
