//! The task-policy and follow-up gates (`gates.task_policy`, `gates.follow_ups`) and
//! `transcript.show_thinking`, against the scripted model with both API types: a dispatch
//! that breaks the policy is refused and never runs, `team_complete` waits for every
//! criterion to be served and every follow-up to be done or deferred with a reason, the
//! deferred ones are in the result, the follow-ups survive a restart, and members' thinking
//! is journaled for clients exactly when the team shows it.

use lumina_protocol::team::{FollowUpItem, FollowUpStatus, TeamFollowUpResolved};
use lumina_protocol::{Event, EventFrame};
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn lead(turn: Turn) -> Turn {
    turn.matching(LEADER)
}

fn as_member(name: &str, turn: Turn) -> Turn {
    turn.matching(member(name))
}

/// `(name, passed)` of every `team.gate_checked` named `name`.
fn gate_results(frames: &[EventFrame], name: &str) -> Vec<bool> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamGateChecked(g) if g.name == name => Some(g.passed),
            _ => None,
        })
        .collect()
}

/// `(round, recovery)` of every round started.
fn rounds(frames: &[EventFrame]) -> Vec<(u32, bool)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamRoundStarted(r) => Some((r.round, r.recovery)),
            _ => None,
        })
        .collect()
}

fn final_result(frames: &[EventFrame]) -> String {
    frames
        .iter()
        .rev()
        .find_map(|f| match &f.event {
            Event::RunCompleted { result, .. } if f.stream == "main" => Some(result.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

async fn task_policy(api_type: &str) {
    // 174 characters, 173 once its trailing space is trimmed.
    let long_task = format!("TASK-backend: {}", "build it carefully; ".repeat(8));
    let server = ScriptedModelServer::start(vec![
        lead(Turn::tool_call(
            "team_contract",
            json!({"goal": "hello page", "acceptance_criteria": ["the server answers hello", "the page shows it"]}),
        )),
        lead(
            Turn::tool_call(
                "team_dispatch",
                json!({"agent": "backend", "task": "TASK-backend: no criteria named"}),
            )
            .with_tool_call(
                "team_dispatch",
                json!({"agent": "frontend", "task": "TASK-frontend: x", "criteria": [3]}),
            )
            .with_tool_call(
                "team_dispatch",
                json!({"agent": "backend", "task": long_task, "criteria": [1]}),
            )
            .with_tool_call(
                "team_dispatch",
                json!({"agent": "backend", "task": "TASK-backend: build the server", "criteria": [1]}),
            ),
        ),
        as_member("backend", Turn::text("server answers hello")),
        // Criterion 2 was never served: refused.
        lead(Turn::tool_call("team_complete", json!({"summary": "too early"}))),
        lead(Turn::tool_call(
            "team_dispatch",
            json!({"agent": "frontend", "task": "TASK-frontend: show it", "criteria": [2, 2]}),
        )),
        as_member("frontend", Turn::text("the page shows hello")),
        lead(Turn::tool_call(
            "team_complete",
            json!({"summary": "hello page shipped"}),
        )),
    ])
    .unwrap();
    let world = World::new(&server, api_type);
    world.crew(
        "gates:\n  require_contract: true\n  task_policy:\n    require_criteria: true\n    max_task_chars: 100\n",
    );
    let runtime = world.runtime();
    let session = new_session(&runtime, &world.project).await;
    session.team_enter("crew").await.unwrap();
    submit(&session, "k1", "Build the hello page").await;
    wait_for(&session, "the leader's run to end", run_ended).await;
    let frames = events(&session).await;
    assert_contiguous(&frames);

    let leader = tool_results(&frames, "main");
    let errors: Vec<(&str, &str)> = leader
        .iter()
        .filter(|(_, is_error, _)| *is_error)
        .map(|(tool, _, out)| (tool.as_str(), out.as_str()))
        .collect();
    assert_eq!(errors.len(), 4, "{errors:#?}");
    assert_eq!(
        errors[0].1,
        "gates.task_policy.require_criteria: name the contract's acceptance criteria this task \
         serves in `criteria` (their numbers): 1. the server answers hello; 2. the page shows it"
    );
    assert_eq!(
        errors[1].1,
        "gates.task_policy.require_criteria: `criteria` has 3, which is not a criterion of the \
         contract (it has 2, numbered 1 to 2): 1. the server answers hello; 2. the page shows it"
    );
    assert!(
        errors[2]
            .1
            .starts_with("gates.task_policy.max_task_chars = 100: this task has 173 characters"),
        "{}",
        errors[2].1
    );
    assert_eq!(errors[3].0, "team_complete");
    assert!(
        errors[3].1.contains("gate `task_policy` failed")
            && errors[3].1.contains("- 2. the page shows it")
            && !errors[3].1.contains("- 1."),
        "{}",
        errors[3].1
    );
    // Refused dispatches never ran: two tasks in all, each with the criteria it serves.
    let dispatched: Vec<(String, Vec<u32>)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamTaskDispatched(t) => Some((t.agent.clone(), t.criteria.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        dispatched,
        vec![
            ("backend".to_string(), vec![1]),
            ("frontend".to_string(), vec![2])
        ]
    );
    assert_eq!(gate_results(&frames, "task_policy"), vec![false, true]);
    // The failed gate made the next round a recovery round.
    assert_eq!(rounds(&frames), vec![(1, false), (2, true)]);
    assert_eq!(final_result(&frames), "hello page shipped");
    assert_eq!(server.remaining_turns(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_must_meet_the_task_policy_anthropic() {
    task_policy("anthropic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_must_meet_the_task_policy_openai() {
    task_policy("openai_compatible").await;
}

async fn follow_ups(api_type: &str) {
    let server = ScriptedModelServer::start(vec![
        // The first backend.
        lead(Turn::tool_call(
            "team_dispatch",
            json!({"agent": "backend", "task": "TASK-backend: build the server"}),
        )),
        as_member(
            "backend",
            Turn::tool_call(
                "team_follow_up",
                json!({"item": "rate-limit the endpoint"}),
            )
            .with_tool_call(
                "team_follow_up",
                json!({"item": "document the endpoint"}),
            )
            // Only the leader defers.
            .with_tool_call(
                "team_follow_up",
                json!({"id": "F1", "disposition": "deferred", "reason": "later"}),
            ),
        ),
        as_member("backend", Turn::text("server built; two follow-ups open")),
        lead(Turn::tool_call("team_complete", json!({"summary": "too early"}))),
        lead(Turn::text("Two follow-ups are open; tell me how to go on.")),
        // After the restart.
        lead(Turn::tool_call("team_complete", json!({"summary": "still too early"}))),
        lead(Turn::tool_call(
            "team_dispatch",
            json!({"agent": "frontend", "task": "TASK-frontend: document the endpoint (F2)"}),
        )),
        as_member(
            "frontend",
            Turn::tool_call(
                "team_follow_up",
                json!({"id": "F2", "disposition": "done", "reason": "documented in README"}),
            ),
        ),
        as_member("frontend", Turn::text("documented")),
        lead(
            Turn::tool_call(
                "team_follow_up",
                json!({"id": "F1", "disposition": "deferred"}),
            )
            .with_tool_call(
                "team_follow_up",
                json!({"id": "f1", "disposition": "deferred", "reason": "needs a product decision"}),
            )
            .with_tool_call("team_complete", json!({"summary": "server shipped"})),
        ),
    ])
    .unwrap();
    let world = World::new(&server, api_type);
    world.crew("gates:\n  follow_ups: true\n");

    let first = world.runtime();
    let session = new_session(&first, &world.project).await;
    let session_id = session.id().to_string();
    session.team_enter("crew").await.unwrap();
    submit(&session, "k1", "Build the server").await;
    wait_for(&session, "the first run to end", run_ended).await;
    let frames = events(&session).await;
    let leader = tool_results(&frames, "main");
    let refused = leader
        .iter()
        .find(|(tool, is_error, _)| tool == "team_complete" && *is_error)
        .unwrap();
    assert!(
        refused.2.contains("gate `follow_ups` failed")
            && refused
                .2
                .contains("- F1 from `backend` (round 1): rate-limit the endpoint")
            && refused
                .2
                .contains("- F2 from `backend` (round 1): document the endpoint"),
        "{}",
        refused.2
    );
    let backend_stream = frames
        .iter()
        .find(|f| f.stream.ends_with("/backend"))
        .unwrap()
        .stream
        .clone();
    let backend_calls = tool_results(&frames, &backend_stream);
    assert_eq!(
        backend_calls
            .iter()
            .map(|(_, is_error, _)| *is_error)
            .collect::<Vec<_>>(),
        vec![false, false, true]
    );
    assert!(
        backend_calls[2]
            .2
            .starts_with("only the team leader `leader` may defer a follow-up"),
        "{}",
        backend_calls[2].2
    );
    drop(session);
    drop(first);

    // A new runtime on the same journal: the follow-ups are as they were.
    let second = world.runtime();
    let session = second.session(&session_id).await.unwrap();
    let open: Vec<(String, FollowUpStatus)> = session
        .journal()
        .with_projection(|p| {
            p.teams[0]
                .follow_ups
                .iter()
                .map(|f| (f.id.clone(), f.status))
                .collect()
        })
        .await;
    assert_eq!(
        open,
        vec![
            ("F1".to_string(), FollowUpStatus::Open),
            ("F2".to_string(), FollowUpStatus::Open)
        ]
    );
    submit(&session, "k2", "Document it and ship").await;
    wait_for(&session, "the second run to end", |frames| {
        let ended = frames.iter().filter(|f| {
            f.stream == "main"
                && matches!(
                    f.event,
                    Event::RunCompleted { .. }
                        | Event::RunFailed { .. }
                        | Event::RunInterrupted { .. }
                )
        });
        ended.count() >= 2
    })
    .await;
    let frames = events(&session).await;
    assert_contiguous(&frames);
    let leader = tool_results(&frames, "main");
    let refusals: Vec<&str> = leader
        .iter()
        .filter(|(_, is_error, _)| *is_error)
        .map(|(_, _, out)| out.as_str())
        .collect();
    assert_eq!(refusals.len(), 3, "{refusals:#?}");
    // Still refused after the restart, then a deferral without a reason.
    assert!(
        refusals[1].contains("- F1 from `backend`"),
        "{}",
        refusals[1]
    );
    assert!(
        refusals[1].contains("- F2 from `backend`"),
        "{}",
        refusals[1]
    );
    assert!(
        refusals[2].starts_with("deferring needs a `reason`"),
        "{}",
        refusals[2]
    );
    let resolved: Vec<TeamFollowUpResolved> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::TeamFollowUpResolved(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        resolved
            .iter()
            .map(|r| (r.follow_up_id.as_str(), r.by.as_str(), r.reason.as_str()))
            .collect::<Vec<_>>(),
        vec![
            ("F2", "frontend", "documented in README"),
            ("F1", "leader", "needs a product decision")
        ]
    );
    assert_eq!(
        gate_results(&frames, "follow_ups"),
        vec![false, false, true]
    );
    assert_eq!(rounds(&frames), vec![(1, false), (2, true)]);
    // The deferred item goes with the completion and into the answer.
    let completed = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::TeamCompleted(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        completed.follow_ups,
        vec![FollowUpItem {
            follow_up_id: "F1".into(),
            item: "rate-limit the endpoint".into(),
            by: "backend".into(),
            status: FollowUpStatus::Deferred,
            reason: "needs a product decision".into(),
        }]
    );
    assert_eq!(completed.summary, "server shipped");
    assert_eq!(
        final_result(&frames),
        "server shipped\n\nFollow-ups not done:\n- F1 (deferred, from backend): rate-limit the \
         endpoint — needs a product decision"
    );
    // The next task starts without follow-ups.
    let left = session
        .journal()
        .with_projection(|p| p.teams[0].follow_ups.len())
        .await;
    assert_eq!(left, 0);
    assert_eq!(server.remaining_turns(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_ups_hold_completion_until_done_or_deferred_across_a_restart_anthropic() {
    follow_ups("anthropic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_ups_hold_completion_until_done_or_deferred_across_a_restart_openai() {
    follow_ups("openai_compatible").await;
}

const THOUGHT: &str = "Which framework does the project use?\nAxum, by Cargo.toml.";

/// An event's kind and, for `team.member_thinking`, its `(agent, step, text)`.
type Seen<'a> = (&'a str, Option<(String, u32, String)>);

/// The thinking journaled with `show_thinking` on or off.
async fn thinking(api_type: &str, show: bool) {
    let server = ScriptedModelServer::start(vec![
        lead(Turn::tool_call(
            "team_dispatch",
            json!({"agent": "backend", "task": "TASK-backend: build the server"}),
        ))
        .with_thinking("The leader plans."),
        as_member(
            "backend",
            Turn::tool_call("list_dir", json!({"path": "."})).with_thinking(THOUGHT),
        ),
        as_member("backend", Turn::text("server built")),
        lead(Turn::tool_call("team_complete", json!({"summary": "done"}))),
    ])
    .unwrap();
    let world = World::new(&server, api_type);
    world.crew(&format!("transcript:\n  show_thinking: {show}\n"));
    let runtime = world.runtime();
    let session = new_session(&runtime, &world.project).await;
    session.team_enter("crew").await.unwrap();
    submit(&session, "k1", "Build it").await;
    wait_for(&session, "the run to end", run_ended).await;
    let frames = events(&session).await;
    let entered = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::TeamEntered(e) => Some(e.show_thinking),
            _ => None,
        })
        .unwrap();
    assert_eq!(entered, show);
    // On the member's stream, just before the answer it belongs to.
    let backend: Vec<Seen> = frames
        .iter()
        .filter(|f| f.stream.ends_with("/backend"))
        .map(|f| {
            let thought = match &f.event {
                Event::TeamMemberThinking(t) => Some((t.agent.clone(), t.step, t.text.clone())),
                _ => None,
            };
            (f.event.kind(), thought)
        })
        .filter(|(kind, _)| *kind == "team.member_thinking" || *kind == "message.assistant")
        .collect();
    let expected: Vec<Seen> = if show {
        vec![
            (
                "team.member_thinking",
                Some(("backend".to_string(), 1, THOUGHT.to_string())),
            ),
            ("message.assistant", None),
            ("message.assistant", None),
        ]
    } else {
        vec![("message.assistant", None), ("message.assistant", None)]
    };
    assert_eq!(backend, expected);
    // The leader's thinking is never journaled (it streams as deltas); off, nothing is.
    let journaled = serde_json::to_string(&frames).unwrap();
    assert!(!journaled.contains("The leader plans."));
    assert_eq!(journaled.contains("Which framework"), show);
    assert_eq!(server.remaining_turns(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_thinking_is_journaled_only_when_shown_anthropic() {
    thinking("anthropic", true).await;
    thinking("anthropic", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_thinking_is_journaled_only_when_shown_openai() {
    thinking("openai_compatible", true).await;
    thinking("openai_compatible", false).await;
}
