//! Method dispatch: one request frame → one response or error frame. The method table
//! (`lumina_protocol::Method`) says what scope a method needs and where it runs; the
//! connection answers `hello` and `session.resume` itself, the instance `admin.*`, and the
//! [`Profile`](crate::profile::Profile) everything else.

use std::sync::Arc;

use lumina_protocol::methods::*;
use lumina_protocol::{ClientFrame, ErrorCode, ErrorObject, Method, ServerFrame, PROTOCOL_VERSION};
use lumina_runtime::Outbound;
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::conn::Conn;
use crate::execute::{ok, parse, to_value, Reply};

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
    let Some(method) = Method::from_name(&frame.method) else {
        return Dispatched::Reply(Err(ErrorObject::new(
            ErrorCode::UnknownMethod,
            format!("unknown method `{}`", frame.method),
        )));
    };
    let scope = method.scope();
    if !scope.granted_by(&conn.identity.scopes) {
        return Dispatched::Reply(Err(ErrorObject::new(
            ErrorCode::Forbidden,
            format!("this token lacks the `{}` scope", scope.as_str()),
        )));
    }
    let profile = &conn.state.profile;
    let reply = match method {
        Method::Hello => hello(conn, frame.params),
        Method::SessionResume => match resume(conn, &frame.id, frame.params).await {
            Ok(()) => return Dispatched::Sent,
            Err(error) => Err(error),
        },
        Method::AdminShutdown => {
            profile.shutdown();
            ok(Ack { ok: true })
        }
        Method::AdminDrain => profile.drain().await.and_then(ok),
        Method::ConsoleTicket => match profile.console() {
            Some(console) => ok(console.mint_ticket()),
            None => Err(ErrorObject::new(
                ErrorCode::NotImplemented,
                "console tickets are for the local profile; the cluster console takes a JWT",
            )),
        },
        Method::AuditList => match crate::audit::check_tenant(&conn.identity, &frame.params) {
            Ok(()) => profile.call(&conn.identity, method, frame.params).await,
            Err(error) => Err(error),
        },
        Method::SessionSubmit => match conn.state.limits.submit(&conn.identity.tenant).await {
            Ok(()) => profile.call(&conn.identity, method, frame.params).await,
            Err(error) => Err(error),
        },
        Method::SessionCreate
        | Method::SessionList
        | Method::SessionInfo
        | Method::SessionEvents
        | Method::SessionInterrupt
        | Method::SessionArchive
        | Method::PermissionRespond
        | Method::GoalStart
        | Method::GoalPause
        | Method::GoalResume
        | Method::GoalCancel
        | Method::McpStatus
        | Method::McpTrust
        | Method::DelegateRetry
        | Method::TeamList
        | Method::TeamEnter
        | Method::TeamExit
        | Method::TeamCreate
        | Method::SkillList
        | Method::A2aPeers => profile.call(&conn.identity, method, frame.params).await,
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
        confinement: Some(lumina_sandbox::probe().clone()),
    })
}

/// Subscribes the connection: the response first, then events from `after_seq` on.
async fn resume(conn: &Arc<Conn>, id: &str, params: Value) -> Result<(), ErrorObject> {
    let p: SessionResumeParams = parse(params)?;
    let (result, rx) = conn.state.profile.subscribe(&conn.identity, &p).await?;
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
