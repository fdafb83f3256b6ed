//! `audit.list`: the approvals audit (docs/audit.md) — every permission decision of a
//! tenant's sessions, newest first.

use serde::{Deserialize, Serialize};

use crate::Decision;

/// `audit.list` params. Every filter is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditListParams {
    /// The tenant to list; must be the caller's own (the default). Another tenant's is
    /// `forbidden`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Only this session's decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Only decisions at or after this time (unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<i64>,
    /// Only decisions before this time (unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<i64>,
    /// `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// At most this many records (default 100, at most 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// `audit.list` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditListResult {
    /// Newest first (`ts_ms`, then `session_id`, then `seq`, descending).
    pub records: Vec<AuditEntry>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One permission decision. Never the call's arguments (they may hold secrets): their
/// hash and the preview the user was shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub tenant: String,
    pub session_id: String,
    /// The seq of the `permission.resolved` event that journals the decision.
    pub seq: u64,
    /// When it was decided (unix ms).
    pub ts_ms: i64,
    pub run_id: String,
    /// The permission request's id (a call decided without asking: the call's id).
    pub request_id: String,
    pub tool: String,
    /// `permission.requested.args_hash`: sha256 of the tool and the normalized arguments.
    pub args_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    pub decision: Decision,
    /// Who decided: `user`, `rule`, `mode`, `session_grant`, `headless`, `interrupt`,
    /// `recovery`.
    pub by: String,
    /// The subject (`sub`) of the identity that answered, for `by: "user"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
