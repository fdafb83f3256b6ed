//! The cluster's hot windows: `lumina_cluster::HotWindows` in Redis, entries as JSON.

use async_trait::async_trait;
use lumina_cluster::HotWindows;

use crate::hot_window::{CacheError, ConversationMessage, Window, WindowStore};

/// [`WindowStore`] over Redis.
pub struct RedisWindows(pub HotWindows);

#[async_trait]
impl WindowStore for RedisWindows {
    async fn load(&self, name: &str) -> Result<Option<Window>, CacheError> {
        let Some(stored) = self
            .0
            .load(name)
            .await
            .map_err(|e| CacheError(e.to_string()))?
        else {
            return Ok(None);
        };
        let mut messages = Vec::with_capacity(stored.entries.len());
        for entry in &stored.entries {
            // An entry this version cannot read is a miss: the window is rebuilt.
            match serde_json::from_str::<ConversationMessage>(entry) {
                Ok(message) => messages.push(message),
                Err(_) => return Ok(None),
            }
        }
        Ok(Some(Window {
            through_seq: stored.through_seq,
            messages,
        }))
    }

    async fn save(
        &self,
        name: &str,
        expected: Option<u64>,
        through_seq: u64,
        capacity: usize,
        appended: &[ConversationMessage],
    ) -> Result<bool, CacheError> {
        let entries = appended
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CacheError(e.to_string()))?;
        self.0
            .save(name, expected, through_seq, capacity, &entries)
            .await
            .map_err(|e| CacheError(e.to_string()))
    }
}
