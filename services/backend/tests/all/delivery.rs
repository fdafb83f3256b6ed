//! Exactly-once, in-order delivery to several clients, and resume from a seq.

use lumina_client::{catch_up, Notification, SessionView};
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn two_clients_see_identical_events_and_resume_gets_exactly_the_missed_ones() {
    let h = Harness::start(
        "openai_compatible",
        vec![
            Turn::tool_call(
                "todo_write",
                json!({"todos": [{"content": "write", "status": "in_progress"}]}),
            ),
            Turn::text("first run done"),
            Turn::text("second run done"),
        ],
    )
    .await;
    let (a, mut a_notes) = h.client().await;
    let (b, mut b_notes) = h.client().await;
    let session = h.session(&a).await;
    b.session_resume(&session.id, 0).await.unwrap();

    let run = a
        .session_submit(&submit(&session.id, "plan it", bypass()))
        .await
        .unwrap();
    let a_seen = events(&until_run_end(&mut a_notes, &run.run_id).await);
    let b_seen = events(&until_run_end(&mut b_notes, &run.run_id).await);
    assert_eq!(a_seen, b_seen);
    assert_contiguous(&a_seen);
    assert!(a_seen.iter().any(|f| f.event.kind() == "task.updated"));
    let cut = a_seen.last().unwrap().seq;

    // Client C connects later and resumes after `cut`: it must get exactly the second run.
    drop(b);
    let run2 = a
        .session_submit(&submit(&session.id, "again", bypass()))
        .await
        .unwrap();
    let a_second = events(&until_run_end(&mut a_notes, &run2.run_id).await);
    let (c, mut c_notes) = h.client().await;
    c.session_resume(&session.id, cut).await.unwrap();
    let c_seen = events(&until_run_end(&mut c_notes, &run2.run_id).await);
    assert_eq!(c_seen, a_second);
    assert_eq!(c_seen.first().unwrap().seq, cut + 1);

    // Paging with session.events returns the same journal.
    let mut view = SessionView::new(0);
    let all = catch_up(&c, &session.id, &mut view).await.unwrap();
    assert_eq!(all.len() as u64, c_seen.last().unwrap().seq);
    assert_contiguous(&all);
    let page = c.session_events(&session.id, 2, Some(3)).await.unwrap();
    assert_eq!(
        page.events.iter().map(|f| f.seq).collect::<Vec<_>>(),
        vec![3, 4, 5]
    );
    assert!(page.more);
    // No stray frames after the end.
    assert!(matches!(
        c_notes.try_recv(),
        Err(_) | Ok(Notification::Delta(_))
    ));
    h.stop().await;
}

#[tokio::test]
async fn many_sessions_run_concurrently_on_one_backend() {
    let h = Harness::start("anthropic", vec![]).await;
    h.model.set_default_turn(Turn::text("concurrent ok"));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (client, mut notes) = h.client().await;
        let session = h.session(&client).await;
        tasks.push(tokio::spawn(async move {
            let run = client
                .session_submit(&submit(&session.id, &format!("task {i}"), bypass()))
                .await
                .unwrap();
            let frames = events(&until_run_end(&mut notes, &run.run_id).await);
            assert_contiguous(&frames);
            frames.last().unwrap().event.clone()
        }));
    }
    for task in tasks {
        let last = task.await.unwrap();
        assert!(
            matches!(last, lumina_protocol::Event::RunCompleted { ref result, .. } if result == "concurrent ok")
        );
    }
    assert_eq!(
        h.state
            .runtime()
            .unwrap()
            .list_sessions(false)
            .await
            .unwrap()
            .len(),
        8
    );
    h.stop().await;
}

#[tokio::test]
async fn archive_moves_a_session_out_of_the_list_and_keeps_it_readable() {
    let h = Harness::start("anthropic", vec![Turn::text("hi")]).await;
    let (client, mut notes) = h.client().await;
    let session = h.session(&client).await;
    let run = client
        .session_submit(&submit(&session.id, "hello", bypass()))
        .await
        .unwrap();
    until_run_end(&mut notes, &run.run_id).await;
    client.session_archive(&session.id).await.unwrap();
    assert!(client.session_list(false).await.unwrap().is_empty());
    let all = client.session_list(true).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].status, "archived");
    let dir = h.tmp.path().join("app/data/sessions");
    assert!(dir
        .join("archive")
        .join(&session.id)
        .join("runtime.sqlite")
        .exists());
    assert!(!dir.join("active").join(&session.id).exists());
    // Still readable, but no new runs.
    let page = client.session_events(&session.id, 0, None).await.unwrap();
    assert_eq!(page.events.last().unwrap().event.kind(), "session.archived");
    let err = client
        .session_submit(&submit(&session.id, "again", bypass()))
        .await
        .unwrap_err();
    assert_eq!(
        err.server_error().unwrap().code,
        lumina_protocol::ErrorCode::Conflict
    );
    h.stop().await;
}
