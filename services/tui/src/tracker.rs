//! Following one headless run through the session's frames, without I/O.
//!
//! [`RunTracker`] is fed the session's events (already deduplicated and ordered by
//! `SessionView`) and its deltas, recognises the run it submitted (by idempotency key or by
//! the id `session.submit` returned), and turns what it sees into [`Effect`]s for the
//! terminal and, at the end, a [`FinalReport`].

use std::collections::{HashMap, HashSet};

use lumina_client::protocol::{Decision, DeltaFrame, Event, EventFrame, RunStatus, Usage};
use serde::Serialize;
use serde_json::Value;

/// Something to show while the run goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Assistant text for stdout (text format only).
    Text(String),
    /// A one-line notice for stderr in every format (warnings, headless denials).
    Notice(String),
    /// The run's failure, for stderr in the text format (JSON formats carry it in `error`).
    Failure(String),
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Completed { result: String, usage: Usage },
    Failed { code: String, message: String },
    Interrupted { reason: String },
}

/// A permission request that was denied, as listed in the final report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Denial {
    pub tool: String,
    pub request_id: String,
    pub call_id: String,
    pub arguments: Value,
    /// Who decided: `headless`, `rule`, `mode`, `user`...
    pub by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorInfo {
    pub code: String,
    pub message: String,
}

/// The object printed by `--output-format json` (and, with `"type": "result"`, as the last
/// line of `stream-json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FinalReport {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub session_id: String,
    pub run_id: Option<String>,
    /// The run's final answer; for a run that did not complete, its last assistant text.
    pub result: String,
    pub is_error: bool,
    pub usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    pub permission_denials: Vec<Denial>,
    /// `--team`: the team's members, gates and rounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<crate::team_report::TeamReport>,
}

struct Requested {
    tool: String,
    call_id: String,
    arguments: Value,
}

/// State of the one run this invocation submitted.
pub struct RunTracker {
    idempotency_key: String,
    run_id: Option<String>,
    /// Deltas seen before the run id was known; replayed (filtered) once it is.
    early_deltas: Vec<DeltaFrame>,
    requests: HashMap<String, Requested>,
    denials: Vec<Denial>,
    usage: Usage,
    last_assistant_text: String,
    outcome: Option<Outcome>,
    // Text streaming: what was printed per step, and which steps are final.
    printed: HashMap<u32, String>,
    finished_steps: HashSet<u32>,
    current_step: Option<u32>,
    printed_any: bool,
    at_line_start: bool,
}

impl RunTracker {
    pub fn new(idempotency_key: impl Into<String>) -> Self {
        Self {
            idempotency_key: idempotency_key.into(),
            run_id: None,
            early_deltas: Vec::new(),
            requests: HashMap::new(),
            denials: Vec::new(),
            usage: Usage::default(),
            last_assistant_text: String::new(),
            outcome: None,
            printed: HashMap::new(),
            finished_steps: HashSet::new(),
            current_step: None,
            printed_any: false,
            at_line_start: true,
        }
    }

    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    /// True when any assistant text was emitted and the output does not end with a newline.
    pub fn needs_final_newline(&self) -> bool {
        self.printed_any && !self.at_line_start
    }

    /// The run id from `session.submit`. Returns the effects of deltas held until now.
    pub fn set_run_id(&mut self, run_id: &str) -> Vec<Effect> {
        if self.run_id.is_some() {
            return Vec::new();
        }
        self.run_id = Some(run_id.to_string());
        let early = std::mem::take(&mut self.early_deltas);
        early.iter().flat_map(|delta| self.delta(delta)).collect()
    }

    /// Ends the run from `session.submit`'s summary, for a submit that returned an already
    /// finished run (an idempotent replay whose events precede our subscription).
    pub fn finish_from_summary(
        &mut self,
        status: &RunStatus,
        result: Option<&str>,
        error: Option<&str>,
    ) {
        if self.outcome.is_some() {
            return;
        }
        self.outcome = match status {
            RunStatus::Completed => Some(Outcome::Completed {
                result: result.unwrap_or_default().to_string(),
                usage: self.usage,
            }),
            RunStatus::Failed => Some(Outcome::Failed {
                code: "failed".into(),
                message: error.unwrap_or("the run failed").to_string(),
            }),
            RunStatus::Interrupted => Some(Outcome::Interrupted {
                reason: error.unwrap_or("interrupted").to_string(),
            }),
            _ => None,
        };
    }

    /// Records that the user stopped the run here (Ctrl-C), unless it already ended.
    pub fn interrupted_by_user(&mut self) {
        if self.outcome.is_none() {
            self.outcome = Some(Outcome::Interrupted {
                reason: "interrupted by the user".into(),
            });
        }
    }

    fn is_ours(&self, run_id: &str) -> bool {
        self.run_id.as_deref() == Some(run_id)
    }

    /// One streamed delta of the session.
    pub fn delta(&mut self, delta: &DeltaFrame) -> Vec<Effect> {
        if self.run_id.is_none() {
            self.early_deltas.push(delta.clone());
            return Vec::new();
        }
        if !self.is_ours(&delta.run_id)
            || delta.channel != "text"
            || self.finished_steps.contains(&delta.step)
        {
            return Vec::new();
        }
        self.emit_text(delta.step, &delta.text)
    }

    fn emit_text(&mut self, step: u32, text: &str) -> Vec<Effect> {
        if text.is_empty() {
            return Vec::new();
        }
        let mut out = String::new();
        if self.current_step != Some(step) && !self.at_line_start {
            out.push('\n');
        }
        self.current_step = Some(step);
        out.push_str(text);
        self.printed.entry(step).or_default().push_str(text);
        self.printed_any = true;
        self.at_line_start = out.ends_with('\n');
        vec![Effect::Text(out)]
    }

    /// One durable event of the session, in journal order.
    pub fn event(&mut self, frame: &EventFrame) -> Vec<Effect> {
        // A submit to a busy session is queued first and started later, with the same key.
        if let Event::RunStarted {
            run_id,
            idempotency_key,
            ..
        }
        | Event::RunQueued {
            run_id,
            idempotency_key,
            ..
        } = &frame.event
        {
            if *idempotency_key == self.idempotency_key {
                return self.set_run_id(run_id);
            }
        }
        match frame.event.run_id() {
            Some(run_id) if self.is_ours(run_id) => self.our_event(&frame.event),
            // Session-wide warnings matter once our run is under way.
            None if self.run_id.is_some() => match &frame.event {
                Event::Warning { message, .. } => {
                    vec![Effect::Notice(format!("warning: {message}"))]
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    fn our_event(&mut self, event: &Event) -> Vec<Effect> {
        match event {
            Event::MessageAssistant { step, text, .. } => {
                self.finished_steps.insert(*step);
                if !text.is_empty() {
                    self.last_assistant_text = text.clone();
                }
                // Print what the deltas did not (all of it when nothing was streamed).
                let printed = self.printed.get(step).map(String::as_str).unwrap_or("");
                match text.strip_prefix(printed) {
                    Some(rest) if !rest.is_empty() => {
                        let rest = rest.to_string();
                        self.emit_text(*step, &rest)
                    }
                    _ => Vec::new(),
                }
            }
            Event::PermissionRequested {
                request_id,
                call_id,
                tool,
                arguments,
                ..
            } => {
                self.requests.insert(
                    request_id.clone(),
                    Requested {
                        tool: tool.clone(),
                        call_id: call_id.clone(),
                        arguments: arguments.clone(),
                    },
                );
                Vec::new()
            }
            Event::PermissionResolved {
                request_id,
                decision: Decision::Deny,
                by,
                reason,
                ..
            } => self.denied(request_id, by, reason.as_deref()),
            Event::UsageRecorded { usage, .. } => {
                self.usage.add(usage);
                Vec::new()
            }
            Event::Warning { message, .. } => vec![Effect::Notice(format!("warning: {message}"))],
            Event::RunCompleted { result, usage, .. } => {
                let mut effects = Vec::new();
                if !self.printed_any && !result.is_empty() {
                    effects = self.emit_text(u32::MAX, result);
                }
                self.outcome = Some(Outcome::Completed {
                    result: result.clone(),
                    usage: *usage,
                });
                effects
            }
            Event::RunFailed { code, message, .. } => {
                self.outcome = Some(Outcome::Failed {
                    code: code.to_string(),
                    message: message.clone(),
                });
                vec![Effect::Failure(format!(
                    "the run failed ({code}): {message}"
                ))]
            }
            Event::RunInterrupted { reason, .. } => {
                self.outcome = Some(Outcome::Interrupted {
                    reason: reason.clone(),
                });
                vec![Effect::Failure(format!(
                    "the run was interrupted: {reason}"
                ))]
            }
            _ => Vec::new(),
        }
    }

    fn denied(&mut self, request_id: &str, by: &str, reason: Option<&str>) -> Vec<Effect> {
        let requested = self.requests.remove(request_id);
        let (tool, call_id, arguments) = match requested {
            Some(r) => (r.tool, r.call_id, r.arguments),
            None => ("unknown tool".to_string(), String::new(), Value::Null),
        };
        let notice = (by == "headless").then(|| {
            Effect::Notice(format!(
                "permission for `{tool}` was denied: nobody can answer permission requests \
                 with -p (allow it with --permission-mode or a permissions.allow rule)"
            ))
        });
        self.denials.push(Denial {
            tool,
            request_id: request_id.to_string(),
            call_id,
            arguments,
            by: by.to_string(),
            reason: reason.map(str::to_string),
        });
        notice.into_iter().collect()
    }

    /// The final object. `kind` is `Some("result")` for `stream-json`.
    pub fn report(&self, session_id: &str, kind: Option<&'static str>) -> FinalReport {
        let (result, usage, error) = match &self.outcome {
            Some(Outcome::Completed { result, usage }) => (result.clone(), *usage, None),
            Some(Outcome::Failed { code, message }) => (
                self.last_assistant_text.clone(),
                self.usage,
                Some(ErrorInfo {
                    code: code.clone(),
                    message: message.clone(),
                }),
            ),
            Some(Outcome::Interrupted { reason }) => (
                self.last_assistant_text.clone(),
                self.usage,
                Some(ErrorInfo {
                    code: "interrupted".into(),
                    message: reason.clone(),
                }),
            ),
            None => (
                self.last_assistant_text.clone(),
                self.usage,
                Some(ErrorInfo {
                    code: "incomplete".into(),
                    message: "the run did not finish".into(),
                }),
            ),
        };
        FinalReport {
            kind,
            session_id: session_id.to_string(),
            run_id: self.run_id.clone(),
            result,
            is_error: error.is_some(),
            usage,
            error,
            permission_denials: self.denials.clone(),
            team: None,
        }
    }
}

#[cfg(test)]
#[path = "tracker_tests.rs"]
mod tests;
