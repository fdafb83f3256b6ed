//! No-progress detection for goal mode (LightWorker): a goal whose model keeps doing the
//! same thing, or keeps talking without acting or saying anything new, is stopped instead of
//! burning its whole budget.
//!
//! A turn is fingerprinted by its normalized text (lowercased, whitespace collapsed) and its
//! tool calls (name + canonical arguments). The verdict comes after `limit` consecutive
//! turns that either share one fingerprint, or have no tool calls and no text the goal has
//! not produced before.

use std::collections::HashSet;

use lumina_tools::permission::args_hash;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Default number of turns without progress before the verdict.
pub const DEFAULT_NO_PROGRESS_TURNS: u32 = 3;

#[derive(Debug)]
pub(crate) struct ProgressDetector {
    limit: u32,
    last: Option<String>,
    /// Consecutive turns with the fingerprint `last`.
    repeats: u32,
    /// Consecutive turns with no tool call and no new text.
    idle: u32,
    /// Every normalized text seen so far.
    texts: HashSet<String>,
}

impl ProgressDetector {
    pub(crate) fn new(limit: u32) -> Self {
        Self {
            limit: limit.max(1),
            last: None,
            repeats: 0,
            idle: 0,
            texts: HashSet::new(),
        }
    }

    /// Records one turn; true when it completes the no-progress verdict.
    pub(crate) fn observe<'a>(
        &mut self,
        text: &str,
        calls: impl IntoIterator<Item = (&'a str, &'a Value)>,
    ) -> bool {
        let text = normalize(text);
        let calls: Vec<String> = calls
            .into_iter()
            .map(|(name, args)| args_hash(name, args))
            .collect();
        let mut hasher = Sha256::new();
        hasher.update(text.as_bytes());
        for call in &calls {
            hasher.update([0u8]);
            hasher.update(call.as_bytes());
        }
        let fingerprint = hex::encode(hasher.finalize());
        if self.last.as_deref() == Some(fingerprint.as_str()) {
            self.repeats += 1;
        } else {
            self.last = Some(fingerprint);
            self.repeats = 1;
        }
        let new_text = !text.is_empty() && self.texts.insert(text);
        if calls.is_empty() && !new_text {
            self.idle += 1;
        } else {
            self.idle = 0;
        }
        self.repeats >= self.limit || self.idle >= self.limit
    }
}

fn normalize(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_same_turn_three_times_is_no_progress() {
        let mut d = ProgressDetector::new(3);
        let args = json!({"command": "ls", "timeout_ms": 5});
        // Key order and whitespace do not make a turn new.
        let reordered = json!({"timeout_ms": 5, "command": "ls"});
        assert!(!d.observe("Checking  again", [("shell", &args)]));
        assert!(!d.observe("checking again", [("shell", &reordered)]));
        assert!(d.observe("Checking again ", [("shell", &args)]));
    }

    #[test]
    fn a_different_turn_resets_the_count() {
        let mut d = ProgressDetector::new(3);
        let a = json!({"path": "a"});
        let b = json!({"path": "b"});
        assert!(!d.observe("", [("read_file", &a)]));
        assert!(!d.observe("", [("read_file", &a)]));
        assert!(!d.observe("", [("read_file", &b)]));
        assert!(!d.observe("", [("read_file", &b)]));
        assert!(d.observe("", [("read_file", &b)]));
    }

    #[test]
    fn turns_without_tools_or_new_text_are_no_progress() {
        let mut d = ProgressDetector::new(3);
        assert!(!d.observe("first idea", []));
        assert!(!d.observe("", []));
        assert!(!d.observe("first idea", []));
        // Empty, then an old text again: the third idle turn in a row.
        assert!(d.observe("", []));
        let mut fresh = ProgressDetector::new(3);
        for text in ["one", "two", "three", "four"] {
            assert!(!fresh.observe(text, []), "{text} is new text");
        }
    }
}
