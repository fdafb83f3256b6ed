//! Client behaviour: authentication, routing, notifications, timeouts, close, catch-up.

use std::time::Duration;

use lumina_client::protocol::{ErrorCode, ErrorObject, Event};
use lumina_client::{catch_up, Client, ClientError, Notification, Offer, SessionView};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::fake_server::{self, event_frame, JOURNAL_LEN, TOKEN};

#[tokio::test]
async fn wrong_token_is_unauthorized_and_never_echoed() {
    let url = fake_server::start().await;
    let error = Client::connect(&url, Some("wrong-token-value"))
        .await
        .unwrap_err();
    let ClientError::Unauthorized(message) = &error else {
        panic!("expected Unauthorized, got {error:?}");
    };
    assert!(message.contains("401"), "{message}");
    assert!(!message.contains("wrong-token-value"), "{message}");

    let error = Client::connect(&url, None).await.unwrap_err();
    assert!(matches!(error, ClientError::Unauthorized(_)), "{error:?}");
}

#[tokio::test]
async fn refused_port_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let error = Client::connect(&format!("ws://{addr}/v1/ws"), None)
        .await
        .unwrap_err();
    assert!(matches!(error, ClientError::Connect(_)), "{error:?}");
}

#[tokio::test]
async fn wss_is_reported_as_unsupported() {
    let error = Client::connect("wss://127.0.0.1:1/v1/ws", None)
        .await
        .unwrap_err();
    let ClientError::Connect(message) = error else {
        panic!("expected Connect");
    };
    assert!(message.contains("TLS"), "{message}");
}

#[tokio::test]
async fn calls_are_routed_by_id() {
    let url = fake_server::start().await;
    let (client, _notifications) = Client::connect(&url, Some(TOKEN)).await.unwrap();
    let hello = client.hello("test").await.unwrap();
    assert_eq!(hello.protocol, 3);

    let calls = (0..20).map(|n| {
        let client = client.clone();
        async move {
            let echoed: Value = client.call("echo", json!({ "n": n })).await.unwrap();
            echoed
        }
    });
    let results = futures::future::join_all(calls).await;
    let expected: Vec<Value> = (0..20).map(|n| json!({ "n": n })).collect();
    assert_eq!(results, expected);

    let untagged = client
        .call_raw("fixed-id".into(), "untagged", Value::Null)
        .await
        .unwrap();
    assert_eq!(untagged, json!(42));
}

#[tokio::test]
async fn server_errors_carry_the_error_object() {
    let url = fake_server::start().await;
    let (client, _notifications) = Client::connect(&url, Some(TOKEN)).await.unwrap();
    let error = client
        .call::<_, Value>("nope", json!({}))
        .await
        .unwrap_err();
    assert_eq!(
        error.server_error(),
        Some(&ErrorObject::new(
            ErrorCode::UnknownMethod,
            "no such method"
        ))
    );
}

#[tokio::test]
async fn pushed_frames_become_notifications() {
    let url = fake_server::start().await;
    let (client, mut notifications) = Client::connect(&url, Some(TOKEN)).await.unwrap();
    let _: Value = client.call("push", json!({})).await.unwrap();
    let mut received = Vec::new();
    for _ in 0..3 {
        received.push(notifications.recv().await.unwrap());
    }
    let Notification::Event(event) = &received[0] else {
        panic!("expected an event first: {received:?}");
    };
    assert_eq!(event.event, Event::SessionArchived {});
    assert!(matches!(&received[1], Notification::Delta(d) if d.text == "hi"));
    assert_eq!(
        received[2],
        Notification::ProtocolError(ErrorObject::new(ErrorCode::FrameTooLarge, "too big"))
    );
}

#[tokio::test]
async fn a_timed_out_call_leaves_the_connection_usable() {
    let url = fake_server::start().await;
    let (client, _notifications) = Client::connect(&url, Some(TOKEN)).await.unwrap();
    let quick = client.with_call_timeout(Duration::from_millis(100));
    let error = quick.call::<_, Value>("slow", json!({})).await.unwrap_err();
    assert!(matches!(error, ClientError::Timeout), "{error:?}");
    let echoed: Value = client.call("echo", json!([1])).await.unwrap();
    assert_eq!(echoed, json!([1]));
}

#[tokio::test]
async fn a_disconnect_fails_waiting_calls_with_closed() {
    let url = fake_server::start().await;
    let (client, mut notifications) = Client::connect(&url, Some(TOKEN)).await.unwrap();
    let waiting = tokio::spawn({
        let client = client.clone();
        async move { client.call::<_, Value>("slow", json!({})).await }
    });
    // Make sure the slow call is registered before the server hangs up.
    let _: Value = client.call("echo", json!(null)).await.unwrap();
    let error = client
        .call::<_, Value>("hang_up", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(error, ClientError::Closed), "{error:?}");
    let error = waiting.await.unwrap().unwrap_err();
    assert!(matches!(error, ClientError::Closed), "{error:?}");
    assert!(matches!(
        notifications.recv().await,
        Some(Notification::Closed(_))
    ));
    assert!(client.is_closed());
    let error = client.call::<_, Value>("echo", json!(1)).await.unwrap_err();
    assert!(matches!(error, ClientError::Closed), "{error:?}");
}

#[tokio::test]
async fn client_close_ends_the_connection() {
    let url = fake_server::start().await;
    let (client, mut notifications) = Client::connect(&url, Some(TOKEN)).await.unwrap();
    client.close();
    assert_eq!(
        notifications.recv().await,
        Some(Notification::Closed("closed by the client".into()))
    );
    assert!(client.is_closed());
}

#[tokio::test]
async fn catch_up_pages_until_done_and_releases_held_frames() {
    let url = fake_server::start().await;
    let (client, _notifications) = Client::connect(&url, Some(TOKEN)).await.unwrap();
    let mut view = SessionView::new(1);
    // A live frame beyond the gap arrives first.
    assert_eq!(
        view.offer(event_frame(4)),
        Offer::Gap {
            after_seq: 1,
            next_seq: 4
        }
    );
    let applied = catch_up(&client, "s1", &mut view).await.unwrap();
    let seqs: Vec<u64> = applied.iter().map(|f| f.seq).collect();
    assert_eq!(seqs, (2..=JOURNAL_LEN).collect::<Vec<_>>());
    assert_eq!(view.last_seq(), JOURNAL_LEN);
    assert!(!view.has_gap());
}
