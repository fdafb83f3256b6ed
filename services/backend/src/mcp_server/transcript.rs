//! A session's visible events as plain text for another agent: messages, tool calls and
//! results, permission denials, run outcomes.

use lumina_client::protocol::{Decision, Event, EventFrame};

/// Longest text kept per entry, in characters.
const ENTRY_CHARS: usize = 4000;

/// The line(s) for one event, or `None` for bookkeeping events. Main stream only: sub-agents
/// appear through the parent's `agent` tool call and result.
pub fn line(frame: &EventFrame) -> Option<String> {
    if frame.stream != "main" {
        return None;
    }
    let text = match &frame.event {
        Event::MessageUser { text, .. } => format!("user: {}", clip(text)),
        Event::MessageSteering { text, .. } => format!("user (steering): {}", clip(text)),
        Event::MessageAssistant {
            text, tool_calls, ..
        } => {
            let mut parts = Vec::new();
            if !text.trim().is_empty() {
                parts.push(format!("assistant: {}", clip(text)));
            }
            for call in tool_calls {
                parts.push(format!(
                    "tool call {}: {}",
                    call.name,
                    clip(&call.arguments.to_string())
                ));
            }
            if parts.is_empty() {
                return None;
            }
            parts.join("\n")
        }
        Event::ToolCompleted {
            tool,
            is_error,
            output,
            ..
        } => {
            let marker = if *is_error { " (error)" } else { "" };
            format!("tool result {tool}{marker}: {}", clip(output))
        }
        Event::ToolInterrupted { tool, reason, .. } => format!("tool {tool} interrupted: {reason}"),
        Event::PermissionResolved {
            decision: Decision::Deny,
            by,
            reason,
            ..
        } => format!(
            "permission denied ({by}){}",
            reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        Event::RunCompleted { run_id, .. } => format!("run {run_id} completed"),
        Event::RunFailed {
            run_id, message, ..
        } => format!("run {run_id} failed: {}", clip(message)),
        Event::RunInterrupted { run_id, reason } => format!("run {run_id} interrupted: {reason}"),
        Event::RunQueued { run_id, .. } => format!("run {run_id} queued"),
        Event::Warning { message, .. } => format!("warning: {}", clip(message)),
        Event::AgentCompleted {
            child_id, is_error, ..
        } => {
            let outcome = if *is_error { "failed" } else { "completed" };
            format!("sub-agent {child_id} {outcome}")
        }
        _ => return None,
    };
    Some(format!("#{} {text}", frame.seq))
}

/// At most [`ENTRY_CHARS`] characters, marked when cut.
pub fn clip(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= ENTRY_CHARS {
        return text.to_string();
    }
    let mut clipped: String = text.chars().take(ENTRY_CHARS).collect();
    clipped.push_str(" […]");
    clipped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(seq: u64, event: Event) -> EventFrame {
        EventFrame {
            session_id: "s".into(),
            seq,
            stream: "main".into(),
            stream_seq: seq,
            ts_ms: 0,
            event,
        }
    }

    #[test]
    fn renders_visible_events() {
        let user = frame(
            3,
            Event::MessageUser {
                run_id: "r".into(),
                text: "hi".into(),
                skill: None,
            },
        );
        assert_eq!(line(&user).as_deref(), Some("#3 user: hi"));
        let step = frame(
            4,
            Event::StepStarted {
                run_id: "r".into(),
                step: 1,
            },
        );
        assert_eq!(line(&step), None);
        assert!(clip(&"x".repeat(5000)).ends_with(" […]"));
    }
}
