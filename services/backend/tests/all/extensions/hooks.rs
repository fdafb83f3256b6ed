//! Hooks from settings (`LUMINA_HOOKS` here; settings.json works the same): a blocking
//! `pre_tool_use`, `post_tool_use`/`stop`/`session_start` payloads, timeouts, failures and a
//! blocked prompt.

use lumina_protocol::{Event, EventFrame};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::support::*;

/// `hook.completed` events as (event, exit_code, blocked, timed_out, output).
fn hook_runs(frames: &[EventFrame]) -> Vec<(String, Option<i32>, bool, bool, String)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::HookCompleted {
                event,
                exit_code,
                blocked,
                timed_out,
                output,
                ..
            } => Some((
                event.clone(),
                *exit_code,
                *blocked,
                *timed_out,
                output.clone(),
            )),
            _ => None,
        })
        .collect()
}

fn warnings(frames: &[EventFrame]) -> Vec<(String, String)> {
    frames
        .iter()
        .filter_map(|f| match &f.event {
            Event::Warning { code, message, .. } => Some((code.clone(), message.clone())),
            _ => None,
        })
        .collect()
}

async fn all_events(client: &lumina_client::Client, session_id: &str) -> Vec<EventFrame> {
    client
        .session_events(session_id, 0, Some(1000))
        .await
        .unwrap()
        .events
}

#[tokio::test]
async fn a_pre_tool_use_hook_blocks_a_shell_call_with_its_reason() {
    let hooks = json!({"pre_tool_use": [{
        "matcher": "shell",
        "command": "payload=$(cat); case \"$payload\" in *'rm -rf'*) echo 'deleting is not allowed here' >&2; exit 2;; esac",
    }]});
    let h = Harness::start_with(
        "anthropic",
        vec![
            Turn::tool_call("shell", json!({"command": "rm -rf build"})),
            Turn::tool_call("write_file", json!({"path": "a.txt", "content": "a"})),
            Turn::tool_call("shell", json!({"command": "echo fine > ok.txt"})),
            Turn::text("done"),
        ],
        &[("LUMINA_HOOKS", &hooks.to_string())],
    )
    .await;
    std::fs::create_dir_all(h.path("build")).unwrap();
    std::fs::write(h.path("build/keep"), "x").unwrap();
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, "clean up", bypass()))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);

    assert_eq!(
        tool_outputs(&frames),
        vec![
            (
                "shell".to_string(),
                true,
                "blocked by hook: deleting is not allowed here".to_string()
            ),
            (
                "write_file".to_string(),
                false,
                tool_outputs(&frames)[1].2.clone()
            ),
            ("shell".to_string(), false, "(no output)\n".to_string()),
        ]
    );
    assert!(h.path("build/keep").exists());
    assert!(h.path("ok.txt").exists());
    // Only shell calls match; the second one passes.
    assert_eq!(
        hook_runs(&frames),
        vec![
            (
                "pre_tool_use".to_string(),
                Some(2),
                true,
                false,
                "deleting is not allowed here".to_string()
            ),
            (
                "pre_tool_use".to_string(),
                Some(0),
                false,
                false,
                String::new()
            ),
        ]
    );
    assert!(warnings(&frames).is_empty(), "{:?}", warnings(&frames));
    // The model is told why.
    let second = h.model.requests()[1].body.to_string();
    assert!(second.contains("blocked by hook: deleting is not allowed here"));
    h.stop().await;
}

#[tokio::test]
async fn session_start_post_tool_use_and_stop_hooks_get_their_payloads() {
    let hooks = json!({
        "session_start": [{"command": "echo session-hook"}],
        "post_tool_use": [{"command": "cat"}],
        "stop": [{"command": "cat"}],
    });
    let h = Harness::start_with(
        "openai_compatible",
        vec![
            Turn::tool_call("shell", json!({"command": "echo hello-from-shell"})),
            Turn::text("all done"),
        ],
        &[("LUMINA_HOOKS", &hooks.to_string())],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, "say hello", bypass()))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    let frames = all_events(&client, &session.id).await;
    assert_eq!(
        kinds(&frames[..2]),
        vec!["session.created", "hook.completed"]
    );
    let runs = hook_runs(&frames);
    assert_eq!(
        runs.iter().map(|r| (r.0.as_str(), r.1)).collect::<Vec<_>>(),
        vec![
            ("session_start", Some(0)),
            ("post_tool_use", Some(0)),
            ("stop", Some(0))
        ]
    );
    assert_eq!(runs[0].4, "session-hook");

    let post: Value = serde_json::from_str(&runs[1].4).unwrap();
    assert_eq!(post["event"], json!("post_tool_use"));
    assert_eq!(post["tool"], json!("shell"));
    assert_eq!(post["run_id"], json!(run.run_id));
    assert_eq!(post["session_id"], json!(session.id));
    assert_eq!(
        post["arguments"],
        json!({"command": "echo hello-from-shell"})
    );
    assert_eq!(post["output"], json!("hello-from-shell\n"));
    assert_eq!(post["is_error"], json!(false));
    // Journaled after the tool's result.
    let completed = frames
        .iter()
        .position(|f| f.event.kind() == "tool.completed")
        .unwrap();
    let post_at = frames
        .iter()
        .position(
            |f| matches!(&f.event, Event::HookCompleted { event, .. } if event == "post_tool_use"),
        )
        .unwrap();
    assert!(completed < post_at);

    let stop: Value = serde_json::from_str(&runs[2].4).unwrap();
    assert_eq!(stop["status"], json!("completed"));
    assert_eq!(stop["result"], json!("all done"));
    // The stop hook runs before the run's terminal event.
    assert_eq!(
        kinds(&frames[frames.len() - 2..]),
        vec!["hook.completed", "run.completed"]
    );
    h.stop().await;
}

#[tokio::test]
async fn a_hook_that_times_out_is_killed_with_its_children_and_does_not_block() {
    let hooks = json!({"pre_tool_use": [
        {"matcher": "shell", "timeout_ms": 300,
         "command": "sleep 30 & echo $! > bg.pid; sleep 30"},
        {"matcher": "shell", "command": "echo broken >&2; exit 1"},
    ]});
    let h = Harness::start_with(
        "anthropic",
        vec![
            Turn::tool_call("shell", json!({"command": "echo ran > ran.txt"})),
            Turn::text("done"),
        ],
        &[("LUMINA_HOOKS", &hooks.to_string())],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let started = std::time::Instant::now();
    let run = client
        .session_submit(&submit(&session.id, "go", bypass()))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let runs = hook_runs(&frames);
    assert_eq!(
        runs.iter().map(|r| (r.1, r.2, r.3)).collect::<Vec<_>>(),
        vec![(None, false, true), (Some(1), false, false)]
    );
    let warned = warnings(&frames);
    assert_eq!(
        warned.iter().map(|w| w.0.as_str()).collect::<Vec<_>>(),
        vec!["hook_timeout", "hook_failed"]
    );
    assert!(
        warned[1].1.contains("exited with code 1: broken"),
        "{warned:?}"
    );
    // Neither blocks the call.
    assert!(h.path("ran.txt").exists());
    // The hook's background child died with its process group.
    let pid = read(&h.path("bg.pid")).trim().to_string();
    let mut alive = true;
    for _ in 0..50 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Gone, or a zombie waiting to be reaped.
        if stat.is_empty() || stat.split_whitespace().nth(2) == Some("Z") {
            alive = false;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!alive, "background child {pid} survived the timeout");
    h.stop().await;
}

#[tokio::test]
async fn a_user_prompt_submit_hook_can_block_the_prompt() {
    let hooks = json!({"user_prompt_submit": [{
        "command": "if grep -q password; then echo 'prompts may not contain passwords' >&2; exit 2; fi",
    }]});
    let h = Harness::start_with(
        "anthropic",
        vec![Turn::text("hi there")],
        &[("LUMINA_HOOKS", &hooks.to_string())],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let blocked = client
        .session_submit(&submit(&session.id, "my password is hunter2", bypass()))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes, &blocked.run_id).await);
    let failed = frames
        .iter()
        .find_map(|f| match &f.event {
            Event::RunFailed { code, message, .. } => Some((code.clone(), message.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(failed.0, "blocked_by_hook");
    assert!(
        failed.1.ends_with("prompts may not contain passwords"),
        "{failed:?}"
    );
    assert_eq!(h.model.request_count(), 0);

    let fine = client
        .session_submit(&submit(&session.id, "hello", bypass()))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes, &fine.run_id).await);
    assert!(matches!(&frames.last().unwrap().event,
        Event::RunCompleted { result, .. } if result == "hi there"));
    assert_eq!(h.model.request_count(), 1);
    // The blocked prompt is kept out of the model's context for good.
    assert!(!h.model.requests()[0].body.to_string().contains("hunter2"));
    h.stop().await;
}

#[tokio::test]
async fn a_user_prompt_submit_hook_blocks_a_steering_message_too() {
    let hooks = json!({"user_prompt_submit": [{
        "command": "if grep -q password; then echo 'prompts may not contain passwords' >&2; exit 2; fi",
    }]});
    let h = Harness::start_with(
        "anthropic",
        vec![
            Turn::tool_call("shell", json!({"command": "echo working; sleep 1"})),
            Turn::text("finished"),
        ],
        &[("LUMINA_HOOKS", &hooks.to_string())],
    )
    .await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, "build it", bypass()))
        .await
        .unwrap();
    next_event(&mut notes, "tool.started").await;
    let mut steer = submit(&session.id, "the password is hunter2", bypass());
    steer.mode = Some(lumina_protocol::methods::SubmitMode::Steer);
    let err = client.session_submit(&steer).await.unwrap_err();
    let error = err.server_error().unwrap();
    assert_eq!(error.code, lumina_protocol::ErrorCode::Forbidden);
    assert!(
        error.message.contains("prompts may not contain passwords"),
        "{error:?}"
    );
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    assert!(!frames
        .iter()
        .any(|f| matches!(f.event, Event::MessageSteering { .. })));
    assert!(matches!(&frames.last().unwrap().event,
        Event::RunCompleted { result, .. } if result == "finished"));
    // The hook ran (and is journaled); the model never saw the message.
    let all = all_events(&client, &session.id).await;
    assert!(hook_runs(&all)
        .iter()
        .any(|(event, exit, blocked, _, _)| event == "user_prompt_submit"
            && *exit == Some(2)
            && *blocked));
    for request in h.model.requests() {
        assert!(!request.body.to_string().contains("hunter2"));
    }
    h.stop().await;
}

#[tokio::test]
async fn project_hooks_run_only_after_the_user_trusts_them() {
    let h = Harness::start(
        "anthropic",
        vec![Turn::text("one"), Turn::text("two"), Turn::text("three")],
    )
    .await;
    let defaults = h.path(".Lumina/CONFIG/defaults.json");
    std::fs::create_dir_all(defaults.parent().unwrap()).unwrap();
    std::fs::write(
        &defaults,
        json!({"hooks": {"stop": [{"command": "echo ran >> project-hook.log"}]}}).to_string(),
    )
    .unwrap();
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;

    // Headless: nobody can be asked, so the hooks stay off and the run says why.
    let mut headless = submit(&session.id, "first", bypass());
    headless.headless = true;
    let run = client.session_submit(&headless).await.unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    assert!(warnings(&frames)
        .iter()
        .any(|(code, message)| code == "hooks_untrusted" && message.contains("defaults.json")));
    assert!(!h.path("project-hook.log").exists());

    // Interactive: the permission dialog asks once; allowed, the hook runs from now on.
    let run = client
        .session_submit(&submit(&session.id, "second", bypass()))
        .await
        .unwrap();
    let asked = next_event(&mut notes, "permission.requested").await;
    let Event::PermissionRequested {
        request_id,
        tool,
        arguments,
        ..
    } = &asked.event
    else {
        unreachable!()
    };
    assert_eq!(tool, "hooks_trust");
    assert_eq!(
        arguments["commands"],
        json!(["echo ran >> project-hook.log"])
    );
    client
        .permission_respond(
            &session.id,
            request_id,
            lumina_protocol::Decision::AllowOnce,
            None,
        )
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    let run = client
        .session_submit(&submit(&session.id, "third", bypass()))
        .await
        .unwrap();
    let frames = events(&until_run_end(&mut notes, &run.run_id).await);
    assert!(!frames
        .iter()
        .any(|f| matches!(f.event, Event::PermissionRequested { .. })));
    assert_eq!(read(&h.path("project-hook.log")), "ran\nran\n");
    h.stop().await;
}
