//! Delegations parked while their A2A agent is unreachable
//! (docs/a2a.md#a-delegation-parked-while-its-agent-is-down): an `a2a_delegate` call whose
//! latest `delegate.updated` step is `waiting` and that has not ended. The activity line
//! names the agent and the reason and offers Ctrl-R, which retries every parked call with
//! `delegate.retry`; the answer (still unreachable, following again, ended) is a notice.

use lumina_client::protocol::methods::{DelegateRetryResult, DelegateRetryState};
use lumina_client::protocol::{DelegateStep, Event};

use super::app::{App, Command};
use super::transcript::Level;

/// One parked call, as the journal shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedDelegation {
    pub call_id: String,
    pub run_id: String,
    pub agent: String,
    /// The remote task the call keeps (nothing is sent again).
    pub task_id: Option<String>,
    /// Why the agent is unreachable (`delegate.updated.detail`).
    pub detail: String,
    /// A `delegate.retry` for it is on its way.
    pub retrying: bool,
}

/// The parked calls of the open session, in the order they parked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parked {
    calls: Vec<ParkedDelegation>,
}

impl Parked {
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    pub fn calls(&self) -> &[ParkedDelegation] {
        &self.calls
    }

    pub fn clear(&mut self) {
        self.calls.clear();
    }

    fn remove(&mut self, call_id: &str) {
        self.calls.retain(|c| c.call_id != call_id);
    }

    /// Follows one durable event of any stream of the session.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::DelegateUpdated {
                run_id,
                call_id,
                agent,
                step,
                task_id,
                detail,
                ..
            } => match step {
                DelegateStep::Waiting => {
                    let parked = ParkedDelegation {
                        call_id: call_id.clone(),
                        run_id: run_id.clone(),
                        agent: agent.clone(),
                        task_id: task_id.clone(),
                        detail: detail.clone(),
                        retrying: false,
                    };
                    match self.calls.iter_mut().find(|c| c.call_id == *call_id) {
                        // Parked again after a retry: the new reason, retrying or not as
                        // the retry's answer says.
                        Some(existing) => {
                            existing.detail = parked.detail;
                            existing.task_id = parked.task_id.or(existing.task_id.take());
                        }
                        None => self.calls.push(parked),
                    }
                }
                // A retry reading the card, or failing to reach the agent (then it parks
                // again): still parked.
                DelegateStep::Card | DelegateStep::Unreachable => {}
                // The agent answered: the call follows its task again.
                DelegateStep::Sent
                | DelegateStep::Status
                | DelegateStep::Artifact
                | DelegateStep::Ended => self.remove(call_id),
            },
            Event::ToolCompleted { call_id, .. } | Event::ToolInterrupted { call_id, .. } => {
                self.remove(call_id)
            }
            Event::RunCompleted { run_id, .. }
            | Event::RunFailed { run_id, .. }
            | Event::RunInterrupted { run_id, .. } => self.calls.retain(|c| c.run_id != *run_id),
            _ => {}
        }
    }
}

impl App {
    /// Ctrl-R while connected: retries every parked delegation not already being retried.
    pub(crate) fn retry_delegations(&mut self) -> Vec<Command> {
        let mut commands = Vec::new();
        let mut agents = Vec::new();
        for call in self.parked.calls.iter_mut().filter(|c| !c.retrying) {
            call.retrying = true;
            agents.push(format!("`{}`", call.agent));
            commands.push(Command::RetryDelegate {
                call_id: call.call_id.clone(),
            });
        }
        if !agents.is_empty() {
            self.notice(
                Level::Info,
                format!("retrying the A2A agent {}…", agents.join(", ")),
            );
        }
        commands
    }

    /// The answer to a `delegate.retry` of `call_id`: its result, or (`None`) why it failed.
    pub(crate) fn delegate_retried(
        &mut self,
        call_id: &str,
        result: Option<DelegateRetryResult>,
        failure: &str,
    ) {
        let agent = self
            .parked
            .calls
            .iter()
            .find(|c| c.call_id == call_id)
            .map(|c| format!("`{}`", c.agent))
            .unwrap_or_else(|| "the A2A agent".into());
        let (level, text) = match result {
            Some(result) => match result.state {
                DelegateRetryState::Waiting => {
                    if let Some(call) = self.parked.calls.iter_mut().find(|c| c.call_id == call_id)
                    {
                        call.retrying = false;
                    }
                    (
                        Level::Warning,
                        format!(
                            "retry: {agent} is still unreachable{} — Ctrl-R tries again",
                            suffix(&result.detail)
                        ),
                    )
                }
                DelegateRetryState::Working => {
                    self.parked.remove(call_id);
                    (
                        Level::Info,
                        format!(
                            "retry: {agent} answered; following its task again{}",
                            suffix(&result.detail)
                        ),
                    )
                }
                DelegateRetryState::Ended => {
                    self.parked.remove(call_id);
                    (
                        Level::Info,
                        format!(
                            "retry: the delegation to {agent} ended{}",
                            suffix(&state_name(&result.detail))
                        ),
                    )
                }
            },
            None => {
                if let Some(call) = self.parked.calls.iter_mut().find(|c| c.call_id == call_id) {
                    call.retrying = false;
                }
                (Level::Error, format!("retry failed: {failure}"))
            }
        };
        self.notice(level, text);
    }
}

fn suffix(detail: &str) -> String {
    let detail = detail.trim();
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

/// `TASK_STATE_INPUT_REQUIRED` → `input-required`; other text as it is.
fn state_name(detail: &str) -> String {
    match detail.strip_prefix("TASK_STATE_") {
        Some(state) => state.to_ascii_lowercase().replace('_', "-"),
        None => detail.to_string(),
    }
}
