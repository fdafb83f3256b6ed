//! Goal mode (issue 7): turns until `goal_complete`, budgets, the no-progress verdict,
//! approval waits, pause/resume/cancel, and a goal that survives `kill -9` as `paused`.

use std::time::Duration;

use lumina_client::{Client, Notification, Notifications};
use lumina_protocol::methods::{GoalResult, GoalResumeParams, GoalStartParams};
use lumina_protocol::{Decision, ErrorCode, Event, EventFrame, GoalBudgets, GoalState};
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::crash::{dirs, kill9, spawn_backend};
use crate::support::*;

fn start_params(
    session_id: &str,
    objective: &str,
    budgets: GoalBudgets,
    settings: Value,
) -> GoalStartParams {
    GoalStartParams {
        session_id: session_id.to_string(),
        idempotency_key: uuid::Uuid::new_v4().to_string(),
        objective: objective.to_string(),
        acceptance_criteria: vec!["done.txt exists".into()],
        budgets,
        no_progress_turns: None,
        settings,
        headless: false,
    }
}

/// Waits for the first event `pred` accepts.
async fn wait_for(notes: &mut Notifications, pred: impl Fn(&Event) -> bool) -> EventFrame {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let note = tokio::time::timeout_at(deadline, notes.recv())
            .await
            .expect("the event did not come")
            .expect("connection closed");
        if let Notification::Event(frame) = note {
            if pred(&frame.event) {
                return frame;
            }
        }
    }
}

/// Waits for the goal's `goal.completed`; returns `(state, summary, reason, usage)`.
async fn goal_end(notes: &mut Notifications, goal_id: &str) -> Event {
    wait_for(
        notes,
        |e| matches!(e, Event::GoalCompleted { goal_id: g, .. } if g == goal_id),
    )
    .await
    .event
}

fn goal_events(frames: &[EventFrame], goal_id: &str) -> Vec<(GoalState, Option<String>)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::GoalUpdated {
                goal_id: g,
                state,
                reason,
                ..
            }
            | Event::GoalCompleted {
                goal_id: g,
                state,
                reason,
                ..
            } if g == goal_id => Some((*state, reason.clone())),
            _ => None,
        })
        .collect()
}

async fn events_of(client: &Client, session_id: &str) -> Vec<EventFrame> {
    let frames = client
        .session_events(session_id, 0, Some(1000))
        .await
        .unwrap()
        .events;
    assert_contiguous(&frames);
    frames
}

#[tokio::test]
async fn a_goal_succeeds_when_the_model_calls_goal_complete() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("write_file", json!({"path": "done.txt", "content": "ok\n"})),
            Turn::text("Wrote it; checking the criteria.").with_tool_call(
                "goal_complete",
                json!({"summary": "done.txt is there", "evidence": ["write_file done.txt: ok"]}),
            ),
            Turn::text("plain answer"),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let params = start_params(
        &session.id,
        "Create done.txt",
        GoalBudgets {
            max_turns: Some(5),
            ..GoalBudgets::default()
        },
        bypass(),
    );
    let started = client.goal_start(&params).await.unwrap();
    assert!(started.created);
    assert_eq!(started.goal.state, GoalState::Running);
    let goal_id = started.goal.goal_id.clone();
    let end = goal_end(&mut notes, &goal_id).await;
    let Event::GoalCompleted {
        state,
        summary,
        evidence,
        usage,
        ..
    } = end
    else {
        unreachable!()
    };
    assert_eq!(
        (
            state,
            summary.as_deref(),
            evidence,
            usage.turns,
            usage.tool_calls
        ),
        (
            GoalState::Success,
            Some("done.txt is there"),
            vec!["write_file done.txt: ok".to_string()],
            2,
            1
        )
    );
    assert_eq!(read(&h.path("done.txt")), "ok\n");
    let run_id = started.goal.run_id.clone().unwrap();
    until_run_end(&mut notes, &run_id).await;
    let frames = events_of(&client, &session.id).await;
    // Usage after each turn, then the verdict.
    assert_eq!(
        goal_events(&frames, &goal_id),
        vec![
            (GoalState::Running, None),
            (GoalState::Running, None),
            (GoalState::Success, None)
        ]
    );
    assert!(frames.iter().any(|f| matches!(&f.event,
        Event::RunCompleted { run_id: r, result, .. } if *r == run_id && result == "done.txt is there")));

    // Every turn is briefed with the objective, criteria and what is left of the budget.
    let requests = h.model.requests();
    let first = requests[0].body.to_string();
    assert!(first.contains("Objective: Create done.txt"), "{first}");
    assert!(
        first.contains("1. done.txt exists") && first.contains("5 of 5 turns"),
        "{first}"
    );
    let second = requests[1].body.to_string();
    assert!(
        second.contains("4 of 5 turns") && second.contains("1 tool calls"),
        "{second}"
    );
    assert!(requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "goal_complete"));

    // The same key returns the same goal and starts nothing.
    let again = client.goal_start(&params).await.unwrap();
    assert_eq!(
        (again.created, again.goal.goal_id.as_str(), again.goal.state),
        (false, goal_id.as_str(), GoalState::Success)
    );
    // An ordinary run is not offered `goal_complete` and gets no briefing.
    let run = client
        .session_submit(&submit(&session.id, "just answer", bypass()))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    let plain = h.model.requests()[2].body.clone();
    assert!(!plain.to_string().contains("Objective:"));
    assert!(!plain["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "goal_complete"));
    assert_eq!(h.model.request_count(), 3);
    h.stop().await;
}

#[tokio::test]
async fn a_budget_of_zero_is_refused_and_starts_nothing() {
    let h = Harness::start("anthropic", vec![Turn::text("unused")]).await;
    let (client, _notes) = h.client().await;
    let session = h.session(&client).await;
    for (budgets, name) in [
        (
            GoalBudgets {
                max_turns: Some(3),
                max_tool_calls: Some(0),
                ..GoalBudgets::default()
            },
            "budgets.max_tool_calls",
        ),
        (
            GoalBudgets {
                max_wall_ms: Some(0),
                ..GoalBudgets::default()
            },
            "budgets.max_wall_ms",
        ),
    ] {
        let err = client
            .goal_start(&start_params(&session.id, "anything", budgets, bypass()))
            .await
            .unwrap_err();
        let error = err.server_error().unwrap();
        assert_eq!(error.code, ErrorCode::InvalidParams, "{err}");
        assert!(error.message.contains(name), "{err}");
    }
    assert!(h.model.requests().is_empty());
    assert_eq!(
        kinds(&events_of(&client, &session.id).await),
        vec!["session.created"]
    );
    h.stop().await;
}

#[tokio::test]
async fn a_goal_ends_budget_exhausted_when_its_tool_calls_run_out() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("shell", json!({"command": "echo one"})),
            Turn::tool_call("shell", json!({"command": "echo two"}))
                .with_tool_call("shell", json!({"command": "echo three"})),
            Turn::tool_call("shell", json!({"command": "echo four"})),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let started = client
        .goal_start(&start_params(
            &session.id,
            "Echo things",
            GoalBudgets {
                max_tool_calls: Some(2),
                ..GoalBudgets::default()
            },
            bypass(),
        ))
        .await
        .unwrap();
    let goal_id = started.goal.goal_id.clone();
    let Event::GoalCompleted {
        state,
        reason,
        usage,
        ..
    } = goal_end(&mut notes, &goal_id).await
    else {
        unreachable!()
    };
    assert_eq!(
        (state, reason.as_deref(), usage.tool_calls, usage.turns),
        (GoalState::BudgetExhausted, Some("max_tool_calls"), 2, 2)
    );
    // The model was not asked again, and the call beyond the budget did not run.
    assert_eq!(h.model.request_count(), 2);
    let frames = events_of(&client, &session.id).await;
    let shells: Vec<(bool, String)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::ToolCompleted {
                is_error, output, ..
            } => Some((*is_error, output.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(shells.len(), 3, "{shells:#?}");
    assert!(!shells[0].0 && !shells[1].0);
    assert!(
        shells[2].0 && shells[2].1.contains("max_tool_calls"),
        "{shells:#?}"
    );
    let run_id = started.goal.run_id.unwrap();
    assert!(frames.iter().any(|f| matches!(&f.event,
        Event::RunFailed { run_id: r, code, .. } if *r == run_id && code == "goal_budget_exhausted")));
    h.stop().await;
}

#[tokio::test]
async fn the_wall_time_budget_stops_a_goal_in_the_middle_of_a_tool_call() {
    let h = Harness::start(
        "anthropic",
        vec![Turn::tool_call("shell", json!({"command": "sleep 30"}))],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let started = client
        .goal_start(&start_params(
            &session.id,
            "Wait a long time",
            GoalBudgets {
                max_wall_ms: Some(1_500),
                ..GoalBudgets::default()
            },
            bypass(),
        ))
        .await
        .unwrap();
    let goal_id = started.goal.goal_id.clone();
    let Event::GoalCompleted { state, reason, .. } = goal_end(&mut notes, &goal_id).await else {
        unreachable!()
    };
    assert_eq!(
        (state, reason.as_deref()),
        (GoalState::BudgetExhausted, Some("max_wall_ms"))
    );
    let frames = events_of(&client, &session.id).await;
    let interrupted = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::ToolInterrupted { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .expect("the sleeping shell call was interrupted");
    assert!(interrupted.contains("wall-time budget"), "{interrupted}");
    let run_id = started.goal.run_id.unwrap();
    assert!(frames.iter().any(|f| matches!(&f.event,
        Event::RunFailed { run_id: r, code, .. } if *r == run_id && code == "goal_budget_exhausted")));
    h.stop().await;
}

#[tokio::test]
async fn a_model_that_repeats_itself_gets_the_no_progress_verdict() {
    let h = Harness::start("anthropic", vec![]).await;
    h.model.set_default_turn(
        Turn::text("Let me check again.").with_tool_call("shell", json!({"command": "echo same"})),
    );
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let budgets = GoalBudgets {
        max_turns: Some(10),
        ..GoalBudgets::default()
    };
    let first = client
        .goal_start(&start_params(
            &session.id,
            "Loop forever",
            budgets,
            bypass(),
        ))
        .await
        .unwrap();
    let Event::GoalCompleted {
        state,
        reason,
        usage,
        ..
    } = goal_end(&mut notes, &first.goal.goal_id).await
    else {
        unreachable!()
    };
    assert_eq!(
        (state, reason.as_deref(), usage.turns),
        (GoalState::Failed, Some("no-progress"), 3)
    );
    assert_eq!(h.model.request_count(), 3);
    until_run_end(&mut notes, first.goal.run_id.as_deref().unwrap()).await;

    // Talking without acting or saying anything new is no progress either.
    h.model
        .set_default_turn(Turn::text("Still thinking about it."));
    let second = client
        .goal_start(&start_params(&session.id, "Just talk", budgets, bypass()))
        .await
        .unwrap();
    let Event::GoalCompleted {
        state,
        reason,
        usage,
        ..
    } = goal_end(&mut notes, &second.goal.goal_id).await
    else {
        unreachable!()
    };
    assert_eq!(
        (state, reason.as_deref(), usage.turns),
        (GoalState::Failed, Some("no-progress"), 3)
    );
    h.stop().await;
}

#[tokio::test]
async fn a_goal_waits_for_approval_as_awaiting_approval() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("write_file", json!({"path": "done.txt", "content": "ok\n"})),
            Turn::tool_call("goal_complete", json!({"summary": "written"})),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let started = client
        .goal_start(&start_params(
            &session.id,
            "Create done.txt",
            GoalBudgets::default(),
            json!({"permission_mode": "ask"}),
        ))
        .await
        .unwrap();
    let goal_id = started.goal.goal_id.clone();
    let request = wait_for(&mut notes, |e| e.kind() == "permission.requested").await;
    let Event::PermissionRequested { request_id, .. } = request.event else {
        unreachable!()
    };
    wait_for(&mut notes, |e| {
        matches!(
            e,
            Event::GoalUpdated {
                state: GoalState::AwaitingApproval,
                ..
            }
        )
    })
    .await;
    client
        .permission_respond(&session.id, &request_id, Decision::AllowOnce, None)
        .await
        .unwrap();
    let Event::GoalCompleted { state, .. } = goal_end(&mut notes, &goal_id).await else {
        unreachable!()
    };
    assert_eq!(state, GoalState::Success);
    let frames = events_of(&client, &session.id).await;
    assert_eq!(
        goal_events(&frames, &goal_id)
            .into_iter()
            .map(|e| e.0)
            .collect::<Vec<_>>(),
        vec![
            GoalState::Running,
            GoalState::AwaitingApproval,
            GoalState::Running,
            GoalState::Running,
            GoalState::Success
        ]
    );
    h.stop().await;
}

fn resume(session_id: &str) -> GoalResumeParams {
    GoalResumeParams {
        session_id: session_id.to_string(),
        goal_id: None,
        settings: Value::Null,
    }
}

#[tokio::test]
async fn goals_pause_resume_and_cancel() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("shell", json!({"command": "sleep 5"})).matching("[goal-a]"),
            Turn::tool_call("goal_complete", json!({"summary": "a finished"})).matching("[goal-a]"),
            Turn::tool_call("shell", json!({"command": "sleep 5"})).matching("[goal-b]"),
            Turn::tool_call("shell", json!({"command": "sleep 5"})).matching("[goal-c]"),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let start =
        |objective: &str| start_params(&session.id, objective, GoalBudgets::default(), bypass());

    // Pause mid-tool: the run is interrupted, the goal is paused, the session idle.
    let a = client.goal_start(&start("Goal [goal-a]")).await.unwrap();
    let a_id = a.goal.goal_id.clone();
    wait_for(&mut notes, |e| e.kind() == "tool.started").await;
    let paused: GoalResult = client.goal_pause(&session.id, None).await.unwrap();
    assert_eq!(
        (paused.goal.state, paused.created),
        (GoalState::Paused, true)
    );
    assert_eq!(paused.goal.usage.turns, 1);
    let info = client.session_list(false).await.unwrap();
    assert_eq!(info[0].status, "idle");
    // A second goal cannot start while this one is unfinished.
    let err = client
        .goal_start(&start("Goal [goal-x]"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("paused"), "{err}");

    // Resume: a new run continues the turns with the usage so far.
    let resumed = client.goal_resume(&resume(&session.id)).await.unwrap();
    assert_eq!(
        (resumed.goal.state, resumed.created),
        (GoalState::Running, true)
    );
    assert_ne!(resumed.goal.run_id, a.goal.run_id);
    let Event::GoalCompleted { state, usage, .. } = goal_end(&mut notes, &a_id).await else {
        unreachable!()
    };
    assert_eq!((state, usage.turns), (GoalState::Success, 2));
    until_run_end(&mut notes, resumed.goal.run_id.as_deref().unwrap()).await;
    let err = client
        .goal_resume(&GoalResumeParams {
            goal_id: Some(a_id.clone()),
            ..resume(&session.id)
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ended"), "{err}");

    // Cancel a running goal.
    let b = client.goal_start(&start("Goal [goal-b]")).await.unwrap();
    wait_for(&mut notes, |e| e.kind() == "tool.started").await;
    let cancelled = client.goal_cancel(&session.id, None).await.unwrap();
    assert_eq!(cancelled.goal.state, GoalState::Cancelled);
    until_run_end(&mut notes, b.goal.run_id.as_deref().unwrap()).await;

    // Cancel a paused goal.
    let c = client.goal_start(&start("Goal [goal-c]")).await.unwrap();
    wait_for(&mut notes, |e| e.kind() == "tool.started").await;
    client.goal_pause(&session.id, None).await.unwrap();
    let cancelled = client
        .goal_cancel(&session.id, Some(&c.goal.goal_id))
        .await
        .unwrap();
    assert_eq!(cancelled.goal.state, GoalState::Cancelled);

    let frames = events_of(&client, &session.id).await;
    let states = |id: &str| -> Vec<GoalState> {
        goal_events(&frames, id).into_iter().map(|e| e.0).collect()
    };
    use GoalState::*;
    assert_eq!(
        states(&a_id),
        vec![Running, Paused, Running, Running, Success]
    );
    assert_eq!(states(&b.goal.goal_id), vec![Running, Cancelled]);
    assert_eq!(states(&c.goal.goal_id), vec![Running, Paused, Cancelled]);
    // Each pause and cancel of a running goal interrupted its run.
    let interrupted: Vec<&str> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::RunInterrupted { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(interrupted.len(), 3, "{interrupted:?}");
    // Nothing left to control.
    let err = client.goal_pause(&session.id, None).await.unwrap_err();
    assert_eq!(
        err.server_error().unwrap().code,
        ErrorCode::NotFound,
        "{err}"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_running_goal_survives_kill_9_as_paused_and_resumes() {
    let (_tmp, project, app) = dirs();
    let model = ScriptedModelServer::start(vec![
        Turn::tool_call("shell", json!({"command": "sleep 30"})).matching("[goal-crash]"),
        Turn::tool_call("goal_complete", json!({"summary": "survived"})).matching("[goal-crash]"),
    ])
    .unwrap();
    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let (client, mut notes) = Client::connect(&backend.url, Some(&backend.token))
        .await
        .unwrap();
    let session = create_and_resume(&client, &project).await;
    let started = client
        .goal_start(&start_params(
            &session.id,
            "Survive [goal-crash]",
            GoalBudgets::default(),
            Value::Null,
        ))
        .await
        .unwrap();
    wait_for(&mut notes, |e| e.kind() == "tool.started").await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    kill9(&mut backend);
    drop(client);

    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let (client, mut notes) = Client::connect(&backend.url, Some(&backend.token))
        .await
        .unwrap();
    let frames = events_of(&client, &session.id).await;
    let goal_id = started.goal.goal_id.clone();
    let states = goal_events(&frames, &goal_id);
    assert_eq!(
        states.iter().map(|s| s.0).collect::<Vec<_>>(),
        vec![GoalState::Running, GoalState::Paused],
        "{states:?}"
    );
    assert!(states[1].1.as_deref().unwrap().contains("goal.resume"));
    let kinds = kinds(&frames);
    assert_eq!(
        kinds[kinds.len() - 4..].to_vec(),
        vec![
            "tool.interrupted",
            "step.interrupted",
            "run.interrupted",
            "goal.updated"
        ]
    );

    client
        .session_resume(&session.id, frames.last().unwrap().seq)
        .await
        .unwrap();
    let resumed = client.goal_resume(&resume(&session.id)).await.unwrap();
    // The usage of the turn the crash interrupted was journaled with its answer.
    assert_eq!(
        (resumed.goal.usage.turns, resumed.goal.usage.tool_calls),
        (1, 1)
    );
    let Event::GoalCompleted { state, summary, .. } = goal_end(&mut notes, &goal_id).await else {
        unreachable!()
    };
    assert_eq!(
        (state, summary.as_deref()),
        (GoalState::Success, Some("survived"))
    );
    crate::crash::unsafe_free_sigterm(backend.child.id());
    let _ = backend.child.wait();
}
