//! MCP sign-ins of a task's run as A2A states (docs/a2a.md, "Mapping to Lumina"): while an
//! MCP server of the run waits for a person to sign in (`mcp.sign_in_required` without its
//! `mcp.sign_in_ended`) the task is `TASK_STATE_AUTH_REQUIRED`, its status message naming
//! each server and the authorization URL to open; once every sign-in ended it is
//! `TASK_STATE_WORKING` again (the run goes on by itself: the sign-in happens out of band,
//! no A2A message is needed). The open sign-ins are kept in the task's metadata
//! (`lumina.signIns`), so an execution that takes the task over (a refresh, a message to
//! the task) knows them.

use std::collections::BTreeMap;

use lumina_a2a::types::{Message, Part, TaskState};
use lumina_protocol::{Event, SignInOutcome};
use serde_json::json;

/// The run's sign-ins still open: server → authorization URL.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub(super) struct OpenSignIns(BTreeMap<String, String>);

impl OpenSignIns {
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Applies a journal event of run `run`: the task's new state and message when it is a
    /// sign-in event of that run.
    pub(super) fn apply(
        &mut self,
        event: &Event,
        run: &str,
        task_id: &str,
        context_id: &str,
    ) -> Option<(TaskState, Message)> {
        match event {
            Event::McpSignInRequired {
                run_id,
                server,
                url,
            } if run_id == run => {
                self.0.insert(server.clone(), url.clone());
                Some(self.status(task_id, context_id))
            }
            Event::McpSignInEnded {
                run_id,
                server,
                outcome,
                ..
            } if run_id == run => {
                self.0.remove(server);
                if !self.is_empty() {
                    return Some(self.status(task_id, context_id));
                }
                let said = match outcome {
                    SignInOutcome::SignedIn => format!("signed in to `{server}`; going on"),
                    SignInOutcome::TimedOut => {
                        format!(
                            "nobody signed in to `{server}` in time; going on without its tools"
                        )
                    }
                    SignInOutcome::Failed => {
                        format!("the sign-in to `{server}` failed; going on without its tools")
                    }
                };
                let message =
                    Message::agent(vec![Part::text(said)], Some(task_id), Some(context_id));
                Some((TaskState::Working, message))
            }
            _ => None,
        }
    }

    /// Auth-required with a message naming every open sign-in (and, in `metadata.mcpSignIn`,
    /// the same as data).
    pub(super) fn status(&self, task_id: &str, context_id: &str) -> (TaskState, Message) {
        let mut body = String::from("sign-in needed: ");
        let lines: Vec<String> = self
            .0
            .iter()
            .map(|(server, url)| {
                format!("open {url} in a browser to sign in to the MCP server `{server}`")
            })
            .collect();
        body.push_str(&lines.join("; "));
        body.push_str(
            ". The task goes on by itself once you have signed in (it waits at most a few \
             minutes, then goes on without that server's tools).",
        );
        let mut message = Message::agent(vec![Part::text(body)], Some(task_id), Some(context_id));
        let servers: Vec<_> = self
            .0
            .iter()
            .map(|(server, url)| json!({"server": server, "url": url}))
            .collect();
        message.metadata = Some(json!({ "mcpSignIn": servers }));
        (TaskState::AuthRequired, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn required(run: &str, server: &str) -> Event {
        Event::McpSignInRequired {
            run_id: run.into(),
            server: server.into(),
            url: format!("https://{server}.example/authorize?state=s"),
        }
    }

    fn ended(run: &str, server: &str, outcome: SignInOutcome) -> Event {
        Event::McpSignInEnded {
            run_id: run.into(),
            server: server.into(),
            outcome,
            detail: String::new(),
        }
    }

    #[test]
    fn an_open_sign_in_is_auth_required_and_its_end_working_again() {
        let mut open = OpenSignIns::default();
        let (state, message) = open.apply(&required("r1", "docs"), "r1", "t", "c").unwrap();
        assert_eq!(state, TaskState::AuthRequired);
        let text = message.text();
        assert!(
            text.contains("https://docs.example/authorize?state=s") && text.contains("`docs`"),
            "{text}"
        );
        assert_eq!(
            message.metadata.unwrap()["mcpSignIn"],
            json!([{"server": "docs", "url": "https://docs.example/authorize?state=s"}])
        );
        assert_eq!(message.task_id.as_deref(), Some("t"));
        assert_eq!(message.context_id.as_deref(), Some("c"));

        let (state, message) = open
            .apply(
                &ended("r1", "docs", SignInOutcome::SignedIn),
                "r1",
                "t",
                "c",
            )
            .unwrap();
        assert_eq!(state, TaskState::Working);
        assert_eq!(message.text(), "signed in to `docs`; going on");
        assert!(open.is_empty());
    }

    #[test]
    fn two_servers_stay_auth_required_until_both_ended() {
        let mut open = OpenSignIns::default();
        open.apply(&required("r1", "a"), "r1", "t", "c");
        let (state, message) = open.apply(&required("r1", "b"), "r1", "t", "c").unwrap();
        assert_eq!(state, TaskState::AuthRequired);
        assert!(message.text().contains("`a`") && message.text().contains("`b`"));

        let (state, message) = open
            .apply(&ended("r1", "a", SignInOutcome::TimedOut), "r1", "t", "c")
            .unwrap();
        assert_eq!(state, TaskState::AuthRequired);
        assert!(!message.text().contains("`a`") && message.text().contains("`b`"));

        let (state, message) = open
            .apply(&ended("r1", "b", SignInOutcome::Failed), "r1", "t", "c")
            .unwrap();
        assert_eq!(state, TaskState::Working);
        assert!(
            message.text().contains("without its tools"),
            "{}",
            message.text()
        );
    }

    #[test]
    fn other_runs_and_other_events_change_nothing() {
        let mut open = OpenSignIns::default();
        assert_eq!(open.apply(&required("r2", "docs"), "r1", "t", "c"), None);
        assert!(open.is_empty());
        let other = Event::Warning {
            code: "x".into(),
            message: "y".into(),
            run_id: Some("r1".into()),
        };
        assert_eq!(open.apply(&other, "r1", "t", "c"), None);
    }

    #[test]
    fn open_sign_ins_survive_the_task_metadata() {
        let mut open = OpenSignIns::default();
        open.apply(&required("r1", "docs"), "r1", "t", "c");
        let value = serde_json::to_value(&open).unwrap();
        assert_eq!(
            value,
            json!({"docs": "https://docs.example/authorize?state=s"})
        );
        let back: OpenSignIns = serde_json::from_value(value).unwrap();
        assert_eq!(back, open);
    }
}
