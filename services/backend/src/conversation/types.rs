//! The Conversation API's request and response bodies (camelCase JSON; the OpenAPI document
//! is generated from these types).

use lumina_protocol::methods::SessionInfo;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

pub use crate::hot_window::{ConversationMessage, MessageRole};

/// `POST /api/v1/conversations`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateConversation {
    /// Shown in lists; defaults to the first prompt.
    #[serde(default)]
    pub title: Option<String>,
    /// Checked like an execute request's `agentId` (`default` or a skill name); not stored:
    /// every execute request names its agent.
    #[serde(default)]
    pub agent: Option<String>,
}

/// A conversation: a Lumina session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    /// The session's UUID.
    pub id: String,
    pub title: String,
    /// `idle`, `running` or `archived`.
    pub status: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// The journal's last seq: the `id` of the conversation's latest event.
    pub head_seq: u64,
}

impl From<SessionInfo> for Conversation {
    fn from(info: SessionInfo) -> Self {
        Conversation {
            id: info.id,
            title: info.title,
            status: info.status.as_str().to_string(),
            created_at_ms: info.created_at_ms,
            updated_at_ms: info.updated_at_ms,
            head_seq: info.head_seq,
        }
    }
}

/// `GET /api/v1/conversations`: a page, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationPage {
    pub conversations: Vec<Conversation>,
    /// Pass as `cursor` for the next page; absent on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `GET /api/v1/conversations/{id}/messages`: a page, oldest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessagePage {
    pub messages: Vec<ConversationMessage>,
    /// Pass as `cursor` for the next page; absent on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<u64>,
}

/// Paging of lists.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Items per page (1–200, default 50).
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `nextCursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// An execute request (query string).
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query, rename_all = "camelCase")]
pub struct ExecuteQuery {
    /// The user's message.
    #[serde(default)]
    pub task: Option<String>,
    /// The conversation to continue; a new one is created without it.
    #[serde(default)]
    pub conversation_id: Option<String>,
}

/// `GET /api/v1/conversations/{id}/stream`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// Resume after this event id (like the `Last-Event-ID` header, which wins).
    #[serde(default)]
    pub after: Option<String>,
}

/// `POST …/execute`: the run started (or queued behind the conversation's active run).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteAccepted {
    pub conversation_id: String,
    pub run_id: String,
    /// Resume `GET /conversations/{id}/stream` after this id to follow the run.
    pub event_id: String,
}

/// `POST …/execute/sync`: how the run ended.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteResult {
    pub conversation_id: String,
    pub run_id: String,
    /// `completed`, `failed` or `interrupted`.
    pub status: String,
    /// The final answer (completed runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The `id` of the answer in `/messages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<u64>,
    /// Why the run did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::conversation::error::ErrorDetail>,
}

/// The `data` of the SSE events (one of these shapes per event).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamEventData {
    /// First event of an execute stream: the conversation (created when none was given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Answer text, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<String>,
    /// The run ended; `messageId` names its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<u64>,
    /// The run failed or was interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::conversation::error::ErrorDetail>,
}
