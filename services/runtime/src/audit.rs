//! Approvals audit records (docs/audit.md) for the permission decisions the runtime
//! journals: every `permission.resolved` is appended with its record, in the same store
//! transaction, by whoever decided (the user, a rule, the mode, a session grant, headless
//! mode, an interrupt, recovery).

use lumina_journal::NewAudit;
use lumina_protocol::{Decision, Event};

/// What a decision was about: the call as the permission engine saw it.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub tool: String,
    /// `args_hash` of the tool name and the normalized arguments.
    pub args_hash: String,
    /// What the user was shown, when they were asked.
    pub preview: Option<String>,
}

impl Subject {
    /// The subject of a journaled `permission.requested`, if `event` is one.
    pub(crate) fn of_request(event: &Event) -> Option<Self> {
        match event {
            Event::PermissionRequested {
                tool,
                args_hash,
                preview,
                ..
            } => Some(Self {
                tool: tool.clone(),
                args_hash: args_hash.clone(),
                preview: preview.clone(),
            }),
            _ => None,
        }
    }
}

/// The wire name of a decision (as in `permission.resolved.decision`).
pub fn decision_name(decision: Decision) -> &'static str {
    match decision {
        Decision::AllowOnce => "allow_once",
        Decision::AllowSession => "allow_session",
        Decision::Deny => "deny",
    }
}

/// The audit record of `resolved` (a `permission.resolved`, at index `event` of its
/// batch); `sub` is the identity that answered, for `by: user`. `None` for other events.
pub(crate) fn record(
    event: usize,
    resolved: &Event,
    subject: &Subject,
    sub: Option<String>,
) -> Option<NewAudit> {
    let Event::PermissionResolved {
        run_id,
        request_id,
        decision,
        by,
        reason,
    } = resolved
    else {
        return None;
    };
    Some(NewAudit {
        event,
        run_id: run_id.clone(),
        request_id: request_id.clone(),
        tool: subject.tool.clone(),
        args_hash: subject.args_hash.clone(),
        preview: subject.preview.clone(),
        decision: decision_name(*decision).to_string(),
        by: by.clone(),
        sub,
        reason: reason.clone(),
    })
}
