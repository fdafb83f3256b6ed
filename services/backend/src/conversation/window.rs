//! A conversation's messages as the journal holds them, and its hot window
//! (docs/conversation-api.md#hot-window): the last `conversation_window` messages, kept in
//! the profile's [`WindowStore`](crate::hot_window::WindowStore) and brought up to date from
//! the journal before every run — incrementally from the seq it is current through, or
//! rebuilt from the start when the store does not have it (never built, expired, or Redis
//! lost it).

use lumina_protocol::methods::{Identity, SessionEventsParams, SessionEventsResult};
use lumina_protocol::{Event, EventFrame, Method};

use super::error::ApiError;
use super::session_call;
use crate::hot_window::{ConversationMessage, MessageRole, Window};
use crate::profile::AppState;

/// The journal's main stream: the visible conversation (sub-agents have their own).
pub const MAIN: &str = "main";

/// The message an event holds, if it is one: prompts, steering messages and answers with
/// text (an answer's tool calls and every tool payload stay out).
pub fn message_of(frame: &EventFrame) -> Option<ConversationMessage> {
    if frame.stream != MAIN {
        return None;
    }
    let (role, run_id, text) = match &frame.event {
        Event::MessageUser { run_id, text, .. } | Event::MessageSteering { run_id, text } => {
            (MessageRole::User, run_id, text)
        }
        Event::MessageAssistant { run_id, text, .. } if !text.is_empty() => {
            (MessageRole::Assistant, run_id, text)
        }
        _ => return None,
    };
    Some(ConversationMessage {
        id: frame.seq,
        role,
        text: text.clone(),
        run_id: run_id.clone(),
        created_at_ms: frame.ts_ms,
    })
}

/// A page of the journal's events after `after_seq` (through the profile: the store on any
/// instance in the cluster).
pub async fn events_after(
    state: &AppState,
    identity: &Identity,
    session_id: &str,
    after_seq: u64,
) -> Result<SessionEventsResult, ApiError> {
    session_call(
        state,
        identity,
        Method::SessionEvents,
        &SessionEventsParams {
            session_id: session_id.to_string(),
            after_seq,
            limit: Some(1000),
        },
    )
    .await
}

/// The conversation's hot window, brought up to date with the journal. Reading the journal
/// also checks that the conversation exists and belongs to the caller's tenant, so a cached
/// window is never served on its own.
pub async fn refresh(
    state: &AppState,
    identity: &Identity,
    session_id: &str,
) -> Result<Window, ApiError> {
    let config = &state.conversations;
    let name = format!("{}:{session_id}", identity.tenant);
    let cached = match config.windows.load(&name).await {
        Ok(cached) => cached,
        Err(error) => {
            tracing::warn!(session_id, error = %error, "hot window unreadable; rebuilding from the journal");
            None
        }
    };
    let expected = cached.as_ref().map(|w| w.through_seq);
    if expected.is_none() {
        tracing::debug!(
            session_id,
            "hot window missing; rebuilding from the journal"
        );
    }
    let mut window = cached.unwrap_or_default();
    let mut appended = Vec::new();
    loop {
        let page = events_after(state, identity, session_id, window.through_seq).await?;
        for frame in &page.events {
            if let Some(message) = message_of(frame) {
                appended.push(message);
            }
            window.through_seq = frame.seq;
        }
        // Only the last `window` messages can matter.
        let excess = appended.len().saturating_sub(config.window);
        appended.drain(..excess);
        if !page.more || page.events.is_empty() {
            break;
        }
    }
    let stored_through = expected.unwrap_or(0);
    if expected.is_none() || window.through_seq != stored_through {
        if let Err(error) = config
            .windows
            .save(
                &name,
                expected,
                window.through_seq,
                config.window,
                &appended,
            )
            .await
        {
            tracing::warn!(session_id, error = %error, "hot window not saved");
        }
    }
    window.messages.extend(appended);
    let excess = window.messages.len().saturating_sub(config.window);
    window.messages.drain(..excess);
    Ok(window)
}
