//! Conversations: create (`session.create`), list (`session.list`), page messages
//! (`session.events`), archive (`session.archive`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use lumina_protocol::methods::{
    Ack, SessionCreateParams, SessionListParams, SessionListResult, SessionRef, SessionResult,
};
use lumina_protocol::Method;

use super::error::{ApiError, ErrorBody};
use super::execute::apply_agent;
use super::types::{Conversation, ConversationPage, CreateConversation, ListQuery, MessagePage};
use super::window::{events_after, message_of};
use super::{caller, conversation_id, session_call};
use crate::profile::AppState;

const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 200;

fn page_size(limit: Option<u32>) -> usize {
    limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE) as usize
}

/// Creates a conversation.
#[utoipa::path(post, path = "/api/v1/conversations", request_body = CreateConversation,
    responses((status = 201, body = Conversation), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let identity = caller(&state, &headers, Method::SessionCreate.scope()).await?;
    let body: CreateConversation = if body.iter().all(u8::is_ascii_whitespace) {
        CreateConversation::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid(format!("invalid body: {e}")))?
    };
    let created: SessionResult = session_call(
        &state,
        &identity,
        Method::SessionCreate,
        &SessionCreateParams {
            project_root: None,
            title: body.title.filter(|t| !t.trim().is_empty()),
        },
    )
    .await?;
    if let Some(agent) = body.agent.as_deref() {
        let applied = apply_agent(
            &state,
            &identity,
            agent,
            &created.session.id,
            &created.session.project_root,
        )
        .await;
        if let Err(error) = applied {
            // Leave no conversation behind for a refused request.
            let _: Result<Ack, _> = session_call(
                &state,
                &identity,
                Method::SessionArchive,
                &SessionRef {
                    session_id: created.session.id.clone(),
                },
            )
            .await;
            return Err(error);
        }
    }
    Ok((
        StatusCode::CREATED,
        Json(Conversation::from(created.session)),
    )
        .into_response())
}

/// Lists the caller's conversations, newest first.
#[utoipa::path(get, path = "/api/v1/conversations", params(ListQuery),
    responses((status = 200, body = ConversationPage), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Result<Json<ConversationPage>, ApiError> {
    let identity = caller(&state, &headers, Method::SessionList.scope()).await?;
    let after = query.cursor.as_deref().map(parse_list_cursor).transpose()?;
    let listed: SessionListResult = session_call(
        &state,
        &identity,
        Method::SessionList,
        &SessionListParams {
            include_archived: false,
        },
    )
    .await?;
    let mut sessions = listed.sessions;
    // Newest first; the id breaks ties so the order (and the cursor) is total.
    sessions.sort_by(|a, b| (b.created_at_ms, &b.id).cmp(&(a.created_at_ms, &a.id)));
    let limit = page_size(query.limit);
    let mut page: Vec<Conversation> = sessions
        .into_iter()
        .filter(|s| {
            after
                .as_ref()
                .is_none_or(|(ms, id)| (s.created_at_ms, &s.id) < (*ms, id))
        })
        .take(limit + 1)
        .map(Conversation::from)
        .collect();
    let more = page.len() > limit;
    page.truncate(limit);
    let next_cursor = match page.last() {
        Some(last) if more => Some(format!("{}_{}", last.created_at_ms, last.id)),
        _ => None,
    };
    Ok(Json(ConversationPage {
        conversations: page,
        next_cursor,
    }))
}

fn parse_list_cursor(cursor: &str) -> Result<(i64, String), ApiError> {
    cursor
        .split_once('_')
        .and_then(|(ms, id)| Some((ms.parse().ok()?, id.to_string())))
        .ok_or_else(|| ApiError::invalid("`cursor` is not a cursor of this list"))
}

/// A page of a conversation's messages, oldest first.
#[utoipa::path(get, path = "/api/v1/conversations/{id}/messages",
    params(("id" = String, Path, description = "conversation id"), ListQuery),
    responses((status = 200, body = MessagePage), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn messages(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<Json<MessagePage>, ApiError> {
    let identity = caller(&state, &headers, Method::SessionEvents.scope()).await?;
    let id = conversation_id(&id)?;
    let mut after = match query.cursor.as_deref() {
        None | Some("") => 0,
        Some(cursor) => cursor
            .parse()
            .map_err(|_| ApiError::invalid("`cursor` is not a message id"))?,
    };
    let limit = page_size(query.limit);
    let mut messages = Vec::new();
    let mut more = false;
    'pages: loop {
        let page = events_after(&state, &identity, &id, after).await?;
        for frame in &page.events {
            if let Some(message) = message_of(frame) {
                if messages.len() == limit {
                    more = true;
                    break 'pages;
                }
                messages.push(message);
            }
            after = frame.seq;
        }
        if !page.more || page.events.is_empty() {
            break;
        }
    }
    let next_cursor = if more {
        messages.last().map(|m| m.id)
    } else {
        None
    };
    Ok(Json(MessagePage {
        messages,
        next_cursor,
    }))
}

/// Archives a conversation (idle only: an active run answers `conflict`).
#[utoipa::path(delete, path = "/api/v1/conversations/{id}",
    params(("id" = String, Path, description = "conversation id")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn archive(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let identity = caller(&state, &headers, Method::SessionArchive.scope()).await?;
    let id = conversation_id(&id)?;
    let _: Ack = session_call(
        &state,
        &identity,
        Method::SessionArchive,
        &SessionRef { session_id: id },
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
