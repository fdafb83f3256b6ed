//! Session methods on a [`Runtime`] that may write the session: the local profile's, or the
//! owner's in the cluster. The `match` on [`Method`] has no wildcard: a method added to the
//! protocol's table does not build until it is handled here (or by the connection). Runtime
//! errors become protocol errors only in `lumina_runtime::Error::to_error_object`.

use lumina_protocol::methods::*;
use lumina_protocol::{ErrorCode, ErrorObject, Method};
use lumina_runtime::Runtime;

use crate::limits::TenantLimits;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

pub type Reply = Result<Value, ErrorObject>;

/// The instance a method runs on, as the handlers need it.
#[derive(Clone, Copy)]
pub struct Owner<'a> {
    pub instance_id: &'a str,
    /// Draining (or shutting down): no new sessions, runs or goals.
    pub draining: bool,
    /// The per-tenant run limit applies here, where runs start.
    pub limits: &'a TenantLimits,
    /// The subject (`sub`) of the identity the method runs for, when known here: a
    /// `permission.respond` records it in the approvals audit (docs/audit.md).
    pub caller_sub: Option<&'a str>,
}

/// Runs a session method on a runtime that may write the session (local, or the owner).
pub async fn execute(runtime: &Runtime, owner: &Owner<'_>, method: Method, params: Value) -> Reply {
    let Owner {
        instance_id,
        draining,
        limits,
        caller_sub,
    } = *owner;
    match method {
        Method::SessionCreate => {
            if draining {
                return Err(draining_error());
            }
            let p: SessionCreateParams = parse(params)?;
            let session = runtime.create_session(p).await.map_err(rt)?;
            ok(SessionResult { session })
        }
        Method::SessionList => {
            let p: SessionListParams = parse(params)?;
            let sessions = runtime
                .list_sessions(p.include_archived)
                .await
                .map_err(rt)?;
            ok(SessionListResult { sessions })
        }
        Method::SessionInfo => {
            let p: SessionRef = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(SessionInfoResult {
                session: session.info().await.map_err(rt)?,
                owner: instance_id.to_string(),
                fence: session.journal().fence(),
            })
        }
        Method::SessionEvents => {
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
        Method::SessionSubmit => {
            let p: SessionSubmitParams = parse(params)?;
            if draining {
                return Err(draining_error());
            }
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            // A retry of an accepted submit starts nothing, so no limit applies to it.
            if !session.is_running() && !session.is_retry(&p.idempotency_key).await.map_err(rt)? {
                limits.start_run(runtime.running_sessions().await)?;
            }
            ok(session.submit(p).await.map_err(rt)?)
        }
        Method::SessionInterrupt => {
            let p: SessionInterruptParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(SessionInterruptResult {
                interrupted: session.interrupt(p.run_id.as_deref()).await.map_err(rt)?,
            })
        }
        Method::SessionArchive => {
            let p: SessionRef = parse(params)?;
            runtime.archive(&p.session_id).await.map_err(rt)?;
            ok(Ack { ok: true })
        }
        Method::PermissionRespond => {
            let p: PermissionRespondParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            session
                .respond_permission(
                    &p.request_id,
                    p.decision,
                    p.reason,
                    caller_sub.map(str::to_owned),
                )
                .map_err(rt)?;
            ok(Ack { ok: true })
        }
        Method::GoalStart => {
            let p: GoalStartParams = parse(params)?;
            if draining {
                return Err(draining_error());
            }
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(session.goal_start(p).await.map_err(rt)?)
        }
        Method::GoalResume => {
            let p: GoalResumeParams = parse(params)?;
            if draining {
                return Err(draining_error());
            }
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(session.goal_resume(p).await.map_err(rt)?)
        }
        Method::GoalPause | Method::GoalCancel => {
            let p: GoalRef = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            let result = if method == Method::GoalPause {
                session.goal_pause(p).await
            } else {
                session.goal_cancel(p).await
            };
            ok(result.map_err(rt)?)
        }
        Method::McpStatus => {
            let p: SessionRef = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(crate::mcp::status(&session).await)
        }
        Method::DelegateRetry => {
            let p: DelegateRetryParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(session.retry_delegate(&p.call_id).await.map_err(rt)?)
        }
        Method::McpTrust => {
            let p: McpTrustParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            crate::mcp::trust(&session, &p.server)?;
            ok(Ack { ok: true })
        }
        Method::TeamList => {
            let p: TeamListParams = parse(params)?;
            ok(runtime
                .list_teams(p.session_id.as_deref(), p.project_root.as_deref())
                .await
                .map_err(rt)?)
        }
        Method::SkillList => {
            let p: SkillListParams = parse(params)?;
            ok(runtime
                .list_skills(p.session_id.as_deref(), p.project_root.as_deref())
                .await
                .map_err(rt)?)
        }
        Method::TeamCreate => {
            let p: TeamCreateParams = parse(params)?;
            ok(runtime.create_team(&p).map_err(rt)?)
        }
        Method::TeamEnter => {
            let p: TeamEnterParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(session.team_enter(&p.team).await.map_err(rt)?)
        }
        Method::TeamExit => {
            let p: TeamExitParams = parse(params)?;
            let session = runtime.session(&p.session_id).await.map_err(rt)?;
            ok(session.team_exit().await.map_err(rt)?)
        }
        Method::A2aPeers => ok(crate::peers::list(runtime, parse(params)?).await?),
        Method::AuditList => {
            let p: AuditListParams = parse(params)?;
            ok(crate::audit::list(&**runtime.store(), runtime.tenant(), p).await?)
        }
        // Answered by the connection or the instance before a runtime is involved.
        Method::Hello
        | Method::SessionResume
        | Method::AdminShutdown
        | Method::AdminDrain
        | Method::ConsoleTicket => Err(ErrorObject::new(
            ErrorCode::Internal,
            format!("`{method}` is not a session method"),
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
