//! Lazy advancement of a task whose run is parked on an `a2a_delegate` call (its remote agent
//! became unreachable mid-task, docs/a2a.md#a-delegation-parked-while-its-agent-is-down):
//! a read of the task (`GetTask`, `SubscribeToTask`) or a message on it retries the agent
//! through `delegate.retry` — the same session operation the WebSocket offers — and waits a
//! bounded time for the run to stop again (ended, or waiting once more). Nothing polls in the
//! background.

use std::time::Duration;

use lumina_a2a::types::Task;
use lumina_a2a::Error;
use lumina_protocol::methods::{
    DelegateRetryParams, DelegateRetryResult, DelegateRetryState, Identity,
};
use lumina_protocol::Method;
use lumina_runtime::Outbound;

use super::{translate, Change, Progress, RuntimeExecutor};

/// How long a read waits, in all, for a parked task to move: the retry's verdict (at most
/// `lumina_runtime::delegate::RETRY_ANSWER_WAIT`) and then the run's next stop.
const ADVANCE_WAIT: Duration = Duration::from_secs(25);

impl RuntimeExecutor {
    /// Retries the parked delegation of `progress`'s run; `None` when no call is parked
    /// there (any more: the journal tells what became of it).
    pub(super) async fn retry(
        &self,
        identity: &Identity,
        progress: &Progress,
    ) -> Result<Option<DelegateRetryResult>, Error> {
        let Some(call_id) = progress.parked_call.clone() else {
            return Ok(None);
        };
        let params = DelegateRetryParams {
            session_id: progress.session_id.clone(),
            call_id,
        };
        match self.call(identity, Method::DelegateRetry, params).await {
            Ok(result) => Ok(Some(result)),
            Err(Error::TaskNotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`lumina_a2a::Executor::advance`]: retries a parked delegation; when the agent
    /// answered, waits (bounded) until the run stops again, so the read that follows sees
    /// the task completed — or waiting again, with the new reason.
    pub(super) async fn advance_parked(
        &self,
        task: &Task,
        identity: &Identity,
    ) -> Result<(), Error> {
        let Some(progress) = Progress::of(task).filter(|p| p.parked_call.is_some()) else {
            return Ok(());
        };
        let deadline = tokio::time::Instant::now() + ADVANCE_WAIT;
        let Some(verdict) = self.retry(identity, &progress).await? else {
            return Ok(());
        };
        if verdict.state == DelegateRetryState::Waiting {
            return Ok(());
        }
        let mut rx = self.follow(identity, &progress).await?;
        // A working copy: the parked call and open sign-ins as the run's events change them.
        let mut view = progress.clone();
        loop {
            let Ok(Some(outbound)) = tokio::time::timeout_at(deadline, rx.recv()).await else {
                return Ok(());
            };
            let Outbound::Event(frame) = outbound else {
                continue;
            };
            if frame.seq <= progress.last_seq {
                continue;
            }
            let change = translate(&frame, &mut view, &task.id, &task.context_id);
            match change {
                Some(Change::Resumed) => view.parked_call = None,
                Some(change) if change.stops() => return Ok(()),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumina_a2a::types::TaskState;
    use lumina_protocol::{DelegateStep, Event, EventFrame, MAIN_STREAM};

    fn frame(seq: u64, event: Event) -> EventFrame {
        EventFrame {
            session_id: "s".into(),
            seq,
            stream: MAIN_STREAM.into(),
            stream_seq: seq,
            ts_ms: 0,
            event,
        }
    }

    fn delegate(step: DelegateStep, call: &str) -> Event {
        Event::DelegateUpdated {
            run_id: "r".into(),
            call_id: call.into(),
            agent: "b".into(),
            step,
            task_id: Some("remote-1".into()),
            state: None,
            detail: "`b` is unreachable: connection refused".into(),
        }
    }

    /// `translate` for run `run` parked (or not) on a call, as task `t` of context `c`.
    fn tr(frame: &EventFrame, run: &str, parked: Option<&str>) -> Option<Change> {
        let mut progress = Progress {
            run_id: run.into(),
            parked_call: parked.map(Into::into),
            ..Progress::default()
        };
        translate(frame, &mut progress, "t", "c")
    }

    fn state(change: Option<Change>) -> Option<(TaskState, bool)> {
        let change = change?;
        let stops = change.stops();
        let events = change.events("t", "c");
        match events.last()? {
            lumina_a2a::types::StreamResponse::StatusUpdate(u) => Some((u.status.state, stops)),
            _ => None,
        }
    }

    #[test]
    fn a_parked_delegation_is_input_required_with_its_reason() {
        let change = tr(
            &frame(5, delegate(DelegateStep::Waiting, "call-1")),
            "r",
            None,
        );
        let Some(Change::Parked(call, message)) = &change else {
            panic!("not parked");
        };
        assert_eq!(call, "call-1");
        let text = message.text();
        assert!(
            text.contains("`b` is unreachable: connection refused"),
            "{text}"
        );
        assert!(text.contains("remote-1"), "{text}");
        assert_eq!(state(change), Some((TaskState::InputRequired, true)));
        // Another run's step changes nothing.
        assert!(tr(
            &frame(5, delegate(DelegateStep::Waiting, "call-1")),
            "other",
            None
        )
        .is_none());
    }

    #[test]
    fn the_agent_answering_again_resumes_only_the_parked_call() {
        for step in [
            DelegateStep::Sent,
            DelegateStep::Status,
            DelegateStep::Artifact,
            DelegateStep::Ended,
        ] {
            let change = tr(&frame(6, delegate(step, "call-1")), "r", Some("call-1"));
            assert_eq!(state(change), Some((TaskState::Working, false)), "{step:?}");
        }
        // The retry's own failed attempt (card, unreachable) is not progress.
        for step in [DelegateStep::Card, DelegateStep::Unreachable] {
            assert!(tr(&frame(6, delegate(step, "call-1")), "r", Some("call-1")).is_none());
        }
        // Not parked, or another call: the steps of a delegation that is followed.
        assert!(tr(
            &frame(6, delegate(DelegateStep::Status, "call-1")),
            "r",
            None
        )
        .is_none());
        assert!(tr(
            &frame(6, delegate(DelegateStep::Status, "call-2")),
            "r",
            Some("call-1")
        )
        .is_none());
    }

    #[test]
    fn a_run_closed_by_crash_recovery_can_be_continued_and_an_interrupt_cancels() {
        let recovered = Event::RunInterrupted {
            run_id: "r".into(),
            reason: lumina_runtime::recovery::REASON.into(),
        };
        let change = tr(&frame(7, recovered), "r", Some("call-1"));
        let Some(Change::Restarted(message)) = &change else {
            panic!("not restarted");
        };
        assert!(lumina_a2a::delegate::interrupted_by_restart(message));
        assert_eq!(state(change), Some((TaskState::InputRequired, true)));

        let interrupted = Event::RunInterrupted {
            run_id: "r".into(),
            reason: "interrupted by the user".into(),
        };
        let change = tr(&frame(7, interrupted), "r", None);
        assert_eq!(state(change), Some((TaskState::Canceled, true)));
    }
}
