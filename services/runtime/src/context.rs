//! Context compilation: the system prompt (environment, project instructions, skills) and the
//! model-visible history rebuilt from journal events, plus token accounting and compaction.

use std::collections::{HashMap, HashSet};

use lumina_model::{ContentBlock, Message, Role};
use lumina_protocol::{Decision, Event, EventFrame, RunFailureCode};
use lumina_skills::{InstructionFile, SkillCatalog};

/// What the history says about the conversation so far.
pub struct History {
    pub messages: Vec<Message>,
    /// Seq of the latest compaction checkpoint's boundary (0 = none).
    pub compacted_through: u64,
}

const BASE_PROMPT: &str = "You are Lumina, an agent working in the user's project through tools. \
Work step by step: read before you edit, keep changes minimal, and verify with the shell when \
useful. Paths are relative to the project root. When the task is done, answer with a short \
summary of what you did.";

/// Builds the system prompt.
pub fn system_prompt(
    project_root: &str,
    instructions: &[InstructionFile],
    skills: &SkillCatalog,
) -> String {
    let mut out = String::from(BASE_PROMPT);
    out.push_str(&format!(
        "\n\n# Environment\nProject root: {project_root}\nPlatform: {}\n",
        std::env::consts::OS
    ));
    for file in instructions {
        out.push_str(&format!(
            "\n# Instructions from {}\n{}\n",
            file.path.display(),
            file.text.trim()
        ));
    }
    let skills_summary = skills.summary_for_system_prompt();
    if !skills_summary.trim().is_empty() {
        out.push_str("\n# Skills\nThe user can invoke these with /name.\n");
        out.push_str(&skills_summary);
        out.push('\n');
    }
    out
}

/// The `run.failed` code of a run whose prompt a hook blocked.
pub const BLOCKED_BY_HOOK: RunFailureCode = RunFailureCode::BlockedByHook;

/// How a steering message is introduced to the model.
pub const STEERING_PREFIX: &str = "[The user sent this message while you were working]";

/// Rebuilds the model-visible conversation from journal events. A checkpoint replaces the
/// history up to its boundary with its summary; tool calls that never got a result are
/// answered with an "interrupted" error result so providers accept the transcript.
///
/// A steering message appears where it was delivered, not where it was journaled: right
/// before the first model request whose context included it (`model.requested`'s
/// `through_seq`), before the next run's prompt when its run ended first, or at the end
/// (the request being compiled now). That is the same position every time the history is
/// rebuilt, and never between a tool call and its result.
pub fn build_history(events: &[EventFrame], skills: &SkillCatalog) -> History {
    let checkpoint = events.iter().rev().find_map(|f| match &f.event {
        Event::Checkpoint {
            through_seq,
            summary,
            ..
        } => Some((*through_seq, summary.clone())),
        _ => None,
    });
    let compacted_through = checkpoint.as_ref().map(|(s, _)| *s).unwrap_or(0);
    let mut messages: Vec<Message> = Vec::new();
    if let Some((_, summary)) = &checkpoint {
        push(
            &mut messages,
            Role::User,
            ContentBlock::Text {
                text: format!("[Summary of the earlier conversation]\n{summary}"),
            },
        );
        push(
            &mut messages,
            Role::Assistant,
            ContentBlock::Text {
                text: "Understood; I will continue from that summary.".into(),
            },
        );
    }
    // A prompt a `user_prompt_submit` hook blocked never reaches the model, not even later.
    let blocked: HashSet<&str> = events
        .iter()
        .filter_map(|f| match &f.event {
            Event::RunFailed { run_id, code, .. } if *code == BLOCKED_BY_HOOK => {
                Some(run_id.as_str())
            }
            _ => None,
        })
        .collect();
    let mut steering: Vec<(u64, String)> = Vec::new();
    // The remote task each `a2a_delegate` call followed (call id → agent, task id).
    let mut delegated: HashMap<&str, (&str, &str)> = HashMap::new();
    for frame in events.iter().filter(|f| f.seq > compacted_through) {
        match &frame.event {
            Event::DelegateUpdated {
                call_id,
                agent,
                task_id: Some(task_id),
                ..
            } => {
                delegated.insert(call_id.as_str(), (agent.as_str(), task_id.as_str()));
            }
            Event::MessageUser { run_id, .. } if blocked.contains(run_id.as_str()) => {}
            Event::MessageSteering { text, .. } => steering.push((frame.seq, text.clone())),
            Event::ModelRequested { through_seq, .. } => {
                let upto = if *through_seq == 0 {
                    u64::MAX
                } else {
                    *through_seq
                };
                deliver_steering(&mut messages, &mut steering, upto);
            }
            Event::RunStarted { .. } => deliver_steering(&mut messages, &mut steering, u64::MAX),
            Event::MessageUser { text, skill, .. } => {
                let text = match skill.as_deref().and_then(|name| skills.get(name)) {
                    Some(found) => {
                        let args = lumina_skills::parse_invocation(text)
                            .map(|(_, args)| args)
                            .unwrap_or_default();
                        found.render_for_model(&args)
                    }
                    None => text.clone(),
                };
                push(&mut messages, Role::User, ContentBlock::Text { text });
            }
            Event::MessageAssistant {
                text, tool_calls, ..
            } => {
                if !text.is_empty() {
                    push(
                        &mut messages,
                        Role::Assistant,
                        ContentBlock::Text { text: text.clone() },
                    );
                }
                for call in tool_calls {
                    push(
                        &mut messages,
                        Role::Assistant,
                        ContentBlock::ToolUse {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            input: call.arguments.clone(),
                        },
                    );
                }
            }
            Event::ToolCompleted {
                call_id,
                output,
                is_error,
                ..
            } => push(
                &mut messages,
                Role::User,
                ContentBlock::ToolResult {
                    tool_use_id: call_id.clone(),
                    content: output.clone(),
                    is_error: *is_error,
                },
            ),
            Event::ToolInterrupted {
                call_id, reason, ..
            } => {
                let mut content = format!("tool call was interrupted: {reason}");
                // A delegation cut off (e.g. by a restart) leaves its remote task running:
                // say which, so it is checked on rather than sent again.
                if let Some((agent, task_id)) = delegated.get(call_id.as_str()) {
                    content.push_str(&format!(
                        ". The A2A agent `{agent}` may still be working on its task \
                         {task_id}: check on it with a2a_delegate{{agent: \"{agent}\", \
                         task_id: \"{task_id}\"}} rather than sending the task again."
                    ));
                }
                push(
                    &mut messages,
                    Role::User,
                    ContentBlock::ToolResult {
                        tool_use_id: call_id.clone(),
                        content,
                        is_error: true,
                    },
                )
            }
            _ => {}
        }
    }
    deliver_steering(&mut messages, &mut steering, u64::MAX);
    close_dangling_tool_uses(&mut messages);
    History {
        messages,
        compacted_through,
    }
}

/// Limits a history to the events from seq `from` on (a conversation's hot window; 0 keeps
/// everything). Checkpoints stay: their summary is already compact. The window starts at a
/// message, so no tool result loses its call.
pub fn keep_from(events: &mut Vec<EventFrame>, from: u64) {
    if from > 0 {
        events.retain(|f| f.seq >= from || matches!(f.event, Event::Checkpoint { .. }));
    }
}

/// Appends the pending steering messages journaled at or before `upto`, in order.
fn deliver_steering(messages: &mut Vec<Message>, pending: &mut Vec<(u64, String)>, upto: u64) {
    let (due, later): (Vec<_>, Vec<_>) = pending.drain(..).partition(|(seq, _)| *seq <= upto);
    *pending = later;
    for (_, text) in due {
        push(
            messages,
            Role::User,
            ContentBlock::Text {
                text: format!("{STEERING_PREFIX}\n{text}"),
            },
        );
    }
}

/// Appends a user text block at the end (merged into a last user message, after its tool
/// results): request-only context such as a goal's briefing.
pub fn push_user_text(messages: &mut Vec<Message>, text: String) {
    push(messages, Role::User, ContentBlock::Text { text });
}

/// Appends a block, merging it into the last message when the role is the same.
fn push(messages: &mut Vec<Message>, role: Role, block: ContentBlock) {
    if let Some(last) = messages.last_mut() {
        if last.role == role {
            last.content.push(block);
            return;
        }
    }
    messages.push(Message {
        role,
        content: vec![block],
    });
}

/// Every assistant tool_use must be answered by a tool_result in the next user message.
fn close_dangling_tool_uses(messages: &mut Vec<Message>) {
    let mut i = 0;
    while i < messages.len() {
        if messages[i].role == Role::Assistant {
            let uses: Vec<String> = messages[i]
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse { id, .. } => Some(id.clone()),
                    _ => None,
                })
                .collect();
            if !uses.is_empty() {
                let answered: HashSet<String> = messages
                    .get(i + 1)
                    .filter(|m| m.role == Role::User)
                    .map(|m| {
                        m.content
                            .iter()
                            .filter_map(|b| match b {
                                ContentBlock::ToolResult { tool_use_id, .. } => {
                                    Some(tool_use_id.clone())
                                }
                                _ => None,
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let missing: Vec<ContentBlock> = uses
                    .into_iter()
                    .filter(|id| !answered.contains(id))
                    .map(|id| ContentBlock::ToolResult {
                        tool_use_id: id,
                        content: "tool call was interrupted before it ran".into(),
                        is_error: true,
                    })
                    .collect();
                if !missing.is_empty() {
                    match messages.get_mut(i + 1) {
                        Some(next) if next.role == Role::User => {
                            // Tool results go first in the user message.
                            let rest = std::mem::take(&mut next.content);
                            next.content = missing;
                            next.content.extend(rest);
                        }
                        _ => messages.insert(
                            i + 1,
                            Message {
                                role: Role::User,
                                content: missing,
                            },
                        ),
                    }
                }
            }
        }
        i += 1;
    }
}

/// A cheap, provider-neutral token estimate (≈ 4 bytes a token), used for the 80 % rule.
pub fn estimate_tokens(system: &str, messages: &[Message], tools_json_len: usize) -> u64 {
    let mut bytes = system.len() + tools_json_len;
    for message in messages {
        for block in &message.content {
            bytes += match block {
                ContentBlock::Text { text } => text.len(),
                ContentBlock::ToolUse { name, input, .. } => name.len() + input.to_string().len(),
                ContentBlock::ToolResult { content, .. } => content.len(),
            } + 8;
        }
    }
    (bytes as u64).div_ceil(4)
}

/// Builds a compaction checkpoint: everything before the last `keep_turns` user turns is
/// replaced by a summary that keeps the goal, decisions, approvals and tool outcomes
/// (LightWorker's rule). `None` when there is nothing older to compact.
pub fn compact(
    events: &[EventFrame],
    run_id: &str,
    keep_turns: usize,
    tokens_before: u64,
) -> Option<Event> {
    let previous = events.iter().rev().find_map(|f| match &f.event {
        Event::Checkpoint {
            through_seq,
            summary,
            ..
        } => Some((*through_seq, summary.clone())),
        _ => None,
    });
    let already = previous.as_ref().map(|p| p.0).unwrap_or(0);
    let user_turns: Vec<u64> = events
        .iter()
        .filter(|f| f.seq > already && matches!(f.event, Event::MessageUser { .. }))
        .map(|f| f.seq)
        .collect();
    if user_turns.len() <= keep_turns {
        return None;
    }
    let boundary = user_turns[user_turns.len() - keep_turns] - 1;
    let span: Vec<&EventFrame> = events
        .iter()
        .filter(|f| f.seq > already && f.seq <= boundary)
        .collect();
    if span.is_empty() {
        return None;
    }
    let mut goal = None;
    let mut requests = Vec::new();
    let mut decisions = Vec::new();
    let mut approvals = Vec::new();
    let mut tools = Vec::new();
    let mut pending_tools = std::collections::HashMap::new();
    for frame in &span {
        match &frame.event {
            Event::MessageUser { text, .. } => {
                if goal.is_none() && previous.is_none() {
                    goal = Some(clip(text, 1000));
                } else {
                    requests.push(clip(text, 300));
                }
            }
            Event::MessageSteering { text, .. } => {
                requests.push(format!("(while you worked) {}", clip(text, 300)))
            }
            Event::MessageAssistant { text, .. } if !text.trim().is_empty() => {
                decisions.push(clip(text, 400))
            }
            Event::ToolStarted {
                call_id,
                tool,
                arguments,
                ..
            } => {
                pending_tools.insert(
                    call_id.clone(),
                    format!("{tool}({})", clip(&arguments.to_string(), 160)),
                );
            }
            Event::ToolCompleted {
                call_id,
                is_error,
                output,
                ..
            } => {
                if let Some(call) = pending_tools.remove(call_id) {
                    let outcome = if *is_error { "error" } else { "ok" };
                    tools.push(format!("{call} → {outcome}: {}", clip(output, 160)));
                }
            }
            Event::PermissionRequested {
                request_id,
                tool,
                arguments,
                ..
            } => {
                pending_tools.insert(
                    format!("perm:{request_id}"),
                    format!("{tool}({})", clip(&arguments.to_string(), 160)),
                );
            }
            Event::PermissionResolved {
                request_id,
                decision,
                reason,
                ..
            } => {
                if let Some(call) = pending_tools.remove(&format!("perm:{request_id}")) {
                    let verdict = match decision {
                        Decision::AllowOnce => "allowed once",
                        Decision::AllowSession => "allowed for the session",
                        Decision::Deny => "denied",
                    };
                    let why = reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default();
                    approvals.push(format!("{call}: {verdict}{why}"));
                }
            }
            _ => {}
        }
    }
    let mut summary = String::new();
    if let Some((_, earlier)) = &previous {
        summary.push_str(earlier);
        summary.push_str("\n\n[Later]\n");
    }
    if let Some(goal) = goal {
        summary.push_str(&format!("Goal (the user's first request): {goal}\n"));
    }
    section(&mut summary, "Later requests", &requests);
    section(&mut summary, "Approvals and denials", &approvals);
    section(&mut summary, "Decisions and answers", &decisions);
    section(&mut summary, "Tool calls", &tools);
    let tokens_after = (summary.len() as u64).div_ceil(4);
    Some(Event::Checkpoint {
        run_id: run_id.to_string(),
        through_seq: boundary,
        summary,
        tokens_before,
        tokens_after,
    })
}

fn section(out: &mut String, title: &str, lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    out.push_str(&format!("{title}:\n"));
    // Keep the first and the most recent entries when a section is long.
    let keep: Vec<&String> = if lines.len() > 40 {
        lines
            .iter()
            .take(10)
            .chain(lines.iter().skip(lines.len() - 30))
            .collect()
    } else {
        lines.iter().collect()
    };
    for line in keep {
        out.push_str(&format!("- {line}\n"));
    }
}

fn clip(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut out: String = flat.chars().take(max).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests;
