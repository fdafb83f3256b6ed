//! The approvals audit (docs/audit.md): one record per permission decision, committed by
//! the append that journals the decision (so a crash never leaves one without the other),
//! and listed per tenant across sessions, newest first.
//!
//! The journal still knows nothing of event semantics: the writer says which event of the
//! batch a record documents ([`NewAudit::event`]), and the record takes that event's seq
//! and timestamp. Records hold the arguments' hash and the preview the user was shown,
//! never the arguments themselves (they may hold secrets).

use serde::{Deserialize, Serialize};

/// A permission decision to record with an append ([`crate::AppendBatch::audit`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewAudit {
    /// Index in the batch's `events` of the event that journals the decision; an index out
    /// of range refuses the whole append ([`crate::Error::InvalidBatch`]).
    pub event: usize,
    /// The run the call belongs to.
    pub run_id: String,
    /// The permission request (or, for a decision nobody was asked about, the call) id.
    pub request_id: String,
    /// The tool asked for.
    pub tool: String,
    /// sha256 of the tool name and the normalized arguments (`permission.requested.args_hash`).
    pub args_hash: String,
    /// What the user was shown, if anything.
    pub preview: Option<String>,
    /// `allow_once`, `allow_session` or `deny`.
    pub decision: String,
    /// Who decided: `user`, `rule`, `mode`, `session_grant`, `headless`, `interrupt`, `recovery`.
    pub by: String,
    /// The subject of the identity that answered (`by: user`); absent otherwise.
    pub sub: Option<String>,
    /// The reason given with the decision.
    pub reason: Option<String>,
}

/// A stored audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// The session's tenant.
    pub tenant: String,
    /// The session.
    pub session_id: String,
    /// The seq of the journal event that records the decision (`permission.resolved`).
    pub seq: u64,
    /// When the decision was journaled (unix ms; the event's `ts_ms`).
    pub ts_ms: i64,
    /// See [`NewAudit::run_id`].
    pub run_id: String,
    /// See [`NewAudit::request_id`].
    pub request_id: String,
    /// See [`NewAudit::tool`].
    pub tool: String,
    /// See [`NewAudit::args_hash`].
    pub args_hash: String,
    /// See [`NewAudit::preview`].
    pub preview: Option<String>,
    /// See [`NewAudit::decision`].
    pub decision: String,
    /// See [`NewAudit::by`].
    pub by: String,
    /// See [`NewAudit::sub`].
    pub sub: Option<String>,
    /// See [`NewAudit::reason`].
    pub reason: Option<String>,
}

impl AuditRecord {
    /// The record as stored by an append to `session` at `seq`, `ts_ms`.
    pub fn from_new(tenant: &str, session_id: &str, seq: u64, ts_ms: i64, new: NewAudit) -> Self {
        Self {
            tenant: tenant.to_owned(),
            session_id: session_id.to_owned(),
            seq,
            ts_ms,
            run_id: new.run_id,
            request_id: new.request_id,
            tool: new.tool,
            args_hash: new.args_hash,
            preview: new.preview,
            decision: new.decision,
            by: new.by,
            sub: new.sub,
            reason: new.reason,
        }
    }

    /// The position of this record in the listing order, for the next page.
    pub fn cursor(&self) -> AuditCursor {
        AuditCursor {
            ts_ms: self.ts_ms,
            session_id: self.session_id.clone(),
            seq: self.seq,
        }
    }

    /// Whether the record comes strictly after `cursor` in the listing order (newest first:
    /// `ts_ms`, then `session_id`, then `seq`, all descending; ids compare bytewise).
    pub fn is_after(&self, cursor: &AuditCursor) -> bool {
        (self.ts_ms, self.session_id.as_bytes(), self.seq)
            < (cursor.ts_ms, cursor.session_id.as_bytes(), cursor.seq)
    }
}

/// A position in the audit listing: the last record of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditCursor {
    /// The record's time.
    pub ts_ms: i64,
    /// The record's session.
    pub session_id: String,
    /// The record's seq.
    pub seq: u64,
}

impl AuditCursor {
    /// The opaque text form handed to clients: `<ts_ms>.<seq>.<session_id>`.
    pub fn encode(&self) -> String {
        format!("{}.{}.{}", self.ts_ms, self.seq, self.session_id)
    }

    /// Parses [`Self::encode`]'s form; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, '.');
        let ts_ms = parts.next()?.parse().ok()?;
        let seq = parts.next()?.parse().ok()?;
        let session_id = parts.next()?.to_owned();
        if session_id.is_empty() {
            return None;
        }
        Some(Self {
            ts_ms,
            session_id,
            seq,
        })
    }
}

/// Which records [`crate::JournalStore::list_audit`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditQuery {
    /// Only this session's records.
    pub session_id: Option<String>,
    /// Only records with `ts_ms >= since_ms`.
    pub since_ms: Option<i64>,
    /// Only records with `ts_ms < until_ms`.
    pub until_ms: Option<i64>,
    /// Only records after this one in the listing order (the next page).
    pub after: Option<AuditCursor>,
    /// At most this many records (0 lists nothing).
    pub limit: usize,
}

impl AuditQuery {
    /// Whether a record matches the filters and the cursor (the SQLite backend filters
    /// across session files with it; PostgreSQL says the same in SQL).
    pub fn matches(&self, record: &AuditRecord) -> bool {
        self.session_id
            .as_ref()
            .is_none_or(|id| *id == record.session_id)
            && self.since_ms.is_none_or(|since| record.ts_ms >= since)
            && self.until_ms.is_none_or(|until| record.ts_ms < until)
            && self.after.as_ref().is_none_or(|c| record.is_after(c))
    }
}

/// Refuses a batch whose audit records point at no event of it (checked before any write).
pub(crate) fn check_batch(batch: &crate::AppendBatch) -> crate::Result<()> {
    match batch.audit.iter().find(|a| a.event >= batch.events.len()) {
        Some(bad) => Err(crate::Error::InvalidBatch(format!(
            "audit record for request {} points at event {} of a batch of {}",
            bad.request_id,
            bad.event,
            batch.events.len()
        ))),
        None => Ok(()),
    }
}

/// Sorts records into the listing order (newest first) and keeps the first `limit`.
pub fn newest_first(mut records: Vec<AuditRecord>, limit: usize) -> Vec<AuditRecord> {
    records.sort_by(|a, b| {
        (b.ts_ms, b.session_id.as_bytes(), b.seq).cmp(&(a.ts_ms, a.session_id.as_bytes(), a.seq))
    });
    records.truncate(limit);
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let cursor = AuditCursor {
            ts_ms: 1_700_000_000_123,
            session_id: "a-b_C".into(),
            seq: 42,
        };
        assert_eq!(AuditCursor::parse(&cursor.encode()), Some(cursor));
        for bad in ["", "1", "1.2", "1.2.", "x.2.s", "1.y.s"] {
            assert_eq!(AuditCursor::parse(bad), None, "{bad:?}");
        }
    }
}
