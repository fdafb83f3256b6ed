use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

const KEY: &str = "key-1";

fn frame(seq: u64, event: Event) -> EventFrame {
    EventFrame {
        session_id: "s1".into(),
        seq,
        stream: "main".into(),
        stream_seq: seq,
        ts_ms: 0,
        event,
    }
}

fn delta(run_id: &str, step: u32, text: &str) -> DeltaFrame {
    DeltaFrame {
        session_id: "s1".into(),
        run_id: run_id.into(),
        step,
        channel: "text".into(),
        text: text.into(),
    }
}

fn started(run_id: &str, key: &str) -> Event {
    Event::RunStarted {
        run_id: run_id.into(),
        idempotency_key: key.into(),
        model: "m".into(),
    }
}

fn texts(effects: Vec<Effect>) -> String {
    effects
        .into_iter()
        .map(|e| match e {
            Effect::Text(t) => t,
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    }
}

#[test]
fn recognises_its_run_by_idempotency_key_and_ignores_others() {
    let mut tracker = RunTracker::new(KEY);
    assert!(tracker.event(&frame(1, started("other", "k0"))).is_empty());
    assert!(tracker
        .event(&frame(
            2,
            Event::RunCompleted {
                run_id: "other".into(),
                result: "not ours".into(),
                usage: Usage::default()
            }
        ))
        .is_empty());
    assert_eq!(tracker.outcome(), None);
    tracker.event(&frame(3, started("r1", KEY)));
    assert_eq!(tracker.run_id(), Some("r1"));
}

#[test]
fn early_deltas_are_replayed_for_our_run_only() {
    let mut tracker = RunTracker::new(KEY);
    assert!(tracker.delta(&delta("other", 1, "no")).is_empty());
    assert!(tracker.delta(&delta("r1", 1, "Hel")).is_empty());
    assert_eq!(texts(tracker.set_run_id("r1")), "Hel");
    assert_eq!(texts(tracker.delta(&delta("r1", 1, "lo"))), "lo");
}

#[test]
fn streams_steps_on_separate_lines_and_completes_from_the_message() {
    let mut tracker = RunTracker::new(KEY);
    tracker.event(&frame(1, started("r1", KEY)));
    let mut out = String::new();
    out += &texts(tracker.delta(&delta("r1", 1, "Looking")));
    // The durable message has more than was streamed: print the rest.
    out += &texts(tracker.event(&frame(
        2,
        Event::MessageAssistant {
            run_id: "r1".into(),
            step: 1,
            text: "Looking around.".into(),
            tool_calls: vec![],
        },
    )));
    // A late delta of a finished step is not printed twice.
    out += &texts(tracker.delta(&delta("r1", 1, " around.")));
    out += &texts(tracker.delta(&delta("r1", 2, "Done.")));
    assert_eq!(out, "Looking around.\nDone.");
    assert!(tracker.needs_final_newline());
}

#[test]
fn a_run_without_deltas_prints_its_result() {
    let mut tracker = RunTracker::new(KEY);
    tracker.set_run_id("r1");
    let effects = tracker.event(&frame(
        1,
        Event::RunCompleted {
            run_id: "r1".into(),
            result: "42".into(),
            usage: usage(1, 2),
        },
    ));
    assert_eq!(texts(effects), "42");
}

#[test]
fn headless_denials_are_noticed_and_reported() {
    let mut tracker = RunTracker::new(KEY);
    tracker.set_run_id("r1");
    tracker.event(&frame(
        1,
        Event::PermissionRequested {
            run_id: "r1".into(),
            request_id: "p1".into(),
            call_id: "c1".into(),
            tool: "shell".into(),
            arguments: json!({"command": "rm -rf build"}),
            args_hash: "h".into(),
            preview: None,
        },
    ));
    let effects = tracker.event(&frame(
        2,
        Event::PermissionResolved {
            run_id: "r1".into(),
            request_id: "p1".into(),
            decision: Decision::Deny,
            by: "headless".into(),
            reason: None,
        },
    ));
    let [Effect::Notice(notice)] = effects.as_slice() else {
        panic!("expected one notice: {effects:?}");
    };
    assert!(notice.contains("`shell`"), "{notice}");
    let report = tracker.report("s1", None);
    assert_eq!(
        serde_json::to_value(&report.permission_denials).unwrap(),
        json!([{"tool": "shell", "request_id": "p1", "call_id": "c1",
                "arguments": {"command": "rm -rf build"}, "by": "headless"}])
    );
}

#[test]
fn final_object_of_a_completed_run() {
    let mut tracker = RunTracker::new(KEY);
    tracker.set_run_id("r1");
    tracker.event(&frame(
        1,
        Event::RunCompleted {
            run_id: "r1".into(),
            result: "All done.".into(),
            usage: usage(10, 5),
        },
    ));
    assert_eq!(
        serde_json::to_value(tracker.report("s1", None)).unwrap(),
        json!({
            "session_id": "s1",
            "run_id": "r1",
            "result": "All done.",
            "is_error": false,
            "usage": {"input_tokens": 10, "output_tokens": 5,
                      "cache_read_tokens": 0, "cache_write_tokens": 0},
            "permission_denials": [],
        })
    );
}

#[test]
fn final_object_of_a_failed_run_for_stream_json() {
    let mut tracker = RunTracker::new(KEY);
    tracker.set_run_id("r1");
    tracker.event(&frame(
        1,
        Event::UsageRecorded {
            run_id: "r1".into(),
            step: 1,
            usage: usage(3, 4),
            context_tokens: 0,
            max_tokens: 0,
        },
    ));
    tracker.event(&frame(
        2,
        Event::MessageAssistant {
            run_id: "r1".into(),
            step: 1,
            text: "Partial".into(),
            tool_calls: vec![],
        },
    ));
    let effects = tracker.event(&frame(
        3,
        Event::RunFailed {
            run_id: "r1".into(),
            code: "model_error".into(),
            message: "rate limited".into(),
        },
    ));
    assert!(matches!(effects.as_slice(), [Effect::Failure(_)]));
    assert_eq!(
        serde_json::to_value(tracker.report("s1", Some("result"))).unwrap(),
        json!({
            "type": "result",
            "session_id": "s1",
            "run_id": "r1",
            "result": "Partial",
            "is_error": true,
            "usage": {"input_tokens": 3, "output_tokens": 4,
                      "cache_read_tokens": 0, "cache_write_tokens": 0},
            "error": {"code": "model_error", "message": "rate limited"},
            "permission_denials": [],
        })
    );
}

#[test]
fn user_interrupt_before_the_run_id_is_known() {
    let mut tracker = RunTracker::new(KEY);
    tracker.interrupted_by_user();
    let report = tracker.report("s1", None);
    assert_eq!(report.run_id, None);
    assert!(report.is_error);
    assert_eq!(
        report.error.map(|e| e.code),
        Some("interrupted".to_string())
    );
}
