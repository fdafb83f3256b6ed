//! Execution: `POST /api/v1/agents/{agentId}/execute[/sync|/stream]` submit the task to the
//! conversation's session (`session.submit` through the profile, with the hot window as the
//! run's history), and `GET /api/v1/conversations/{id}/stream` resumes a stream after an
//! event id. A client that goes away stops only its subscription: the run goes on and is
//! journaled.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::path::Path as FsPath;
use std::sync::Arc;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::Stream;
use lumina_protocol::methods::{
    Ack, Identity, SessionCreateParams, SessionInfoResult, SessionRef, SessionResult,
    SessionResumeParams, SessionSubmitParams, SessionSubmitResult, TeamEnterParams,
    TeamEnterResult,
};
use lumina_protocol::{ErrorCode, Method, SessionStatus};
use lumina_runtime::Outbound;
use lumina_skills::SkillCatalog;
use tokio::sync::mpsc;

use super::error::{ApiError, ErrorBody};
use super::replay::{Cursor, Out, Replay};
use super::types::{ExecuteAccepted, ExecuteQuery, ExecuteResult, StreamEventData, StreamQuery};
use super::{caller, conversation_id, session_call, window};
use crate::limits::ConnectionPermit;
use crate::profile::AppState;

/// The agent every deployment has: the session's own agent loop.
pub const DEFAULT_AGENT: &str = "default";

/// Names the conversation an execute stream runs in (also in its first event).
pub const CONVERSATION_HEADER: &str = "lumina-conversation-id";

/// Resolves an `agentId` for a conversation: `None` for the default agent and for a team
/// (the conversation's session enters the team, `team.enter`, so its runs are the team
/// leader's from then on), the skill's name for a skill (its task is invoked as `/skill`).
pub async fn apply_agent(
    state: &AppState,
    identity: &Identity,
    agent: &str,
    conversation_id: &str,
    project_root: &str,
) -> Result<Option<String>, ApiError> {
    if agent == DEFAULT_AGENT {
        return Ok(None);
    }
    let config = &state.conversations;
    let skills = SkillCatalog::discover(
        FsPath::new(project_root),
        &config.user_skills_dir,
        &config.builtin_skills_dir,
    );
    if skills.get(agent).is_some() {
        return Ok(Some(agent.to_string()));
    }
    let entered: Result<TeamEnterResult, ApiError> = session_call(
        state,
        identity,
        Method::TeamEnter,
        &TeamEnterParams {
            session_id: conversation_id.to_string(),
            team: agent.to_string(),
        },
    )
    .await;
    match entered {
        Ok(_) => Ok(None),
        Err(error) if error.0.code == ErrorCode::NotFound => Err(ApiError::not_found(format!(
            "no agent `{}` (use `default`, a skill or a team name)",
            agent.chars().take(64).collect::<String>()
        ))),
        Err(error) => Err(error),
    }
}

/// A checked execute request, its conversation resolved (created when none was named).
struct Prepared {
    identity: Identity,
    conversation_id: String,
    prompt: String,
    window: crate::hot_window::Window,
}

async fn prepare(
    state: &AppState,
    headers: &HeaderMap,
    agent: Result<Path<String>, PathRejection>,
    query: Result<Query<ExecuteQuery>, QueryRejection>,
) -> Result<Prepared, ApiError> {
    let identity = caller(state, headers, Method::SessionSubmit.scope()).await?;
    let Path(agent) = agent.map_err(|e| ApiError::invalid(e.body_text()))?;
    let Query(query) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    let task = query
        .task
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("missing `task`"))?;
    let (conversation_id, project_root, created) = match query.conversation_id.as_deref() {
        Some(id) => {
            let id = conversation_id(id)?;
            let info: SessionInfoResult = session_call(
                state,
                &identity,
                Method::SessionInfo,
                &SessionRef {
                    session_id: id.clone(),
                },
            )
            .await?;
            if info.session.status == SessionStatus::Archived {
                return Err(ApiError::not_found(format!(
                    "conversation `{id}` is archived"
                )));
            }
            (id, info.session.project_root, false)
        }
        None => {
            let created: SessionResult = session_call(
                state,
                &identity,
                Method::SessionCreate,
                &SessionCreateParams::default(),
            )
            .await?;
            (created.session.id, created.session.project_root, true)
        }
    };
    let skill = match apply_agent(state, &identity, &agent, &conversation_id, &project_root).await {
        Ok(skill) => skill,
        Err(error) => {
            if created {
                let _: Result<Ack, _> = session_call(
                    state,
                    &identity,
                    Method::SessionArchive,
                    &SessionRef {
                        session_id: conversation_id.clone(),
                    },
                )
                .await;
            }
            return Err(error);
        }
    };
    let window = window::refresh(state, &identity, &conversation_id).await?;
    let prompt = match skill {
        Some(name) => format!("/{name} {task}"),
        None => task,
    };
    Ok(Prepared {
        identity,
        conversation_id,
        prompt,
        window,
    })
}

/// Submits the prepared task; the run's history is the hot window (and Memory Fabric
/// recall, which the runtime adds).
async fn submit(
    state: &AppState,
    headers: &HeaderMap,
    prepared: &Prepared,
) -> Result<SessionSubmitResult, ApiError> {
    state.limits.submit(&prepared.identity.tenant).await?;
    let idempotency_key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 200)
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let from_seq = prepared.window.messages.first().map_or(0, |m| m.id);
    session_call(
        state,
        &prepared.identity,
        Method::SessionSubmit,
        &SessionSubmitParams {
            session_id: prepared.conversation_id.clone(),
            idempotency_key,
            prompt: prepared.prompt.clone(),
            settings: serde_json::json!({
                lumina_runtime::settings::HISTORY_FROM_SEQ: from_seq
            }),
            headless: true,
            mode: None,
        },
    )
    .await
}

/// Subscribes to the conversation after `after_seq`: the head then, whether a run was open,
/// and the events.
async fn subscribe(
    state: &AppState,
    identity: &Identity,
    session_id: &str,
    after_seq: u64,
) -> Result<(u64, Option<String>, mpsc::Receiver<Outbound>), ApiError> {
    let (resumed, rx) = state
        .profile
        .subscribe(
            identity,
            &SessionResumeParams {
                session_id: session_id.to_string(),
                after_seq,
            },
        )
        .await?;
    let running = match (&resumed.session.status, &resumed.session.last_run) {
        (SessionStatus::Running, Some(run)) => Some(run.run_id.clone()),
        _ => None,
    };
    Ok((resumed.head_seq, running, rx))
}

/// Subscribes, then submits, so every event and delta of the run is seen. A retried
/// request (same `Idempotency-Key`) gets the original run, which may have started — or
/// ended — before the new subscription's start: it is followed from the beginning.
async fn subscribe_and_submit(
    state: &AppState,
    headers: &HeaderMap,
    prepared: &Prepared,
) -> Result<(Replay, SessionSubmitResult, mpsc::Receiver<Outbound>), ApiError> {
    let id = &prepared.conversation_id;
    let identity = &prepared.identity;
    let (head, _, rx) = subscribe(state, identity, id, prepared.window.through_seq).await?;
    let submitted = submit(state, headers, prepared).await?;
    let only = Some(submitted.run_id.clone());
    if submitted.created {
        let replay = Replay::new(Cursor::Seq(head), head, None, only);
        return Ok((replay, submitted, rx));
    }
    drop(rx);
    let (head, _, rx) = subscribe(state, identity, id, 0).await?;
    Ok((Replay::new(Cursor::Seq(0), head, None, only), submitted, rx))
}

/// Starts a run and answers at once.
#[utoipa::path(post, path = "/api/v1/agents/{agentId}/execute",
    params(("agentId" = String, Path, description = "`default`, a skill name or a team name"), ExecuteQuery),
    responses((status = 202, body = ExecuteAccepted), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn execute(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    agent: Result<Path<String>, PathRejection>,
    query: Result<Query<ExecuteQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let prepared = prepare(&state, &headers, agent, query).await?;
    let submitted = submit(&state, &headers, &prepared).await?;
    let accepted = ExecuteAccepted {
        conversation_id: prepared.conversation_id,
        run_id: submitted.run_id,
        event_id: prepared.window.through_seq.to_string(),
    };
    Ok((StatusCode::ACCEPTED, Json(accepted)).into_response())
}

/// Runs to the end and answers with the result.
#[utoipa::path(post, path = "/api/v1/agents/{agentId}/execute/sync",
    params(("agentId" = String, Path, description = "`default`, a skill name or a team name"), ExecuteQuery),
    responses((status = 200, body = ExecuteResult), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn sync(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    agent: Result<Path<String>, PathRejection>,
    query: Result<Query<ExecuteQuery>, QueryRejection>,
) -> Result<Json<ExecuteResult>, ApiError> {
    let prepared = prepare(&state, &headers, agent, query).await?;
    let id = &prepared.conversation_id;
    let (mut replay, _, mut rx) = subscribe_and_submit(&state, &headers, &prepared).await?;
    let mut out = Vec::new();
    while let Some(item) = rx.recv().await {
        match item {
            Outbound::Event(frame) => replay.event(&frame, &mut out),
            Outbound::Delta(_) => continue,
        }
        for item in out.drain(..) {
            let result = match item {
                Out::Chunk { .. } => continue,
                Out::Done {
                    run_id,
                    message_id,
                    answer,
                    ..
                } => ExecuteResult {
                    conversation_id: id.clone(),
                    run_id,
                    status: "completed".into(),
                    answer: Some(answer),
                    message_id,
                    error: None,
                },
                Out::Failed {
                    run_id,
                    status,
                    error,
                    ..
                } => ExecuteResult {
                    conversation_id: id.clone(),
                    run_id,
                    status: status.into(),
                    answer: None,
                    message_id: None,
                    error: Some(error),
                },
            };
            return Ok(Json(result));
        }
    }
    Err(ApiError::new(
        lumina_protocol::ErrorCode::Unavailable,
        "the conversation's event stream ended before the run did; its result will be in /messages",
    ))
}

/// Runs and streams the answer as Server-Sent Events.
#[utoipa::path(post, path = "/api/v1/agents/{agentId}/execute/stream",
    params(("agentId" = String, Path, description = "`default`, a skill name or a team name"), ExecuteQuery),
    responses((status = 200, content_type = "text/event-stream", body = StreamEventData,
            description = "`data:` events with an `id:` each: the conversation, chunks, then done or error"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn stream(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    agent: Result<Path<String>, PathRejection>,
    query: Result<Query<ExecuteQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let prepared = prepare(&state, &headers, agent, query).await?;
    let permit = state.limits.connect(&prepared.identity.tenant)?;
    let id = prepared.conversation_id.clone();
    let (replay, submitted, rx) = subscribe_and_submit(&state, &headers, &prepared).await?;
    let head = replay.start();
    let first = StreamEventData {
        conversation_id: Some(id.clone()),
        run_id: Some(submitted.run_id),
        chunk: None,
        done: None,
        message_id: None,
        error: None,
    };
    let first = sse_event(head, &first);
    let mut response = sse(&state, permit, Some(first), replay, rx).into_response();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(CONVERSATION_HEADER, value);
    }
    Ok(response)
}

/// The conversation's events after an event id (`Last-Event-ID`, or `?after=`; without
/// either, from now): the rest of an answer a client lost, or its final answer.
#[utoipa::path(get, path = "/api/v1/conversations/{id}/stream",
    params(("id" = String, Path, description = "conversation id"), StreamQuery,
        ("Last-Event-ID" = Option<String>, Header, description = "resume after this event id")),
    responses((status = 200, content_type = "text/event-stream", body = StreamEventData),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn resume(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<Query<StreamQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let identity = caller(&state, &headers, Method::SessionResume.scope()).await?;
    let id = conversation_id(&id)?;
    let Query(query) = query.map_err(|e| ApiError::invalid(e.body_text()))?;
    let header = headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .map_err(|_| ApiError::invalid("`Last-Event-ID` is not an event id"))
        })
        .transpose()?;
    let cursor = match header.or(query.after.as_deref()) {
        Some(id) => Cursor::parse(id)?,
        None => {
            let info: SessionInfoResult = session_call(
                &state,
                &identity,
                Method::SessionInfo,
                &SessionRef {
                    session_id: id.clone(),
                },
            )
            .await?;
            Cursor::Seq(info.session.head_seq)
        }
    };
    let permit = state.limits.connect(&identity.tenant)?;
    let (head, running, rx) = subscribe(&state, &identity, &id, cursor.seq()).await?;
    let mut replay = Replay::new(cursor, head, running, None);
    replay.check_idle(cursor);
    Ok(sse(&state, permit, None, replay, rx).into_response())
}

fn sse_event(id: Cursor, data: &StreamEventData) -> SseEvent {
    let json = serde_json::to_string(data).unwrap_or_else(|_| "{}".into());
    SseEvent::default().id(id.to_string()).data(json)
}

fn to_sse(out: Out) -> SseEvent {
    let mut data = StreamEventData {
        conversation_id: None,
        run_id: None,
        chunk: None,
        done: None,
        message_id: None,
        error: None,
    };
    let id = match out {
        Out::Chunk { id, text } => {
            data.chunk = Some(text);
            id
        }
        Out::Done {
            id,
            run_id,
            message_id,
            ..
        } => {
            data.done = Some(true);
            data.message_id = message_id;
            data.run_id = Some(run_id);
            id
        }
        Out::Failed {
            id, run_id, error, ..
        } => {
            data.error = Some(error);
            data.run_id = Some(run_id);
            id
        }
    };
    sse_event(id, &data)
}

struct Streaming {
    /// An open stream counts as one of the tenant's connections.
    _permit: ConnectionPermit,
    queue: VecDeque<SseEvent>,
    replay: Replay,
    rx: mpsc::Receiver<Outbound>,
}

fn sse(
    state: &AppState,
    permit: ConnectionPermit,
    first: Option<SseEvent>,
    replay: Replay,
    rx: mpsc::Receiver<Outbound>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let streaming = Streaming {
        _permit: permit,
        queue: first.into_iter().collect(),
        replay,
        rx,
    };
    let events = futures::stream::unfold(streaming, |mut s| async move {
        loop {
            if let Some(event) = s.queue.pop_front() {
                return Some((Ok(event), s));
            }
            if s.replay.finished() {
                return None;
            }
            let mut out = Vec::new();
            match s.rx.recv().await? {
                Outbound::Event(frame) => s.replay.event(&frame, &mut out),
                Outbound::Delta(delta) => s.replay.delta(&delta, &mut out),
            }
            s.queue.extend(out.into_iter().map(to_sse));
        }
    });
    Sse::new(events).keep_alive(
        KeepAlive::new()
            .interval(state.conversations.heartbeat)
            .text("keep-alive"),
    )
}
