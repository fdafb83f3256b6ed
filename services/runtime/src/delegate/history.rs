//! What the session's journal knows about its `a2a_delegate` calls, for the two questions
//! memory cannot answer after a restart (the parked calls live in the owner's memory only):
//! how a call that no longer waits ended ([`unparked`], `delegate.retry`'s answer), and which
//! message a remote task was last sent ([`last_message`], so a check on a task the agent
//! restarted under continues it in place, as a retry of a parked call does).

use lumina_protocol::methods::{DelegateRetryResult, DelegateRetryState};
use lumina_protocol::{Event, EventFrame};
use serde_json::Value;

use super::DELEGATE_TOOL;
use crate::journal::SessionJournal;
use crate::Result;

/// Events read per page.
const PAGE: usize = 1000;

/// Feeds every durable event of the session (all streams) to `f`, in seq order.
async fn each(journal: &SessionJournal, mut f: impl FnMut(&EventFrame)) -> Result<()> {
    let mut after = 0;
    loop {
        let page = journal.read(after, PAGE).await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = last.seq;
        page.iter().for_each(&mut f);
    }
}

/// `delegate.retry` of a call that is not parked: how it stands according to the journal —
/// ended (how; closed by a restart of this backend says so), or still following its task (a
/// retry is already under way). `None` when the session has no such delegation.
pub(crate) async fn unparked(
    journal: &SessionJournal,
    call_id: &str,
) -> Result<Option<DelegateRetryResult>> {
    let mut seen: Option<(String, Option<String>)> = None;
    let mut end: Option<DelegateRetryResult> = None;
    each(journal, |frame| match &frame.event {
        Event::DelegateUpdated {
            call_id: id,
            agent,
            task_id,
            ..
        } if id == call_id => {
            let task = task_id
                .clone()
                .or_else(|| seen.as_ref().and_then(|s| s.1.clone()));
            seen = Some((agent.clone(), task));
        }
        Event::ToolCompleted {
            call_id: id,
            metadata,
            is_error,
            ..
        } if id == call_id => {
            let state = metadata.get("state").and_then(Value::as_str);
            end = Some(ended(match state {
                Some(state) => state.to_owned(),
                None if *is_error => "the call failed".to_owned(),
                None => "the call returned".to_owned(),
            }));
        }
        Event::ToolInterrupted {
            call_id: id,
            reason,
            ..
        } if id == call_id => {
            let (agent, task) = seen.clone().unwrap_or_default();
            end = Some(ended(if reason == crate::recovery::REASON {
                format!(
                    "the call was closed when this backend restarted ({reason}); the remote \
                     task {} of `{agent}` may still be running — a new message continues the \
                     conversation, and checking on that task (a2a_delegate with its task_id) \
                     picks it up without sending it again",
                    task.as_deref().unwrap_or("-")
                )
            } else {
                format!("the call was interrupted: {reason}")
            }));
        }
        _ => {}
    })
    .await?;
    Ok(match (seen, end) {
        (None, _) => None,
        (Some(_), Some(end)) => Some(end),
        (Some(_), None) => Some(DelegateRetryResult {
            state: DelegateRetryState::Working,
            detail: "the call is not waiting: it follows its task (a retry is under way)".into(),
        }),
    })
}

fn ended(detail: String) -> DelegateRetryResult {
    DelegateRetryResult {
        state: DelegateRetryState::Ended,
        detail,
    }
}

/// The message this session last sent `agent` on its remote task `task_id` (through any
/// `a2a_delegate` call: the one that created the task or a later answer on it).
pub(crate) async fn last_message(
    journal: &SessionJournal,
    agent: &str,
    task_id: &str,
) -> Result<Option<String>> {
    let mut sent: std::collections::HashMap<String, String> = Default::default();
    let mut last = None;
    each(journal, |frame| match &frame.event {
        Event::ToolStarted {
            call_id,
            tool,
            arguments,
            ..
        } if tool == DELEGATE_TOOL
            && arguments
                .get("agent")
                .and_then(Value::as_str)
                .map(str::trim)
                == Some(agent) =>
        {
            if let Some(message) = arguments
                .get("message")
                .and_then(Value::as_str)
                .filter(|m| !m.trim().is_empty())
            {
                sent.insert(call_id.clone(), message.to_owned());
            }
        }
        Event::DelegateUpdated {
            call_id,
            task_id: Some(id),
            ..
        } if id == task_id => {
            if let Some(message) = sent.get(call_id) {
                last = Some(message.clone());
            }
        }
        _ => {}
    })
    .await?;
    Ok(last)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lumina_journal::sqlite::SqliteJournal;
    use lumina_journal::{JournalStore, SessionRecord, LOCAL_FENCE};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    async fn journal(dir: &std::path::Path, events: Vec<Event>) -> SessionJournal {
        let store: Arc<dyn JournalStore> =
            Arc::new(SqliteJournal::open(dir.to_path_buf(), "local").unwrap());
        let record = SessionRecord {
            tenant: "local".into(),
            session_id: "s1".into(),
            title: "t".into(),
            project_root: "/tmp".into(),
            created_at_ms: 0,
            updated_at_ms: 0,
            archived: false,
            summary: Value::Null,
        };
        store.create_session(&record, LOCAL_FENCE).await.unwrap();
        let journal = SessionJournal::open(store, record.key(), LOCAL_FENCE)
            .await
            .unwrap();
        journal.append(events).await.unwrap();
        journal
    }

    fn started(call: &str, arguments: Value) -> Event {
        Event::ToolStarted {
            run_id: "r".into(),
            step: 1,
            call_id: call.into(),
            tool: DELEGATE_TOOL.into(),
            arguments,
        }
    }

    fn step(call: &str, agent: &str, step: lumina_protocol::DelegateStep, task: &str) -> Event {
        Event::DelegateUpdated {
            run_id: "r".into(),
            call_id: call.into(),
            agent: agent.into(),
            step,
            task_id: Some(task.into()),
            state: None,
            detail: String::new(),
        }
    }

    #[tokio::test]
    async fn a_call_that_no_longer_waits_is_answered_from_the_journal() {
        use lumina_protocol::DelegateStep::{Ended, Sent, Status, Waiting};
        let dir = tempfile::tempdir().unwrap();
        let journal = journal(
            dir.path(),
            vec![
                // c1 created task t1 and returned asking a question; c2 answered on t1 and
                // was parked, then closed by recovery; c3 (another agent) used the same id;
                // c4 is following its task.
                started("c1", json!({"agent": "remote", "message": "first"})),
                step("c1", "remote", Sent, "t1"),
                step("c1", "remote", Ended, "t1"),
                Event::ToolCompleted {
                    run_id: "r".into(),
                    call_id: "c1".into(),
                    tool: DELEGATE_TOOL.into(),
                    is_error: false,
                    output: "input-required: …".into(),
                    metadata: json!({"state": "TASK_STATE_INPUT_REQUIRED"}),
                },
                started(
                    "c2",
                    json!({"agent": "remote", "task_id": "t1", "message": "second"}),
                ),
                step("c2", "remote", Status, "t1"),
                step("c2", "remote", Waiting, "t1"),
                Event::ToolInterrupted {
                    run_id: "r".into(),
                    call_id: "c2".into(),
                    tool: DELEGATE_TOOL.into(),
                    reason: crate::recovery::REASON.into(),
                },
                started("c3", json!({"agent": "other", "message": "elsewhere"})),
                step("c3", "other", Sent, "t1"),
                started("c4", json!({"agent": "remote", "task_id": "t1"})),
                step("c4", "remote", Status, "t1"),
            ],
        )
        .await;

        let closed = unparked(&journal, "c2").await.unwrap().unwrap();
        assert_eq!(closed.state, DelegateRetryState::Ended);
        assert!(
            closed.detail.contains("closed when this backend restarted")
                && closed.detail.contains("task t1 of `remote`"),
            "{closed:?}"
        );
        assert_eq!(
            unparked(&journal, "c1").await.unwrap(),
            Some(DelegateRetryResult {
                state: DelegateRetryState::Ended,
                detail: "TASK_STATE_INPUT_REQUIRED".into()
            })
        );
        assert_eq!(
            unparked(&journal, "c4").await.unwrap().map(|r| r.state),
            Some(DelegateRetryState::Working)
        );
        assert_eq!(unparked(&journal, "nope").await.unwrap(), None);

        // The last message sent on a task, per agent; a check (no message) sends none.
        let last = |agent: &'static str, task: &'static str| {
            let journal = &journal;
            async move { last_message(journal, agent, task).await.unwrap() }
        };
        assert_eq!(last("remote", "t1").await.as_deref(), Some("second"));
        assert_eq!(last("other", "t1").await.as_deref(), Some("elsewhere"));
        assert_eq!(last("remote", "t2").await, None);
    }
}
