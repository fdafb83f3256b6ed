//! Agent extensions (issue 7): follow-ups queued behind a running turn, steering messages
//! delivered to the running turn's next model request, both across a `kill -9`, and hooks
//! (`extensions/hooks.rs`).

mod hooks;

use lumina_client::Client;
use lumina_protocol::methods::{SessionSubmitParams, SubmitMode};
use lumina_protocol::{Event, EventFrame};
use lumina_testkit::{ScriptedModelServer, Turn};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::crash::{dirs, kill9, spawn_backend};
use crate::support::*;

fn with_mode(mut params: SessionSubmitParams, mode: SubmitMode) -> SessionSubmitParams {
    params.mode = Some(mode);
    params
}

/// Run ids in `run.started` order.
fn started(frames: &[EventFrame]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::RunStarted { run_id, .. } => Some(run_id.clone()),
            _ => None,
        })
        .collect()
}

fn seq_of(frames: &[EventFrame], pred: impl Fn(&Event) -> bool) -> u64 {
    frames
        .iter()
        .find(|f| pred(&f.event))
        .map(|f| f.seq)
        .unwrap_or_else(|| panic!("event not found in {frames:#?}"))
}

/// The text of the model request `i` (the whole JSON body).
fn request_text(model: &ScriptedModelServer, i: usize) -> String {
    model.requests()[i].body.to_string()
}

#[tokio::test]
async fn followups_sent_during_a_run_start_after_it_in_order() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("shell", json!({"command": "sleep 1"})),
            Turn::text("first done"),
            Turn::text("second done"),
            Turn::text("third done"),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let first = client
        .session_submit(&submit(&session.id, "first prompt", bypass()))
        .await
        .unwrap();
    next_event(&mut notes, "tool.started").await;

    let second_params = submit(&session.id, "second prompt", bypass());
    let second = client.session_submit(&second_params).await.unwrap();
    let third = client
        .session_submit(&with_mode(
            submit(&session.id, "third prompt", bypass()),
            SubmitMode::Followup,
        ))
        .await
        .unwrap();
    assert_eq!(
        (second.run.status.as_str(), third.run.status.as_str()),
        ("queued", "queued")
    );
    // A retry of a queued submit returns the same queued run.
    let retry = client.session_submit(&second_params).await.unwrap();
    assert_eq!(
        (retry.run_id.as_str(), retry.created),
        (second.run_id.as_str(), false)
    );

    until_run_end(&mut notes, &third.run_id).await;
    let frames = client
        .session_events(&session.id, 0, Some(1000))
        .await
        .unwrap()
        .events;
    assert_contiguous(&frames);
    assert_eq!(
        started(&frames),
        vec![
            first.run_id.clone(),
            second.run_id.clone(),
            third.run_id.clone()
        ]
    );
    let queued: Vec<(String, String)> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::RunQueued { run_id, mode, .. } => Some((run_id.clone(), mode.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        queued,
        vec![
            (second.run_id.clone(), "followup".to_string()),
            (third.run_id.clone(), "followup".to_string()),
        ]
    );
    // Each follow-up starts only after the run before it ended.
    let end_first = seq_of(&frames, |e| is_terminal(e, &first.run_id));
    let start_second = seq_of(
        &frames,
        |e| matches!(e, Event::RunStarted { run_id, .. } if *run_id == second.run_id),
    );
    let end_second = seq_of(&frames, |e| is_terminal(e, &second.run_id));
    let start_third = seq_of(
        &frames,
        |e| matches!(e, Event::RunStarted { run_id, .. } if *run_id == third.run_id),
    );
    assert!(end_first < start_second && end_second < start_third);
    let results: Vec<String> = frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::RunCompleted { result, .. } => Some(result.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results, vec!["first done", "second done", "third done"]);
    // The follow-up's request carries the earlier turn and its own prompt.
    let third_request = request_text(&h.model, 3);
    assert!(third_request.contains("first done") && third_request.contains("third prompt"));
    let info = client.session_list(false).await.unwrap();
    assert_eq!(info[0].status, "idle");
    h.stop().await;
}

#[tokio::test]
async fn steering_reaches_the_next_model_request_of_the_current_run() {
    let h = Harness::start(
        "anthropic",
        vec![
            Turn::tool_call("shell", json!({"command": "echo tool-output; sleep 1"})),
            Turn::text("steered answer"),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, "build the page", bypass()))
        .await
        .unwrap();
    next_event(&mut notes, "tool.started").await;
    let steer = client
        .session_submit(&with_mode(
            submit(&session.id, "use the blue theme instead", bypass()),
            SubmitMode::Steer,
        ))
        .await
        .unwrap();
    assert_eq!(
        (steer.run_id.as_str(), steer.run.status.as_str()),
        (run.run_id.as_str(), "running")
    );
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    assert!(frames.iter().any(|f| matches!(&f.event,
        Event::MessageSteering { run_id, text } if *run_id == run.run_id && text == "use the blue theme instead")));
    assert!(matches!(&frames.last().unwrap().event,
        Event::RunCompleted { result, .. } if result == "steered answer"));

    // The request before the steering message does not have it; the next one does, after
    // the tool result it arrived during.
    assert_eq!(h.model.request_count(), 2);
    assert!(!request_text(&h.model, 0).contains("blue theme"));
    let last = &h.model.requests()[1].body;
    let user = last["messages"].as_array().unwrap().last().unwrap().clone();
    let blocks: Vec<(String, String)> = user["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let kind = b["type"].as_str().unwrap_or_default().to_string();
            let text = match kind.as_str() {
                "tool_result" => text_of(&b["content"]),
                _ => b["text"].as_str().unwrap_or_default().to_string(),
            };
            (kind, text)
        })
        .collect();
    assert_eq!(blocks.len(), 2, "{user:#}");
    assert_eq!(blocks[0].0, "tool_result");
    assert!(blocks[0].1.contains("tool-output"), "{blocks:?}");
    assert_eq!(blocks[1].0, "text");
    assert!(
        blocks[1].1.ends_with("\nuse the blue theme instead"),
        "{blocks:?}"
    );
    h.stop().await;
}

/// Tool result content as text (a string or a list of text blocks).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[tokio::test]
async fn a_run_that_answers_during_steering_takes_one_more_step() {
    let h = Harness::start(
        "openai_compatible",
        vec![
            Turn::text("a first answer streamed slowly enough to be steered")
                .with_chunk_delay_ms(40),
            Turn::text("answer after steering"),
        ],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    // Steering an idle session just starts a run.
    let run = client
        .session_submit(&with_mode(
            submit(&session.id, "write a haiku", bypass()),
            SubmitMode::Steer,
        ))
        .await
        .unwrap();
    assert_eq!(run.run.status, "running");
    next_event(&mut notes, "model.requested").await;
    client
        .session_submit(&with_mode(
            submit(&session.id, "make it about autumn", bypass()),
            SubmitMode::Steer,
        ))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    let frames = client
        .session_events(&session.id, 0, Some(1000))
        .await
        .unwrap()
        .events;
    assert!(matches!(&frames.last().unwrap().event,
        Event::RunCompleted { result, .. } if result == "answer after steering"));
    assert_eq!(started(&frames), vec![run.run_id.clone()], "one run only");
    assert_eq!(h.model.request_count(), 2);
    let second = request_text(&h.model, 1);
    let answer = second.find("a first answer").unwrap();
    let steering = second.find("make it about autumn").unwrap();
    assert!(answer < steering, "{second}");
    h.stop().await;
}

#[tokio::test]
async fn queued_followups_and_steering_survive_kill_9() {
    let (_tmp, project, app) = dirs();
    let model = ScriptedModelServer::start(vec![
        Turn::text("a stalled answer that never ends").stall_after(3),
        Turn::text("follow-up done"),
    ])
    .unwrap();
    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let (client, mut notes) = Client::connect(&backend.url, Some(&backend.token))
        .await
        .unwrap();
    let session = create_and_resume(&client, &project).await;
    let first = client
        .session_submit(&submit(&session.id, "first prompt", json!(null)))
        .await
        .unwrap();
    next_event(&mut notes, "model.requested").await;
    let followup_params = submit(&session.id, "the follow-up prompt", json!(null));
    let followup = client.session_submit(&followup_params).await.unwrap();
    assert_eq!(followup.run.status, "queued");
    client
        .session_submit(&with_mode(
            submit(&session.id, "remember the steering text", json!(null)),
            SubmitMode::Steer,
        ))
        .await
        .unwrap();
    next_event(&mut notes, "message.steering").await;
    kill9(&mut backend);
    drop(client);

    // The restarted backend closes the interrupted run, then starts the follow-up, whose
    // first request carries the undelivered steering message.
    let mut backend = spawn_backend(&app, &project, &model.base_url());
    let (client, mut notes) = Client::connect(&backend.url, Some(&backend.token))
        .await
        .unwrap();
    client.session_resume(&session.id, 0).await.unwrap();
    until_run_end(&mut notes, &followup.run_id).await;
    let frames = client
        .session_events(&session.id, 0, Some(1000))
        .await
        .unwrap()
        .events;
    assert_contiguous(&frames);
    assert_eq!(
        started(&frames),
        vec![first.run_id.clone(), followup.run_id.clone()]
    );
    let interrupted = seq_of(
        &frames,
        |e| matches!(e, Event::RunInterrupted { run_id, .. } if *run_id == first.run_id),
    );
    let restarted = seq_of(
        &frames,
        |e| matches!(e, Event::RunStarted { run_id, .. } if *run_id == followup.run_id),
    );
    assert!(interrupted < restarted);
    assert!(matches!(&frames.last().unwrap().event,
        Event::RunCompleted { run_id, result, .. } if *run_id == followup.run_id && result == "follow-up done"));
    assert_eq!(model.request_count(), 2);
    let second = request_text(&model, 1);
    assert!(second.contains("remember the steering text"), "{second}");
    assert!(second.contains("the follow-up prompt"), "{second}");
    assert!(!request_text(&model, 0).contains("remember the steering text"));
    // The follow-up's key still names it.
    let again = client.session_submit(&followup_params).await.unwrap();
    assert_eq!(
        (
            again.run_id.as_str(),
            again.created,
            again.run.status.as_str()
        ),
        (followup.run_id.as_str(), false, "completed")
    );
    kill9(&mut backend);
}
