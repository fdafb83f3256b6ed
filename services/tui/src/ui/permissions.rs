//! Permission requests in the reducer: the queue behind the dialog (from live events and
//! from `session.resume`'s `pending_permissions`, without duplicates or answered ones) and
//! the note each tool call carries about how its permission was settled.

use lumina_client::protocol::{Decision, Event, EventFrame};

use super::app::{App, PendingPermission, PermissionUi};
use super::transcript::EntryKind;

impl App {
    pub(crate) fn add_pending(&mut self, frames: &[EventFrame]) {
        for frame in frames {
            self.apply_permission_request(&frame.event);
        }
    }

    pub(crate) fn apply_permission_request(&mut self, event: &Event) {
        let Event::PermissionRequested {
            run_id,
            request_id,
            call_id,
            tool,
            arguments,
            preview,
            ..
        } = event
        else {
            return;
        };
        self.request_calls
            .insert(request_id.clone(), call_id.clone());
        if self.answered.contains(request_id)
            || self.permissions.iter().any(|p| p.request_id == *request_id)
        {
            return;
        }
        if self.permissions.is_empty() {
            self.permission_ui = PermissionUi::default();
        }
        self.permissions.push(PendingPermission {
            request_id: request_id.clone(),
            run_id: run_id.clone(),
            call_id: call_id.clone(),
            tool: tool.clone(),
            arguments: arguments.clone(),
            preview: preview.clone(),
        });
        self.set_tool_note(call_id, "waiting for your approval".into());
    }

    pub(crate) fn set_tool_note(&mut self, call_id: &str, note: String) {
        if let Some(&index) = self.tool_entries.get(call_id) {
            if let Some(EntryKind::Tool(tool)) = self.transcript.get_mut(index) {
                tool.permission = Some(note);
            }
        }
    }

    pub(crate) fn permission_resolved(
        &mut self,
        request_id: &str,
        decision: Decision,
        by: &str,
        reason: Option<&str>,
    ) {
        let was_head = self
            .permissions
            .first()
            .is_some_and(|p| p.request_id == request_id);
        self.permissions.retain(|p| p.request_id != request_id);
        if was_head {
            self.permission_ui = PermissionUi::default();
        }
        let who = match by {
            "user" => "by you",
            "rule" => "by a permission rule",
            "session_grant" => "by an earlier approval for this session",
            "mode" => "by the permission mode",
            "headless" => "because nobody could answer",
            "interrupt" => "because the run was interrupted",
            "recovery" => "after a restart",
            other => other,
        };
        let note = match decision {
            Decision::AllowOnce => format!("allowed {who}"),
            Decision::AllowSession => format!("allowed for this session {who}"),
            Decision::Deny => match reason {
                Some(reason) if !reason.is_empty() => format!("denied {who}: {reason}"),
                _ => format!("denied {who}"),
            },
        };
        let call_id = self
            .request_calls
            .get(request_id)
            .cloned()
            .unwrap_or_else(|| request_id.to_string());
        self.set_tool_note(&call_id, note);
    }
}
