//! `lumina -p PROMPT`: one run without the interactive UI.
//!
//! Creates (or resumes) a session, subscribes from its current head, submits the prompt with
//! a fresh idempotency key and `headless: true`, then follows the session's frames until the
//! run's terminal event. Output goes through [`Output`] according to `--output-format`.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Context};
use lumina_client::protocol::methods::{
    SessionCreateParams, SessionInfo, SessionSubmitParams, TeamEnterParams,
};
use lumina_client::protocol::{ErrorCode, ErrorObject, EventFrame, ServerFrame};
use lumina_client::{
    catch_up, Client, ClientError, Notification, Notifications, Offer, SessionView,
};
use serde_json::Value;

use crate::cli::OutputFormat;
use crate::team_report::TeamTracker;
use crate::tracker::{Effect, Outcome, RunTracker};

/// Exit code after Ctrl-C, as shells report SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;

/// How long the interrupt request may take after Ctrl-C before we exit anyway.
const INTERRUPT_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest session title derived from the prompt, in characters.
const TITLE_CHARS: usize = 80;

/// What `-p` needs besides the connection.
pub struct PromptRequest<'a> {
    pub prompt: &'a str,
    pub resume: Option<&'a str>,
    pub project_root: &'a Path,
    /// The `settings` member of `session.submit`.
    pub settings: Value,
    pub format: OutputFormat,
    /// `--team NAME`: the session enters the team before the prompt is submitted.
    pub team: Option<&'a str>,
}

/// Runs the prompt to its end; returns the process exit code.
pub async fn run_prompt(
    client: &Client,
    notifications: &mut Notifications,
    request: PromptRequest<'_>,
) -> anyhow::Result<ExitCode> {
    let session = open_session(client, &request).await?;
    let session_id = session.id.clone();
    let mut view = SessionView::new(session.head_seq);
    client
        .session_resume(&session_id, session.head_seq)
        .await
        .map_err(|e| anyhow!("cannot subscribe to session {session_id}: {e}"))?;

    let mut team = match request.team {
        None => None,
        Some(name) => {
            let entered = client
                .calls()
                .team_enter(&TeamEnterParams {
                    session_id: session_id.clone(),
                    team: name.to_string(),
                })
                .await
                .map_err(|e| anyhow!("cannot enter the team `{name}`: {e}"))?;
            let members = entered
                .members
                .into_iter()
                .filter(|m| *m != entered.entry_agent)
                .collect();
            Some(TeamTracker::new(entered.team_run_id, entered.team, members))
        }
    };
    let idempotency_key = uuid::Uuid::new_v4().to_string();
    let mut tracker = RunTracker::new(idempotency_key.clone());
    let mut output = Output::new(request.format);
    let params = SessionSubmitParams {
        session_id: session_id.clone(),
        idempotency_key,
        prompt: request.prompt.to_string(),
        settings: request.settings,
        headless: true,
        mode: None,
    };
    let submit = client.session_submit(&params);
    tokio::pin!(submit);
    let mut submitted = false;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut ctrl_c_armed = true;

    while tracker.outcome().is_none() {
        tokio::select! {
            result = &mut submit, if !submitted => {
                submitted = true;
                let result = result.map_err(|e| anyhow!("the backend did not accept the prompt: {e}"))?;
                let effects = tracker.set_run_id(&result.run_id);
                output.apply(effects);
                if !result.created {
                    let run = &result.run;
                    tracker.finish_from_summary(&run.status, run.result.as_deref(), run.error.as_deref());
                }
            }
            notification = notifications.recv() => match notification {
                Some(Notification::Event(frame)) if frame.session_id == session_id => {
                    let ready: Vec<EventFrame> = match view.offer(frame) {
                        Offer::Ready(frames) => frames,
                        Offer::Duplicate => Vec::new(),
                        Offer::Gap { .. } => catch_up(client, &session_id, &mut view)
                            .await
                            .map_err(|e| anyhow!("cannot fetch missed events of session {session_id}: {e}"))?,
                    };
                    for frame in ready {
                        if let Some(team) = &mut team {
                            team.event(&frame);
                        }
                        let effects = tracker.event(&frame);
                        output.frame(&ServerFrame::Event(frame));
                        output.apply(effects);
                    }
                }
                Some(Notification::Delta(delta)) if delta.session_id == session_id => {
                    let effects = tracker.delta(&delta);
                    output.frame(&ServerFrame::Delta(delta));
                    output.apply(effects);
                }
                Some(Notification::ProtocolError(error)) => {
                    output.apply(vec![Effect::Notice(format!("the backend reported a protocol error: {error}"))]);
                    output.frame(&ServerFrame::Error { id: None, error });
                }
                // Frames of other sessions on a shared connection.
                Some(Notification::Event(_) | Notification::Delta(_)) => {}
                Some(Notification::Closed(reason)) => {
                    return Err(anyhow!("lost the connection to the backend before the run finished ({reason})"));
                }
                None => return Err(anyhow!("lost the connection to the backend before the run finished")),
            },
            signal = &mut ctrl_c, if ctrl_c_armed => {
                if signal.is_err() {
                    // No signal handler: keep running without Ctrl-C support.
                    ctrl_c_armed = false;
                    continue;
                }
                tracker.interrupted_by_user();
                let interrupt = client
                    .with_call_timeout(INTERRUPT_TIMEOUT)
                    .session_interrupt(&session_id, tracker.run_id())
                    .await;
                if let Err(error) = interrupt {
                    output.apply(vec![Effect::Notice(format!("could not interrupt the run: {error}"))]);
                }
                output.finish(&tracker, &session_id, team.as_ref());
                return Ok(ExitCode::from(EXIT_INTERRUPTED));
            }
        }
    }
    output.finish(&tracker, &session_id, team.as_ref());
    Ok(match tracker.outcome() {
        Some(Outcome::Completed { .. }) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

async fn open_session(client: &Client, request: &PromptRequest<'_>) -> anyhow::Result<SessionInfo> {
    match request.resume {
        Some(id) => match client.session_info(id).await {
            Ok(info) => Ok(info.session),
            Err(ClientError::Server(ErrorObject {
                code: ErrorCode::NotFound,
                ..
            })) => Err(anyhow!("no session {id} (see `lumina --list`)")),
            Err(error) => Err(anyhow!("cannot open session {id}: {error}")),
        },
        None => {
            let params = SessionCreateParams {
                project_root: Some(request.project_root.display().to_string()),
                title: Some(title_from_prompt(request.prompt)),
            };
            client
                .session_create(&params)
                .await
                .context("cannot create a session")
        }
    }
}

/// The first non-blank line of the prompt, shortened to [`TITLE_CHARS`].
pub fn title_from_prompt(prompt: &str) -> String {
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    if line.chars().count() <= TITLE_CHARS {
        line.to_string()
    } else {
        let mut title: String = line.chars().take(TITLE_CHARS - 1).collect();
        title.push('…');
        title
    }
}

/// Writes according to the output format. Write errors on stdout (a closed pipe) are ignored:
/// the run still ends cleanly and the exit code still tells the outcome.
struct Output {
    format: OutputFormat,
    /// True when the last text written to stdout did not end a line.
    mid_line: bool,
    stdout_is_terminal: bool,
}

impl Output {
    fn new(format: OutputFormat) -> Self {
        Self {
            format,
            mid_line: false,
            stdout_is_terminal: std::io::stdout().is_terminal(),
        }
    }

    /// `stream-json`: every frame as it arrives, one JSON object per line.
    fn frame(&mut self, frame: &ServerFrame) {
        if self.format == OutputFormat::StreamJson {
            if let Ok(line) = serde_json::to_string(frame) {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{line}");
                let _ = stdout.flush();
            }
        }
    }

    fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Text(text) if self.format == OutputFormat::Text => {
                    let mut stdout = std::io::stdout().lock();
                    let _ = stdout.write_all(text.as_bytes());
                    let _ = stdout.flush();
                    self.mid_line = !text.ends_with('\n');
                }
                Effect::Text(_) => {}
                Effect::Notice(message) => self.stderr_line(&message),
                Effect::Failure(message) if self.format == OutputFormat::Text => {
                    self.stderr_line(&message)
                }
                Effect::Failure(_) => {}
            }
        }
    }

    fn stderr_line(&mut self, message: &str) {
        // On a terminal, do not glue the notice to a half-written line of the answer.
        if self.mid_line && self.stdout_is_terminal {
            self.end_line();
        }
        eprintln!("lumina: {message}");
    }

    fn end_line(&mut self) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(b"\n");
        let _ = stdout.flush();
        self.mid_line = false;
    }

    fn finish(&mut self, tracker: &RunTracker, session_id: &str, team: Option<&TeamTracker>) {
        let kind = match self.format {
            OutputFormat::Text => {
                if self.mid_line {
                    self.end_line();
                }
                return;
            }
            OutputFormat::Json => None,
            OutputFormat::StreamJson => Some("result"),
        };
        let mut report = tracker.report(session_id, kind);
        report.team = team.map(TeamTracker::report);
        if let Ok(line) = serde_json::to_string(&report) {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{line}");
            let _ = stdout.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn titles_come_from_the_first_line() {
        assert_eq!(
            title_from_prompt("\n  fix the build \nmore"),
            "fix the build"
        );
        let long = "x".repeat(200);
        let title = title_from_prompt(&long);
        assert_eq!(title.chars().count(), TITLE_CHARS);
        assert!(title.ends_with('…'));
        assert_eq!(title_from_prompt(""), "");
    }
}
