//! History rebuilding (tool results, steering placement, blocked prompts) and compaction.

use super::*;
use lumina_protocol::ToolCallInfo;
use pretty_assertions::assert_eq;
use serde_json::json;

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

fn user(seq: u64, text: &str) -> EventFrame {
    frame(
        seq,
        Event::MessageUser {
            run_id: "r".into(),
            text: text.into(),
            skill: None,
        },
    )
}

fn assistant(seq: u64, text: &str, calls: &[&str]) -> EventFrame {
    frame(
        seq,
        Event::MessageAssistant {
            run_id: "r".into(),
            step: 1,
            text: text.into(),
            tool_calls: calls
                .iter()
                .map(|id| ToolCallInfo {
                    id: id.to_string(),
                    name: "shell".into(),
                    arguments: json!({"command": "ls"}),
                })
                .collect(),
        },
    )
}

#[test]
fn tool_uses_without_results_are_answered_as_interrupted() {
    let events = vec![
        user(1, "list files"),
        assistant(2, "looking", &["c1", "c2"]),
        frame(
            3,
            Event::ToolCompleted {
                run_id: "r".into(),
                call_id: "c1".into(),
                tool: "shell".into(),
                is_error: false,
                output: "a b".into(),
                metadata: serde_json::Value::Null,
            },
        ),
        user(4, "and now?"),
    ];
    let history = build_history(&events, &SkillCatalog::default());
    assert_eq!(history.messages.len(), 3);
    let results: Vec<(String, bool)> = history.messages[2]
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult {
                tool_use_id,
                is_error,
                ..
            } => Some((tool_use_id.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        vec![("c2".to_string(), true), ("c1".to_string(), false)]
    );
    // The follow-up prompt stays in the same user message, after the results.
    assert!(matches!(
        history.messages[2].content.last(),
        Some(ContentBlock::Text { text }) if text == "and now?"
    ));
}

#[test]
fn compaction_keeps_the_goal_and_replaces_older_turns() {
    let events = vec![
        user(1, "goal: ship the parser"),
        assistant(2, "decided to use a recursive descent parser", &[]),
        user(3, "now add tests"),
        assistant(4, "added tests", &[]),
        user(5, "current request"),
    ];
    let checkpoint = compact(&events, "r", 1, 5000).unwrap();
    let Event::Checkpoint {
        through_seq,
        summary,
        ..
    } = &checkpoint
    else {
        panic!("{checkpoint:?}")
    };
    assert_eq!(*through_seq, 4);
    assert!(summary.contains("goal: ship the parser"));
    assert!(summary.contains("recursive descent"));
    assert!(summary.contains("now add tests"));
    let mut with_checkpoint = events.clone();
    with_checkpoint.push(frame(6, checkpoint));
    let history = build_history(&with_checkpoint, &SkillCatalog::default());
    let text = serde_json::to_string(&history.messages).unwrap();
    assert!(text.contains("Summary of the earlier conversation"));
    assert!(text.contains("current request"));
    assert_eq!(history.compacted_through, 4);
    // Nothing older than the kept turn: nothing more to compact.
    assert!(compact(&with_checkpoint, "r", 1, 10).is_none());
}

fn requested(seq: u64, through_seq: u64) -> EventFrame {
    frame(
        seq,
        Event::ModelRequested {
            run_id: "r".into(),
            step: 1,
            model: "m".into(),
            api_type: "anthropic".into(),
            message_count: 0,
            context_tokens: 0,
            through_seq,
        },
    )
}

fn steering(seq: u64, text: &str) -> EventFrame {
    frame(
        seq,
        Event::MessageSteering {
            run_id: "r".into(),
            text: text.into(),
        },
    )
}

fn texts(history: &History) -> Vec<(Role, Vec<String>)> {
    history
        .messages
        .iter()
        .map(|m| {
            let blocks = m
                .content
                .iter()
                .map(|b| match b {
                    ContentBlock::Text { text } => text.replace(STEERING_PREFIX, "S:"),
                    ContentBlock::ToolUse { id, .. } => format!("use {id}"),
                    ContentBlock::ToolResult { tool_use_id, .. } => {
                        format!("result {tool_use_id}")
                    }
                })
                .collect();
            (m.role.clone(), blocks)
        })
        .collect()
}

#[test]
fn steering_is_placed_where_it_was_delivered() {
    let events = vec![
        user(1, "build it"),
        requested(2, 1),
        // Arrives while the model streams step 1: not in request 1.
        steering(3, "blue"),
        assistant(4, "on it", &["c1"]),
        frame(
            5,
            Event::ToolCompleted {
                run_id: "r".into(),
                call_id: "c1".into(),
                tool: "shell".into(),
                is_error: false,
                output: "ok".into(),
                metadata: serde_json::Value::Null,
            },
        ),
        // Step 2's request included everything through seq 5.
        requested(6, 5),
        assistant(7, "done, in blue", &[]),
        // Arrives after the last request of the run: pending, delivered at the end.
        steering(8, "also red"),
    ];
    let history = build_history(&events, &SkillCatalog::default());
    assert_eq!(
        texts(&history),
        vec![
            (Role::User, vec!["build it".to_string()]),
            (
                Role::Assistant,
                vec!["on it".to_string(), "use c1".to_string()]
            ),
            (
                Role::User,
                vec!["result c1".to_string(), "S:\nblue".to_string()]
            ),
            (Role::Assistant, vec!["done, in blue".to_string()]),
            (Role::User, vec!["S:\nalso red".to_string()]),
        ]
    );
}

#[test]
fn steering_left_by_an_ended_run_precedes_the_next_prompt_and_blocked_prompts_vanish() {
    let events = vec![
        user(1, "first"),
        steering(2, "late"),
        frame(
            3,
            Event::RunInterrupted {
                run_id: "r".into(),
                reason: "stopped".into(),
            },
        ),
        frame(
            4,
            Event::RunStarted {
                run_id: "r2".into(),
                idempotency_key: "k".into(),
                model: "m".into(),
            },
        ),
        frame(
            5,
            Event::MessageUser {
                run_id: "r2".into(),
                text: "my password is x".into(),
                skill: None,
            },
        ),
        frame(
            6,
            Event::RunFailed {
                run_id: "r2".into(),
                code: BLOCKED_BY_HOOK,
                message: "no".into(),
            },
        ),
        user(7, "second"),
    ];
    let history = build_history(&events, &SkillCatalog::default());
    assert_eq!(
        texts(&history),
        vec![(
            Role::User,
            vec![
                "first".to_string(),
                "S:\nlate".to_string(),
                "second".to_string()
            ]
        )]
    );
}

#[test]
fn a_window_keeps_the_history_from_its_first_message_and_the_checkpoint() {
    let mut events = vec![
        user(1, "one"),
        assistant(2, "first answer", &[]),
        user(3, "two"),
        assistant(4, "calling", &["c1"]),
        frame(
            5,
            Event::ToolCompleted {
                run_id: "r".into(),
                call_id: "c1".into(),
                tool: "read_file".into(),
                is_error: false,
                output: "out".into(),
                metadata: serde_json::Value::Null,
            },
        ),
        assistant(6, "second answer", &[]),
        user(7, "three"),
    ];
    let mut everything = events.clone();
    keep_from(&mut everything, 0);
    assert_eq!(everything, events);

    keep_from(&mut events, 3);
    let history = build_history(&events, &SkillCatalog::default());
    assert_eq!(
        texts(&history),
        vec![
            (Role::User, vec!["two".to_string()]),
            (
                Role::Assistant,
                vec!["calling".to_string(), "use c1".to_string()]
            ),
            (Role::User, vec!["result c1".to_string()]),
            (Role::Assistant, vec!["second answer".to_string()]),
            (Role::User, vec!["three".to_string()]),
        ]
    );
}

#[test]
fn an_interrupted_delegation_names_the_remote_task_to_check_on() {
    let events = vec![
        user(1, "ask b"),
        assistant(2, "", &["c1"]),
        frame(
            3,
            Event::DelegateUpdated {
                run_id: "r".into(),
                call_id: "c1".into(),
                agent: "b".into(),
                step: lumina_protocol::DelegateStep::Waiting,
                task_id: Some("remote-7".into()),
                state: None,
                detail: "`b` is unreachable: refused".into(),
            },
        ),
        frame(
            4,
            Event::ToolInterrupted {
                run_id: "r".into(),
                call_id: "c1".into(),
                tool: "a2a_delegate".into(),
                reason: "the backend stopped before it ended".into(),
            },
        ),
    ];
    let history = build_history(&events, &SkillCatalog::default());
    let content = history
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .find_map(|b| match b {
            ContentBlock::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        content,
        "tool call was interrupted: the backend stopped before it ended. The A2A agent `b` may \
         still be working on its task remote-7: check on it with a2a_delegate{agent: \"b\", \
         task_id: \"remote-7\"} rather than sending the task again."
    );
}
