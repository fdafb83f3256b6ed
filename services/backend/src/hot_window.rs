//! Where conversations' hot windows live (docs/conversation-api.md#hot-window): in process
//! for the local profile, in Redis for the cluster (`cluster/hot.rs`). Either is a cache of
//! the journal, which stays the only source of truth: a window that is missing, or that
//! Redis lost, is rebuilt from the journal (`conversation/window.rs`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Who wrote a message. (Lumina compiles its system prompt per run; the journal holds no
/// system messages, so none are listed.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    User,
    Assistant,
}

/// A conversation message: a user prompt (or steering message) or an assistant answer,
/// never a tool payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationMessage {
    /// The journal seq of the event that holds it (stable, increasing).
    pub id: u64,
    pub role: MessageRole,
    pub text: String,
    pub run_id: String,
    /// Unix milliseconds when it was journaled.
    pub created_at_ms: i64,
}

/// A hot window: the last messages of a conversation, current through a journal seq.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    pub through_seq: u64,
    pub messages: Vec<ConversationMessage>,
}

/// Why the cache failed (the caller logs it and falls back to the journal).
#[derive(Debug, thiserror::Error)]
#[error("hot window cache: {0}")]
pub struct CacheError(pub String);

/// A store of hot windows, by name (`tenant:session`).
#[async_trait]
pub trait WindowStore: Send + Sync + 'static {
    /// The window, or `None` on a miss.
    async fn load(&self, name: &str) -> Result<Option<Window>, CacheError>;

    /// Appends `appended` (the newest messages of a window now current through
    /// `through_seq`) and trims to `capacity`, if the stored window is still current
    /// through `expected`; `expected: None` replaces it with `appended`. Returns whether it
    /// wrote.
    async fn save(
        &self,
        name: &str,
        expected: Option<u64>,
        through_seq: u64,
        capacity: usize,
        appended: &[ConversationMessage],
    ) -> Result<bool, CacheError>;
}

/// The local profile's windows: a map in this process.
#[derive(Default)]
pub struct LocalWindows {
    windows: Mutex<HashMap<String, Window>>,
}

#[async_trait]
impl WindowStore for LocalWindows {
    async fn load(&self, name: &str) -> Result<Option<Window>, CacheError> {
        let windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        Ok(windows.get(name).cloned())
    }

    async fn save(
        &self,
        name: &str,
        expected: Option<u64>,
        through_seq: u64,
        capacity: usize,
        appended: &[ConversationMessage],
    ) -> Result<bool, CacheError> {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let window = match expected {
            None => windows.entry(name.to_string()).or_default(),
            Some(expected) => match windows.get_mut(name) {
                Some(window) if window.through_seq == expected => window,
                _ => return Ok(false),
            },
        };
        if expected.is_none() {
            window.messages.clear();
        }
        window.messages.extend_from_slice(appended);
        let excess = window.messages.len().saturating_sub(capacity.max(1));
        window.messages.drain(..excess);
        window.through_seq = through_seq;
        Ok(true)
    }
}

/// What the Conversation API needs besides the profile.
#[derive(Clone)]
pub struct ConversationConfig {
    pub windows: Arc<dyn WindowStore>,
    /// Messages per hot window (`conversation_window`).
    pub window: usize,
    /// Where user and built-in skills are (the `agentId` of an execute request).
    pub user_skills_dir: PathBuf,
    pub builtin_skills_dir: PathBuf,
    /// SSE comment lines keep idle streams open through proxies.
    pub heartbeat: Duration,
}

impl ConversationConfig {
    pub fn new(
        windows: Arc<dyn WindowStore>,
        settings: &lumina_config::Settings,
        app_root: &lumina_config::AppRoot,
    ) -> Self {
        ConversationConfig {
            windows,
            window: settings.conversation_window.max(1) as usize,
            user_skills_dir: app_root.user_skills_dir(),
            builtin_skills_dir: app_root.builtin_skills_dir(),
            heartbeat: Duration::from_secs(15),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: u64) -> ConversationMessage {
        ConversationMessage {
            id,
            role: MessageRole::User,
            text: format!("m{id}"),
            run_id: "r".into(),
            created_at_ms: 0,
        }
    }

    #[tokio::test]
    async fn local_windows_trim_and_compare_and_set() {
        let store = LocalWindows::default();
        assert_eq!(store.load("a").await.unwrap(), None);
        let all: Vec<_> = (1..=5).map(message).collect();
        assert!(store.save("a", None, 5, 3, &all).await.unwrap());
        assert!(!store.save("a", Some(4), 6, 3, &[message(6)]).await.unwrap());
        assert!(store.save("a", Some(5), 6, 3, &[message(6)]).await.unwrap());
        let window = store.load("a").await.unwrap().unwrap();
        assert_eq!(window.through_seq, 6);
        assert_eq!(
            window.messages.iter().map(|m| m.id).collect::<Vec<_>>(),
            vec![4, 5, 6]
        );
        assert!(!store.save("b", Some(0), 1, 3, &[]).await.unwrap());
    }
}
