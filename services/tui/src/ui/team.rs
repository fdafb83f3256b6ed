//! The team as a group chat: one dim line per hand-off, message, task end, round, gate,
//! follow-up and (with `transcript.show_thinking`) member thought, honouring the team's
//! `transcript` choices that `team.entered` carries.

use lumina_client::protocol::team::TeamEntered;
use lumina_client::protocol::Event;

/// Longest thinking excerpt shown on its line (the whole text stays in the journal).
const THINKING_CHARS: usize = 160;

/// The team's `transcript` choices while the session is in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TeamTranscript {
    /// `show_member_dialogue`: messages between members.
    pub dialogue: bool,
    /// `show_tool_details`: member tool calls' starts with their arguments.
    pub tool_details: bool,
    /// `show_thinking`: members' thinking, collapsed to one dim line.
    pub thinking: bool,
}

impl TeamTranscript {
    pub(crate) fn of(entered: &TeamEntered) -> Self {
        TeamTranscript {
            dialogue: entered.show_member_dialogue,
            tool_details: entered.show_tool_details,
            thinking: entered.show_thinking,
        }
    }

    /// Whether an event of a team stream is shown under `choices` (thinking only when the
    /// team asked for it, even with no `team.entered` seen).
    pub(crate) fn shows(choices: Option<TeamTranscript>, event: &Event) -> bool {
        match (choices, event) {
            (None, Event::TeamMemberThinking(_)) => false,
            (None, _) => true,
            (Some(c), Event::TeamMessageSent(_)) => c.dialogue,
            (Some(c), Event::ToolStarted { .. }) => c.tool_details,
            (Some(c), Event::TeamMemberThinking(_)) => c.thinking,
            (Some(_), _) => true,
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// `thinking: <first line, clipped> (+N lines)`: collapsed to one line.
fn thinking_line(agent: &str, text: &str) -> String {
    let first = first_line(text).trim();
    let mut shown: String = first.chars().take(THINKING_CHARS).collect();
    if first.chars().count() > THINKING_CHARS {
        shown.push('…');
    }
    let more = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
        .saturating_sub(1);
    let mut line = format!("{agent} thinking: {shown}");
    if more > 0 {
        line.push_str(&format!(" (+{more} lines)"));
    }
    line
}

/// One event of the team as a chat line (raw tool payloads stay in the journal).
pub(crate) fn team_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::TeamEntered(e) => format!(
            "team {} ({}): {}",
            e.display_name,
            e.team,
            e.members.join(", ")
        ),
        Event::TeamExited(_) => "left the team".to_string(),
        Event::TeamCompleted(e) => {
            let mut line = format!(
                "team finished after {} round(s): {}",
                e.rounds,
                first_line(&e.summary)
            );
            if !e.follow_ups.is_empty() {
                let items: Vec<String> = e
                    .follow_ups
                    .iter()
                    .map(|f| format!("{} {}", f.follow_up_id, f.status.as_str()))
                    .collect();
                line.push_str(&format!(" — not done: {}", items.join(", ")));
            }
            line
        }
        Event::TeamContractWritten(e) => format!(
            "contract: {} ({} criteria)",
            first_line(&e.goal),
            e.acceptance_criteria.len()
        ),
        Event::TeamRoundStarted(e) if e.recovery => format!("round {} (recovery)", e.round),
        Event::TeamRoundStarted(e) => format!("round {}", e.round),
        Event::TeamRoundEnded(e) if e.passed => format!("round {} passed", e.round),
        Event::TeamRoundEnded(e) => {
            format!("round {} failed: {}", e.round, e.failures.join("; "))
        }
        Event::TeamTaskDispatched(e) => format!("→ {}: {}", e.agent, first_line(&e.task)),
        Event::TeamTaskEnded(e) => format!(
            "{} {}: {}",
            e.agent,
            e.status.as_str(),
            first_line(&e.summary)
        ),
        Event::TeamMessageSent(e) => format!("{} → {}: {}", e.from, e.to, first_line(&e.text)),
        Event::TeamGateChecked(e) => format!(
            "gate {}: {}",
            e.name,
            if e.passed { "passed" } else { "failed" }
        ),
        Event::TeamFollowUpOpened(e) => format!(
            "{} follow-up {}: {}",
            e.by,
            e.follow_up_id,
            first_line(&e.item)
        ),
        Event::TeamFollowUpResolved(e) if e.reason.is_empty() => {
            let status: lumina_client::protocol::team::FollowUpStatus = e.disposition.into();
            format!("{} {}: {}", e.by, status.as_str(), e.follow_up_id)
        }
        Event::TeamFollowUpResolved(e) => {
            let status: lumina_client::protocol::team::FollowUpStatus = e.disposition.into();
            format!(
                "{} {}: {} — {}",
                e.by,
                status.as_str(),
                e.follow_up_id,
                first_line(&e.reason)
            )
        }
        Event::TeamMemberThinking(e) => thinking_line(&e.agent, &e.text),
        _ => return None,
    })
}
