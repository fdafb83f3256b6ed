//! Round trips of stored events, old payloads and unknown kinds.

use super::*;

#[test]
fn parts_round_trip() {
    let event = Event::ToolStarted {
        run_id: "r1".into(),
        step: 2,
        call_id: "c1".into(),
        tool: "shell".into(),
        arguments: serde_json::json!({"command": "ls"}),
    };
    let (kind, payload) = event.to_parts();
    assert_eq!(kind, "tool.started");
    assert!(payload.get("kind").is_none());
    assert_eq!(Event::from_parts(&kind, &payload).unwrap(), event);
}

#[test]
fn unknown_kinds_decode_as_unknown() {
    let event = Event::from_parts("team.spawned", &serde_json::json!({"x": 1})).unwrap();
    assert_eq!(event, Event::Unknown);
}

#[test]
fn extension_events_round_trip_and_old_requests_decode() {
    for event in [
        Event::RunQueued {
            run_id: "r2".into(),
            idempotency_key: "k".into(),
            prompt: "next".into(),
            mode: "followup".into(),
            headless: false,
        },
        Event::MessageSteering {
            run_id: "r1".into(),
            text: "left".into(),
        },
        Event::HookCompleted {
            hook: "echo".into(),
            event: "stop".into(),
            exit_code: None,
            output: String::new(),
            blocked: false,
            timed_out: true,
            duration_ms: 5,
            run_id: Some("r1".into()),
            call_id: None,
            tool: None,
        },
        Event::AgentStarted {
            parent_run_id: "r1".into(),
            child_id: "c1".into(),
            call_id: "k1".into(),
            depth: 1,
            prompt: "look".into(),
            description: None,
            tools: vec!["read_file".into()],
        },
        Event::AgentCompleted {
            child_id: "c1".into(),
            result: "found".into(),
            is_error: false,
        },
        Event::AgentInterrupted {
            child_id: "c1".into(),
            reason: "crash".into(),
        },
        Event::GoalStarted {
            goal_id: "g1".into(),
            run_id: "r1".into(),
            objective: "ship".into(),
            acceptance_criteria: vec!["tests pass".into()],
            budgets: GoalBudgets {
                max_turns: Some(3),
                ..GoalBudgets::default()
            },
            no_progress_turns: 3,
        },
        Event::GoalUpdated {
            goal_id: "g1".into(),
            state: GoalState::AwaitingApproval,
            reason: None,
            usage: GoalUsage::default(),
            run_id: Some("r1".into()),
        },
        Event::GoalCompleted {
            goal_id: "g1".into(),
            state: GoalState::Success,
            summary: Some("done".into()),
            reason: None,
            evidence: vec!["ok".into()],
            usage: GoalUsage::default(),
        },
    ] {
        let (kind, payload) = event.to_parts();
        assert_eq!(Event::from_parts(&kind, &payload).unwrap(), event);
    }
    let old = serde_json::json!({"run_id": "r", "step": 1, "model": "m", "api_type": "a",
        "message_count": 2, "context_tokens": 3});
    let Event::ModelRequested { through_seq, .. } =
        Event::from_parts("model.requested", &old).unwrap()
    else {
        panic!("not a model.requested")
    };
    assert_eq!(through_seq, 0);
}

#[test]
fn memory_recalled_round_trips() {
    let event = Event::MemoryRecalled {
        run_id: "r1".into(),
        source_ids: vec!["s1:3".into(), "s1:note:n1".into()],
    };
    let (kind, payload) = event.to_parts();
    assert_eq!(kind, "memory.recalled");
    assert_eq!(event.run_id(), Some("r1"));
    assert_eq!(Event::from_parts(&kind, &payload).unwrap(), event);
}

#[test]
fn delegate_updated_round_trips() {
    let event = Event::DelegateUpdated {
        run_id: "r1".into(),
        call_id: "c1".into(),
        agent: "research".into(),
        step: crate::DelegateStep::Status,
        task_id: Some("t1".into()),
        state: Some("TASK_STATE_WORKING".into()),
        detail: "reading".into(),
    };
    let (kind, payload) = event.to_parts();
    assert_eq!(kind, "delegate.updated");
    assert_eq!(payload["step"], "status");
    assert_eq!(Event::from_parts(&kind, &payload).unwrap(), event);
    assert_eq!(event.run_id(), Some("r1"));
}

#[test]
fn mcp_sign_in_events_have_their_wire_shape() {
    let required = Event::McpSignInRequired {
        run_id: "r1".into(),
        server: "docs".into(),
        url: "https://as.example/authorize?client_id=c&state=s".into(),
    };
    let (kind, payload) = required.to_parts();
    assert_eq!(kind, "mcp.sign_in_required");
    assert_eq!(
        payload,
        serde_json::json!({"run_id": "r1", "server": "docs",
            "url": "https://as.example/authorize?client_id=c&state=s"})
    );
    assert_eq!(Event::from_parts(&kind, &payload).unwrap(), required);
    assert_eq!(required.run_id(), Some("r1"));

    let ended = Event::McpSignInEnded {
        run_id: "r1".into(),
        server: "docs".into(),
        outcome: crate::SignInOutcome::SignedIn,
        detail: String::new(),
    };
    let (kind, payload) = ended.to_parts();
    assert_eq!(kind, "mcp.sign_in_ended");
    assert_eq!(
        payload,
        serde_json::json!({"run_id": "r1", "server": "docs", "outcome": "signed_in"})
    );
    assert_eq!(Event::from_parts(&kind, &payload).unwrap(), ended);
    let timed_out = serde_json::json!({"run_id": "r1", "server": "docs", "outcome": "timed_out"});
    assert!(matches!(
        Event::from_parts("mcp.sign_in_ended", &timed_out).unwrap(),
        Event::McpSignInEnded {
            outcome: crate::SignInOutcome::TimedOut,
            ..
        }
    ));
}

#[test]
fn team_gate_events_have_their_wire_shape_and_old_payloads_decode() {
    use crate::team::{FollowUpDisposition, TeamCompleted, TeamEntered, TeamFollowUpResolved};
    let resolved = Event::TeamFollowUpResolved(TeamFollowUpResolved {
        team_run_id: "t".into(),
        follow_up_id: "F1".into(),
        by: "lead".into(),
        disposition: FollowUpDisposition::Deferred,
        reason: "next release".into(),
    });
    let (kind, payload) = resolved.to_parts();
    assert_eq!(kind, "team.follow_up_resolved");
    assert_eq!(
        payload,
        serde_json::json!({"team_run_id": "t", "follow_up_id": "F1", "by": "lead",
            "disposition": "deferred", "reason": "next release"})
    );
    assert_eq!(Event::from_parts(&kind, &payload).unwrap(), resolved);
    // Journals written before show_thinking and follow_ups existed.
    let entered = Event::from_parts(
        "team.entered",
        &serde_json::json!({"team_run_id": "t", "team": "crew", "display_name": "Crew",
            "entry_agent": "lead", "members": ["lead"]}),
    )
    .unwrap();
    assert!(matches!(
        entered,
        Event::TeamEntered(TeamEntered {
            show_thinking: false,
            ..
        })
    ));
    let completed = Event::from_parts(
        "team.completed",
        &serde_json::json!({"team_run_id": "t", "summary": "s", "rounds": 2}),
    )
    .unwrap();
    assert!(
        matches!(completed, Event::TeamCompleted(TeamCompleted { follow_ups, .. }) if follow_ups.is_empty())
    );
}
