//! The SSE event engine on hand-made journals: ids, live deltas, resumption.

use super::*;
use lumina_protocol::Usage;
use pretty_assertions::assert_eq;

fn frame(seq: u64, event: Event) -> EventFrame {
    EventFrame {
        session_id: "s".into(),
        seq,
        stream: "main".into(),
        stream_seq: seq,
        ts_ms: 0,
        event,
    }
}

fn delta(text: &str) -> DeltaFrame {
    DeltaFrame {
        session_id: "s".into(),
        run_id: "r".into(),
        step: 1,
        channel: "text".into(),
        text: text.into(),
    }
}

/// A run: started (1), prompt (2), requested (3), answer "Hello world" (4), completed (5).
fn journal() -> Vec<EventFrame> {
    vec![
        frame(
            1,
            Event::RunStarted {
                run_id: "r".into(),
                idempotency_key: "k".into(),
                model: "m".into(),
            },
        ),
        frame(
            2,
            Event::MessageUser {
                run_id: "r".into(),
                text: "hi".into(),
                skill: None,
            },
        ),
        frame(
            3,
            Event::ModelRequested {
                run_id: "r".into(),
                step: 1,
                model: "m".into(),
                api_type: lumina_protocol::ApiType::from("anthropic"),
                message_count: 1,
                context_tokens: 1,
                through_seq: 2,
            },
        ),
        frame(
            4,
            Event::MessageAssistant {
                run_id: "r".into(),
                step: 1,
                text: "Hello world".into(),
                tool_calls: vec![],
            },
        ),
        frame(
            5,
            Event::RunCompleted {
                run_id: "r".into(),
                result: "Hello world".into(),
                usage: Usage::default(),
            },
        ),
    ]
}

fn chunk(seq: u64, offset: usize, text: &str) -> Out {
    Out::Chunk {
        id: Cursor::Chunk { seq, offset },
        text: text.into(),
    }
}

fn done() -> Out {
    Out::Done {
        id: Cursor::Seq(5),
        run_id: "r".into(),
        message_id: Some(4),
        answer: "Hello world".into(),
    }
}

#[test]
fn a_live_stream_sends_deltas_with_offsets_then_done() {
    let events = journal();
    let mut replay = Replay::new(Cursor::Seq(0), 0, None, Some("r".into()));
    let mut out = Vec::new();
    for frame in &events[..3] {
        replay.event(frame, &mut out);
    }
    replay.delta(&delta("Hello"), &mut out);
    replay.delta(&delta(" world"), &mut out);
    for frame in &events[3..] {
        replay.event(frame, &mut out);
    }
    assert_eq!(
        out,
        vec![chunk(3, 5, "Hello"), chunk(3, 11, " world"), done()]
    );
    assert!(replay.finished());
}

#[test]
fn resuming_after_a_chunk_sends_exactly_the_rest() {
    let events = journal();
    // The client saw "Hello" (id 3.5); the step was streaming when it came back (head 3).
    let mut replay = Replay::new(Cursor::parse("3.5").unwrap(), 3, Some("r".into()), None);
    let mut out = Vec::new();
    replay.check_idle(Cursor::parse("3.5").unwrap());
    assert!(!replay.finished());
    // Deltas of a step whose start it did not see are not streamed.
    replay.delta(&delta(" world"), &mut out);
    assert_eq!(out, vec![]);
    for frame in &events[3..] {
        replay.event(frame, &mut out);
    }
    assert_eq!(out, vec![chunk(3, 11, " world"), done()]);
    assert!(replay.finished());
}

#[test]
fn resuming_from_the_start_replays_the_answer_as_one_chunk_and_after_done_nothing() {
    let events = journal();
    let mut replay = Replay::new(Cursor::Seq(2), 5, None, None);
    let mut out = Vec::new();
    for frame in &events[2..] {
        replay.event(frame, &mut out);
    }
    assert_eq!(out, vec![chunk(3, 11, "Hello world"), done()]);
    assert!(replay.finished());

    let mut replay = Replay::new(Cursor::Seq(5), 5, None, None);
    replay.check_idle(Cursor::Seq(5));
    assert!(replay.finished());
}

#[test]
fn event_ids_parse_and_print() {
    assert_eq!(Cursor::parse("12").unwrap(), Cursor::Seq(12));
    assert_eq!(
        Cursor::parse("12.7").unwrap(),
        Cursor::Chunk { seq: 12, offset: 7 }
    );
    assert_eq!(Cursor::Chunk { seq: 12, offset: 7 }.to_string(), "12.7");
    for bad in ["", "x", "1.x", "-1", "1.2.3"] {
        assert!(Cursor::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_conversation_stream_from_before_an_active_run_ends_with_it() {
    let events = journal();
    // Subscribed at head 2 with run `r` open, resuming from before its start.
    let mut replay = Replay::new(Cursor::Seq(0), 2, Some("r".into()), None);
    replay.check_idle(Cursor::Seq(0));
    let mut out = Vec::new();
    for frame in &events {
        assert!(!replay.finished());
        replay.event(frame, &mut out);
    }
    assert_eq!(out, vec![chunk(3, 11, "Hello world"), done()]);
    assert!(replay.finished());
}
