//! Protocol → state: how connection reports, durable events and deltas change the app.
//! Events arrive exactly once and in order (the connection task runs them through
//! `SessionView`), so this code never deduplicates by seq; it only has to cope with
//! replays of whole sessions and with deltas that a reconnect cut short.

use lumina_client::protocol::methods::McpServerStatus;
use lumina_client::protocol::{DeltaFrame, Event, EventFrame, GoalState, MAIN_STREAM};
use serde_json::Value;

use super::app::{
    ActiveRun, App, ConnEvent, ConnState, Overlay, PermissionUi, RunningTool, SessionMeta,
};
use super::render::entries::tool_summary;
use super::team::{team_line, TeamTranscript};
use super::transcript::{EntryKind, Level, ToolArtifact, ToolEntry, ToolState};

impl App {
    pub(crate) fn on_conn(&mut self, event: ConnEvent) {
        match event {
            ConnEvent::Connected { server } => {
                if self.conn != ConnState::Connected {
                    self.notice(Level::Info, format!("reconnected to {server}"));
                }
                self.conn = ConnState::Connected;
            }
            ConnEvent::Lost { reason } => {
                self.mark_streams_stale();
                self.conn = ConnState::Reconnecting {
                    reason,
                    attempt: 0,
                    remaining_secs: 30,
                };
            }
            ConnEvent::Retrying {
                attempt,
                remaining_secs,
                error,
            } => {
                let reason = match &self.conn {
                    ConnState::Reconnecting { reason, .. } => reason.clone(),
                    _ => error,
                };
                self.conn = ConnState::Reconnecting {
                    reason,
                    attempt,
                    remaining_secs,
                };
            }
            ConnEvent::GaveUp { reason } => {
                self.mark_streams_stale();
                self.notice(
                    Level::Error,
                    format!("disconnected: {reason} — press Ctrl-R to reconnect"),
                );
                self.conn = ConnState::Disconnected { reason };
            }
            ConnEvent::Opened {
                session,
                pending_permissions,
            } => {
                // The connection task replays an opened session from seq 1, so whatever is
                // shown goes — except the notices before the very first session.
                if self.session.is_some() {
                    self.reset_session();
                }
                self.session = Some(SessionMeta {
                    id: session.id.clone(),
                    title: session.title.clone(),
                });
                self.add_pending(&pending_permissions);
            }
            ConnEvent::Resumed {
                pending_permissions,
            } => self.add_pending(&pending_permissions),
            ConnEvent::Events(frames) => {
                for frame in &frames {
                    self.apply_event(frame);
                }
            }
            ConnEvent::Delta(delta) => self.apply_delta(&delta),
            ConnEvent::Sessions(list) => {
                if let Some(Overlay::Sessions { items, selected }) = &mut self.overlay {
                    *selected = (*selected).min(list.len().saturating_sub(1));
                    *items = Some(list);
                }
            }
            ConnEvent::Teams(list) => {
                if let Some(Overlay::Teams { items, selected }) = &mut self.overlay {
                    *selected = (*selected).min(list.len().saturating_sub(1));
                    *items = Some(list);
                }
            }
            ConnEvent::Mcp(servers) => self.show_mcp(&servers),
            ConnEvent::DelegateRetried { call_id, result } => {
                self.delegate_retried(&call_id, Some(result), "")
            }
            ConnEvent::DelegateRetryFailed { call_id, message } => {
                self.delegate_retried(&call_id, None, &message)
            }
            ConnEvent::Submitted { request_id, run_id } => {
                if self
                    .submitting
                    .as_ref()
                    .is_some_and(|(id, _)| *id == request_id)
                {
                    self.submitting = None;
                }
                if self.run.is_none() && !self.finished_runs.contains(&run_id) {
                    self.run = Some(ActiveRun {
                        run_id,
                        started_ms: self.now_ms,
                    });
                }
            }
            ConnEvent::Failed {
                request_id,
                message,
            } => {
                let submit = self
                    .submitting
                    .as_ref()
                    .is_some_and(|(id, _)| Some(id) == request_id.as_ref());
                if submit {
                    if let Some((_, prompt)) = self.submitting.take() {
                        // Give the prompt back rather than make the user type it again.
                        if self.editor.is_empty() {
                            self.editor.set_text(&prompt);
                        }
                    }
                }
                if let Some(
                    Overlay::Sessions { items: None, .. } | Overlay::Teams { items: None, .. },
                ) = self.overlay
                {
                    self.overlay = None;
                }
                self.notice(Level::Error, message);
            }
            ConnEvent::Notice(text) => self.notice(Level::Info, text),
        }
    }

    /// Forgets everything about the shown session (a different one is being opened).
    pub(crate) fn reset_session(&mut self) {
        self.transcript.clear();
        self.session = None;
        self.run = None;
        self.submitting = None;
        self.tokens = 0;
        self.team_transcript = None;
        self.context = None;
        self.running_tools.clear();
        self.parked.clear();
        self.permissions.clear();
        self.permission_ui = PermissionUi::default();
        self.assistant_entries.clear();
        self.tool_entries.clear();
        self.request_calls.clear();
        self.stale_steps.clear();
        self.finished_steps.clear();
        self.finished_runs.clear();
        self.answered.clear();
        self.selected_tool = None;
    }

    /// After a disconnect some deltas are lost: streamed previews stop growing and wait for
    /// their durable message.
    fn mark_streams_stale(&mut self) {
        for (key, index) in &self.assistant_entries {
            if let Some(EntryKind::Assistant {
                streaming: true, ..
            }) = self.transcript.get(*index)
            {
                self.stale_steps.insert(key.clone());
            }
        }
    }

    fn end_run(&mut self, run_id: &str) {
        self.thinking = false;
        self.finished_runs.insert(run_id.to_string());
        if self.run.as_ref().is_some_and(|r| r.run_id == run_id) {
            self.run = None;
        }
        self.running_tools.clear();
        let streaming: Vec<usize> = self
            .assistant_entries
            .iter()
            .filter(|((run, _), _)| run == run_id)
            .map(|(_, index)| *index)
            .collect();
        for index in streaming {
            if let Some(EntryKind::Assistant { streaming, .. }) = self.transcript.get(index) {
                if *streaming {
                    if let Some(EntryKind::Assistant { streaming, .. }) =
                        self.transcript.get_mut(index)
                    {
                        *streaming = false;
                    }
                }
            }
        }
    }

    /// One durable event of the open session.
    pub(crate) fn apply_event(&mut self, frame: &EventFrame) {
        self.parked.apply(&frame.event);
        if frame.stream != MAIN_STREAM {
            self.apply_side_stream(frame);
            return;
        }
        match &frame.event {
            Event::TeamEntered(e) => self.team_transcript = Some(TeamTranscript::of(e)),
            Event::TeamExited(_) => self.team_transcript = None,
            _ => {}
        }
        match &frame.event {
            Event::SessionCreated { title, .. } => {
                if let Some(session) = &mut self.session {
                    session.title = title.clone();
                }
            }
            Event::SessionArchived {} => self.notice(Level::Warning, "this session was archived"),
            Event::RunStarted { run_id, model, .. } => {
                if !self.finished_runs.contains(run_id) {
                    self.run = Some(ActiveRun {
                        run_id: run_id.clone(),
                        started_ms: frame.ts_ms,
                    });
                }
                self.model = Some(model.clone());
            }
            Event::RunCompleted { run_id, .. } => self.end_run(run_id),
            Event::RunQueued { prompt, .. } => {
                self.transcript
                    .push(EntryKind::Dim(format!("queued: {}", first_line(prompt))));
            }
            Event::MessageSteering { text, .. } => {
                self.transcript.push(EntryKind::User {
                    text: text.clone(),
                    skill: None,
                });
            }
            Event::HookCompleted {
                event,
                hook,
                blocked: true,
                ..
            } => {
                self.transcript
                    .push(EntryKind::Dim(format!("{event} hook `{hook}` blocked")));
            }
            Event::HookCompleted { .. } => {}
            Event::RunFailed {
                run_id,
                code,
                message,
            } => {
                self.end_run(run_id);
                self.notice(Level::Error, format!("the run failed ({code}): {message}"));
            }
            Event::RunInterrupted { run_id, reason } => {
                self.end_run(run_id);
                self.notice(Level::Warning, format!("interrupted: {reason}"));
            }
            Event::StepCompleted { stop_reason, .. } if stop_reason == "max_tokens" => self.notice(
                Level::Warning,
                "the answer was cut off: the model reached its output token limit",
            ),
            Event::StepStarted { .. }
            | Event::StepCompleted { .. }
            | Event::StepInterrupted { .. } => {}
            Event::MessageUser { text, skill, .. } => {
                self.transcript.push(EntryKind::User {
                    text: text.clone(),
                    skill: skill.clone(),
                });
            }
            Event::MessageAssistant {
                run_id, step, text, ..
            } => {
                self.thinking = false;
                self.apply_assistant(run_id, *step, text);
            }
            Event::ModelRequested { model, .. } => self.model = Some(model.clone()),
            Event::ModelResponded {
                model, provider, ..
            } if provider == "fallback" => self.notice(
                Level::Warning,
                format!("the primary model failed; the fallback model {model} answered"),
            ),
            Event::ModelResponded { .. } => {}
            Event::UsageRecorded {
                usage,
                context_tokens,
                max_tokens,
                ..
            } => {
                self.tokens += usage.input_tokens + usage.output_tokens;
                self.context = Some((*context_tokens, *max_tokens));
            }
            Event::ToolStarted {
                call_id,
                tool,
                arguments,
                ..
            } => self.tool_started(frame.ts_ms, call_id, tool, arguments),
            Event::ToolCompleted {
                call_id,
                tool,
                is_error,
                output,
                metadata,
                ..
            } => {
                let index = self.tool_entry(call_id, tool);
                if let Some(EntryKind::Tool(entry)) = self.transcript.get_mut(index) {
                    entry.state = if *is_error {
                        ToolState::Failed
                    } else {
                        ToolState::Succeeded
                    };
                    entry.output = output.clone();
                    entry.diff = metadata
                        .get("diff")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    entry.exit_code = metadata.get("exit_code").and_then(Value::as_i64);
                    entry.artifact = ToolArtifact::from_metadata(metadata);
                }
                self.running_tools.retain(|t| t.call_id != *call_id);
            }
            Event::ToolInterrupted {
                call_id,
                tool,
                reason,
                ..
            } => {
                let index = self.tool_entry(call_id, tool);
                if let Some(EntryKind::Tool(entry)) = self.transcript.get_mut(index) {
                    entry.state = ToolState::Interrupted(reason.clone());
                }
                self.running_tools.retain(|t| t.call_id != *call_id);
            }
            Event::PermissionRequested { .. } => self.apply_permission_request(&frame.event),
            Event::PermissionResolved {
                request_id,
                decision,
                by,
                reason,
                ..
            } => self.permission_resolved(request_id, *decision, by, reason.as_deref()),
            Event::TaskUpdated { todos } => {
                self.transcript.push(EntryKind::Tasks(todos.clone()));
            }
            Event::Warning { message, .. } => self.notice(Level::Warning, message.clone()),
            Event::Checkpoint {
                tokens_before,
                tokens_after,
                ..
            } => {
                self.transcript.push(EntryKind::Dim(format!(
                    "context compacted: {tokens_before} → {tokens_after} tokens"
                )));
            }
            // Sub-agents: their own runs arrive on `agent/<child_id>` streams (dim lines, see
            // `apply_side_stream`); the main stream says when one starts and ends.
            Event::AgentStarted {
                prompt,
                description,
                ..
            } => {
                let task = description.as_deref().unwrap_or(prompt);
                self.transcript.push(EntryKind::Dim(format!(
                    "sub-agent started: {}",
                    first_line(task)
                )));
            }
            Event::AgentCompleted {
                result, is_error, ..
            } => {
                let verb = if *is_error { "failed" } else { "finished" };
                self.transcript.push(EntryKind::Dim(format!(
                    "sub-agent {verb}: {}",
                    first_line(result)
                )));
            }
            Event::AgentInterrupted { reason, .. } => {
                self.transcript
                    .push(EntryKind::Dim(format!("sub-agent interrupted: {reason}")));
            }
            Event::GoalStarted { objective, .. } => {
                self.transcript
                    .push(EntryKind::Dim(format!("goal: {}", first_line(objective))));
            }
            // Progress after every turn is too chatty for the transcript; state changes show.
            Event::GoalUpdated {
                state: GoalState::Running,
                ..
            } => {}
            Event::GoalUpdated { state, reason, .. } => {
                let why = reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default();
                self.transcript
                    .push(EntryKind::Dim(format!("goal {state}{why}")));
            }
            Event::GoalCompleted {
                state,
                summary,
                reason,
                ..
            } => {
                let detail = summary.as_deref().or(reason.as_deref()).unwrap_or("");
                self.transcript.push(EntryKind::Dim(format!(
                    "goal {state}: {}",
                    first_line(detail)
                )));
            }
            Event::MemoryRecalled { source_ids, .. } => {
                self.transcript
                    .push(EntryKind::Dim(recalled_line(source_ids)));
            }
            event @ Event::DelegateUpdated { .. } => {
                if let Some(line) = delegate_line(event) {
                    self.transcript.push(EntryKind::Dim(line));
                }
            }
            Event::McpSignInRequired { server, url, .. } => self.notice(
                Level::Warning,
                format!("MCP server `{server}` needs you to sign in: open {url}"),
            ),
            event @ Event::McpSignInEnded { .. } => {
                if let Some(line) = sign_in_line(event) {
                    self.transcript.push(EntryKind::Dim(line));
                }
            }
            Event::TeamEntered(_)
            | Event::TeamExited(_)
            | Event::TeamCompleted(_)
            | Event::TeamContractWritten(_)
            | Event::TeamRoundStarted(_)
            | Event::TeamRoundEnded(_)
            | Event::TeamTaskDispatched(_)
            | Event::TeamTaskEnded(_)
            | Event::TeamMessageSent(_)
            | Event::TeamMessagesDelivered(_)
            | Event::TeamGateChecked(_)
            | Event::TeamFollowUpOpened(_)
            | Event::TeamFollowUpResolved(_) => {
                if let Some(line) = team_line(&frame.event) {
                    self.transcript.push(EntryKind::Dim(line));
                }
            }
            // Journaled on the member's stream only (`apply_side_stream`).
            Event::TeamMemberThinking(_) | Event::TeamTaskStarted(_) => {}
            Event::Unknown => {
                self.transcript.push(EntryKind::Dim(format!(
                    "event #{} of a kind this version does not know",
                    frame.seq
                )));
            }
        }
    }

    fn apply_assistant(&mut self, run_id: &str, step: u32, text: &str) {
        let key = (run_id.to_string(), step);
        self.finished_steps.insert(key.clone());
        match self.assistant_entries.get(&key) {
            Some(&index) => {
                if let Some(EntryKind::Assistant {
                    text: shown,
                    streaming,
                }) = self.transcript.get_mut(index)
                {
                    *shown = text.to_string();
                    *streaming = false;
                }
            }
            None if !text.trim().is_empty() => {
                let index = self.transcript.push(EntryKind::Assistant {
                    text: text.to_string(),
                    streaming: false,
                });
                self.assistant_entries.insert(key, index);
            }
            None => {}
        }
    }

    fn tool_started(&mut self, ts_ms: i64, call_id: &str, tool: &str, arguments: &Value) {
        let index = self.transcript.push(EntryKind::Tool(ToolEntry::new(
            call_id,
            tool,
            arguments.clone(),
        )));
        self.tool_entries.insert(call_id.to_string(), index);
        self.running_tools.push(RunningTool {
            call_id: call_id.to_string(),
            tool: tool.to_string(),
            summary: tool_summary(tool, arguments),
            started_ms: ts_ms,
        });
    }

    /// The entry of `call_id`, created when its start was never seen.
    fn tool_entry(&mut self, call_id: &str, tool: &str) -> usize {
        if let Some(&index) = self.tool_entries.get(call_id) {
            return index;
        }
        let index = self.transcript.push(EntryKind::Tool(ToolEntry::new(
            call_id,
            tool,
            Value::Object(Default::default()),
        )));
        self.tool_entries.insert(call_id.to_string(), index);
        index
    }

    /// Events of child streams (sub-agents, teams): permission requests work as usual, usage
    /// counts, everything else is one dim line.
    fn apply_side_stream(&mut self, frame: &EventFrame) {
        let stream = &frame.stream;
        // A team's `transcript` choices: member dialogue, tool starts with arguments,
        // members' thinking.
        if stream.starts_with("team/") && !TeamTranscript::shows(self.team_transcript, &frame.event)
        {
            return;
        }
        let text = match &frame.event {
            Event::PermissionRequested { .. } => {
                self.apply_permission_request(&frame.event);
                return;
            }
            Event::PermissionResolved {
                request_id,
                decision,
                by,
                reason,
                ..
            } => {
                self.permission_resolved(request_id, *decision, by, reason.as_deref());
                return;
            }
            Event::UsageRecorded { usage, .. } => {
                self.tokens += usage.input_tokens + usage.output_tokens;
                return;
            }
            Event::MessageAssistant { text, .. } if !text.trim().is_empty() => {
                format!("says: {}", first_line(text))
            }
            Event::MessageUser { text, .. } => format!("asked: {}", first_line(text)),
            Event::ToolStarted {
                tool, arguments, ..
            } => format!("{tool} {}", tool_summary(tool, arguments)),
            Event::ToolCompleted { tool, is_error, .. } => {
                format!("{tool} {}", if *is_error { "failed" } else { "done" })
            }
            Event::RunFailed { message, .. } => format!("failed: {message}"),
            Event::Warning { message, .. } => format!("warning: {message}"),
            event @ (Event::TeamContractWritten(_)
            | Event::TeamRoundStarted(_)
            | Event::TeamRoundEnded(_)
            | Event::TeamTaskDispatched(_)
            | Event::TeamTaskEnded(_)
            | Event::TeamMessageSent(_)
            | Event::TeamGateChecked(_)
            | Event::TeamFollowUpOpened(_)
            | Event::TeamFollowUpResolved(_)
            | Event::TeamMemberThinking(_)) => match team_line(event) {
                Some(line) => line,
                None => return,
            },
            Event::TeamMessagesDelivered(_) => return,
            Event::TeamTaskStarted(e) => format!("runs on instance {}", e.instance_id),
            event @ Event::DelegateUpdated { .. } => match delegate_line(event) {
                Some(line) => line,
                None => return,
            },
            Event::Unknown => format!("event #{} of a kind this version does not know", frame.seq),
            other => other.kind().to_string(),
        };
        self.transcript
            .push(EntryKind::Dim(format!("[{stream}] {text}")));
    }

    /// Streamed text of an assistant message.
    pub(crate) fn apply_delta(&mut self, delta: &DeltaFrame) {
        self.thinking = delta.channel == "thinking";
        if delta.channel != "text" || delta.text.is_empty() {
            return;
        }
        let key = (delta.run_id.clone(), delta.step);
        if self.finished_steps.contains(&key) || self.stale_steps.contains(&key) {
            return;
        }
        match self.assistant_entries.get(&key) {
            Some(&index) => {
                if let Some(EntryKind::Assistant { text, .. }) = self.transcript.get_mut(index) {
                    text.push_str(&delta.text);
                }
            }
            None => {
                let index = self.transcript.push(EntryKind::Assistant {
                    text: delta.text.clone(),
                    streaming: true,
                });
                self.assistant_entries.insert(key, index);
            }
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// Source ids shown on a `memory.recalled` line before "+N more".
const RECALLED_SHOWN: usize = 3;

/// `memory: 2 earlier item(s) recalled — s1:4, s2:9`: which evidence the turn was given.
/// A transcript line for a delegation step (`delegate.updated`): the card and sent steps
/// are not worth a line; status, artifacts and the end are.
fn delegate_line(event: &Event) -> Option<String> {
    use lumina_client::protocol::DelegateStep;
    let Event::DelegateUpdated {
        agent,
        step,
        state,
        detail,
        ..
    } = event
    else {
        return None;
    };
    let state = state
        .as_deref()
        .map(|s| {
            s.trim_start_matches("TASK_STATE_")
                .to_ascii_lowercase()
                .replace('_', "-")
        })
        .unwrap_or_default();
    let detail = first_line(detail);
    let line = match step {
        DelegateStep::Card | DelegateStep::Sent => return None,
        DelegateStep::Status => format!("a2a {agent}: {state} {detail}"),
        DelegateStep::Artifact => format!("a2a {agent}: artifact {detail}"),
        DelegateStep::Ended => format!("a2a {agent}: ended {state} {detail}"),
        DelegateStep::Unreachable => format!("a2a {agent}: unreachable — {detail}"),
        DelegateStep::Waiting => format!("a2a {agent}: waiting (unreachable) — {detail}"),
    };
    Some(line.trim_end().to_owned())
}

/// A transcript line for the end of an MCP sign-in (`mcp.sign_in_ended`).
fn sign_in_line(event: &Event) -> Option<String> {
    use lumina_client::protocol::SignInOutcome;
    let Event::McpSignInEnded {
        server,
        outcome,
        detail,
        ..
    } = event
    else {
        return None;
    };
    Some(match outcome {
        SignInOutcome::SignedIn => format!("mcp {server}: signed in"),
        SignInOutcome::TimedOut => {
            format!("mcp {server}: nobody signed in in time; going on without its tools")
        }
        SignInOutcome::Failed => format!(
            "mcp {server}: sign-in failed, going on without its tools — {}",
            first_line(detail)
        ),
    })
}

fn recalled_line(source_ids: &[String]) -> String {
    let mut line = format!("memory: {} earlier item(s) recalled", source_ids.len());
    if !source_ids.is_empty() {
        let shown: Vec<&str> = source_ids
            .iter()
            .take(RECALLED_SHOWN)
            .map(String::as_str)
            .collect();
        line.push_str(" — ");
        line.push_str(&shown.join(", "));
        if source_ids.len() > RECALLED_SHOWN {
            line.push_str(&format!(", +{} more", source_ids.len() - RECALLED_SHOWN));
        }
    }
    line
}

/// Tool names shown per server on a `/mcp` line before "+N more".
const MCP_TOOLS_SHOWN: usize = 6;

impl App {
    /// `/mcp`: one line per server.
    fn show_mcp(&mut self, servers: &[McpServerStatus]) {
        if servers.is_empty() {
            self.notice(
                Level::Info,
                "no MCP servers: add them to the project's .mcp.json or to config/mcp.json in \
                 the Lumina home",
            );
            return;
        }
        for server in servers {
            let level = match server.state.as_str() {
                "failed" => Level::Error,
                "untrusted" => Level::Warning,
                _ => Level::Info,
            };
            let mut line = format!(
                "mcp {} ({} {}): {}",
                server.name, server.source, server.transport, server.state
            );
            if let Some(version) = &server.protocol_version {
                line.push_str(&format!(", protocol {version}"));
            }
            if let Some(detail) = &server.detail {
                line.push_str(&format!(" — {detail}"));
            }
            if !server.tools.is_empty() {
                let shown: Vec<&str> = server
                    .tools
                    .iter()
                    .take(MCP_TOOLS_SHOWN)
                    .map(String::as_str)
                    .collect();
                line.push_str(&format!(
                    " — {} tool(s): {}",
                    server.tools.len(),
                    shown.join(", ")
                ));
                if server.tools.len() > MCP_TOOLS_SHOWN {
                    line.push_str(&format!(", +{} more", server.tools.len() - MCP_TOOLS_SHOWN));
                }
            }
            self.notice(level, line);
        }
    }
}
