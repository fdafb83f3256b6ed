//! Benchmark (ignored; `cargo test -p lumina-runtime --test all -- --ignored --nocapture
//! team::bench`): writing 1,000 team checkpoint events of an 8-member team into a session's
//! SQLite journal, one durable append per checkpoint as the loop writes them, and resuming
//! the session afterwards (open, replay into the projection, recovery of the open round).

use std::time::Instant;

use lumina_protocol::team::{TeamRoundStarted, TeamTaskDispatched, TeamTaskEnded};
use lumina_protocol::{team_board_stream, team_member_stream, Event, TaskStatus, Usage};
use lumina_runtime::Runtime;
use lumina_testkit::ScriptedModelServer;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn bench_team_checkpoints_sqlite() {
    let server = ScriptedModelServer::start(vec![]).unwrap();
    let world = World::new(&server, "anthropic");
    checkpoints("sqlite", || world.runtime(), &world).await;
}

/// Writes 1,000 checkpoint events through a runtime from `open`, then resumes the session
/// on a fresh one, and prints both times.
pub(super) async fn checkpoints(store: &str, open: impl Fn() -> Runtime, world: &World) {
    let runtime = open();
    let session = new_session(&runtime, &world.project).await;
    let entered = session.team_enter("product-development").await.unwrap();
    assert_eq!(entered.members.len(), 8);
    let team_run_id = entered.team_run_id.clone();
    let board = team_board_stream(&team_run_id);
    let workers: Vec<String> = entered.members[1..].to_vec();
    let journal = session.journal().clone();

    let started = Instant::now();
    let mut written = 0;
    let mut appends = 0;
    let mut task = 0;
    while written < 1000 {
        if task % workers.len() == 0 {
            journal
                .append_to(
                    &board,
                    vec![Event::TeamRoundStarted(TeamRoundStarted {
                        team_run_id: team_run_id.clone(),
                        round: (task / workers.len()) as u32 + 1,
                        recovery: false,
                        reason: None,
                    })],
                )
                .await
                .unwrap();
            written += 1;
            appends += 1;
        }
        let agent = &workers[task % workers.len()];
        let task_id = format!("task-{task}");
        let stream = team_member_stream(&team_run_id, agent);
        journal
            .append_to(
                &board,
                vec![Event::TeamTaskDispatched(TeamTaskDispatched {
                    team_run_id: team_run_id.clone(),
                    round: (task / workers.len()) as u32 + 1,
                    task_id: task_id.clone(),
                    agent: agent.clone(),
                    task: "a task of a few words".into(),
                    call_id: format!("call-{task}"),
                    retry_of: None,
                    criteria: Vec::new(),
                })],
            )
            .await
            .unwrap();
        journal
            .append_to(
                &stream,
                vec![
                    Event::RunStarted {
                        run_id: task_id.clone(),
                        idempotency_key: format!("team:{task_id}"),
                        model: "m".into(),
                    },
                    Event::MessageUser {
                        run_id: task_id.clone(),
                        text: "a task of a few words".into(),
                        skill: None,
                    },
                ],
            )
            .await
            .unwrap();
        journal
            .append_to(
                &stream,
                vec![Event::RunCompleted {
                    run_id: task_id.clone(),
                    result: "done".into(),
                    usage: Usage::default(),
                }],
            )
            .await
            .unwrap();
        journal
            .append_to(
                &board,
                vec![Event::TeamTaskEnded(TeamTaskEnded {
                    team_run_id: team_run_id.clone(),
                    task_id,
                    agent: agent.clone(),
                    status: TaskStatus::Completed,
                    summary: "done".into(),
                })],
            )
            .await
            .unwrap();
        written += 5;
        appends += 4;
        task += 1;
    }
    let write = started.elapsed();
    let id = session.id().to_string();
    drop(session);
    drop(runtime);

    let started = Instant::now();
    let resumed = open();
    let session = resumed.session(&id).await.unwrap();
    let resume = started.elapsed();
    let tasks = session
        .journal()
        .with_projection(|p| p.teams[0].tasks.len())
        .await;
    assert_eq!(tasks, task);
    println!(
        "team checkpoints ({store}): {written} events in {appends} appends over {} streams: \
         write {:.1} ms ({:.0} µs per append); resume (open, replay, recovery) {:.1} ms",
        workers.len() + 1,
        write.as_secs_f64() * 1e3,
        write.as_secs_f64() * 1e6 / appends as f64,
        resume.as_secs_f64() * 1e3
    );
}

/// The cost of a round beyond the members' own model time: a round of three members that
/// each answer at once, from the journal's timestamps (round start to round end, minus the
/// longest member's model request to its answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn bench_team_round_overhead() {
    use lumina_testkit::Turn;
    use serde_json::json;

    let members = ["research", "frontend", "backend"];
    let rounds = 20;
    let mut script = vec![Turn::tool_call(
        "team_contract",
        json!({"goal": "g", "acceptance_criteria": ["c"]}),
    )
    .matching(LEADER)];
    for _ in 0..rounds {
        let mut round = Turn::default();
        for agent in members {
            // The built-in team's task policy: every task names the criteria it serves.
            round = round.with_tool_call(
                "team_dispatch",
                json!({"agent": agent, "task": "go", "criteria": [1]}),
            );
        }
        script.push(round.matching(LEADER));
        for agent in members {
            script.push(Turn::text("done").matching(member(agent)));
        }
    }
    script.push(Turn::text("finished").matching(LEADER));
    let server = ScriptedModelServer::start(script).unwrap();
    let world = World::new(&server, "anthropic");
    let runtime = world.runtime();
    let session = new_session(&runtime, &world.project).await;
    session.team_enter("product-development").await.unwrap();
    submit(&session, "k1", "go").await;
    wait_for(&session, "the run to end", run_ended).await;
    let frames = events(&session).await;
    let mut overheads = Vec::new();
    let mut start = 0;
    let mut model_ms: std::collections::HashMap<String, (i64, i64)> = Default::default();
    for frame in &frames {
        match &frame.event {
            Event::TeamRoundStarted(_) => {
                start = frame.ts_ms;
                model_ms.clear();
            }
            Event::ModelRequested { run_id, .. } if frame.stream != "main" => {
                model_ms.insert(run_id.clone(), (frame.ts_ms, frame.ts_ms));
            }
            Event::ModelResponded { run_id, .. } if frame.stream != "main" => {
                if let Some(span) = model_ms.get_mut(run_id) {
                    span.1 = frame.ts_ms;
                }
            }
            Event::TeamRoundEnded(_) => {
                let longest = model_ms.values().map(|(a, b)| b - a).max().unwrap_or(0);
                overheads.push(frame.ts_ms - start - longest);
            }
            _ => {}
        }
    }
    assert_eq!(overheads.len(), rounds);
    overheads.sort();
    println!(
        "team round overhead (sqlite, {} members per round, {rounds} rounds): median {} ms, max {} ms",
        members.len(),
        overheads[overheads.len() / 2],
        overheads[overheads.len() - 1]
    );
}
