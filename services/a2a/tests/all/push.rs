//! Push-notification configs and deliveries (through the SSRF guard).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use lumina_a2a::{PushOptions, PushSender};
use lumina_tools::builtin::StaticResolver;
use serde_json::{json, Value};

use crate::support::{message, state, unique, Options, Server};

type Received = Arc<Mutex<Vec<(HeaderMap, Value)>>>;

/// A webhook receiver on loopback; returns its URL and what it got.
async fn receiver() -> (String, Received) {
    let received: Received = Arc::default();
    let sink = received.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let sink = sink.clone();
            async move {
                sink.lock()
                    .unwrap()
                    .push((headers, serde_json::from_slice(&body).unwrap()));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

#[tokio::test]
async fn configs_crud_and_deliveries_carry_the_token() {
    let server = Server::start().await;
    let (url, received) = receiver().await;
    let task = server
        .ok(
            "SendMessage",
            json!({"message": message(&unique("tck-input-required"))}),
        )
        .await["task"]
        .clone();
    let task_id = task["id"].as_str().unwrap();

    let created = server
        .ok(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task_id, "id": "cfg-1", "url": url, "token": "secret-token"}),
        )
        .await;
    assert_eq!(created["id"], "cfg-1");
    assert_eq!(created["taskId"], task_id);
    let generated = server
        .ok(
            "CreateTaskPushNotificationConfig",
            json!({"task_id": task_id, "url": "https://example.com/h"}),
        )
        .await;
    assert!(generated["id"].as_str().is_some_and(|s| !s.is_empty()));

    let got = server
        .ok(
            "GetTaskPushNotificationConfig",
            json!({"taskId": task_id, "id": "cfg-1"}),
        )
        .await;
    assert_eq!(got, created);
    let list = server
        .ok(
            "ListTaskPushNotificationConfigs",
            json!({"taskId": task_id}),
        )
        .await;
    assert_eq!(list["configs"].as_array().unwrap().len(), 2);
    server
        .ok(
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": task_id, "id": generated["id"]}),
        )
        .await;
    server
        .ok(
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": task_id, "id": generated["id"]}),
        )
        .await;
    assert_eq!(
        server
            .err(
                "GetTaskPushNotificationConfig",
                json!({"taskId": task_id, "id": generated["id"]})
            )
            .await,
        -32001
    );
    assert_eq!(
        server
            .err(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": "unknown", "url": url})
            )
            .await,
        -32001
    );

    // Continue the task: its events reach the webhook.
    let next = json!({"message": {"messageId": unique("tck-complete-task"), "role": "ROLE_USER", "parts": [{"text": "go"}], "taskId": task_id}});
    let done = server.ok("SendMessage", next).await;
    assert_eq!(state(&done["task"]), "TASK_STATE_COMPLETED");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = received.lock().unwrap().clone();
        if let Some((headers, body)) = got.iter().find(|(_, b)| b.get("statusUpdate").is_some()) {
            assert_eq!(headers["x-a2a-notification-token"], "secret-token");
            assert_eq!(headers["content-type"], "application/a2a+json");
            assert_eq!(body["statusUpdate"]["taskId"], task_id);
            assert_eq!(state(&body["statusUpdate"]), "TASK_STATE_COMPLETED");
            break;
        }
        assert!(Instant::now() < deadline, "no delivery: {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn webhooks_outside_the_public_internet_are_refused() {
    let server = Server::with(Options {
        push: Some(PushOptions::default()),
        ..Options::default()
    })
    .await;
    let task = server
        .ok(
            "SendMessage",
            json!({"message": message(&unique("tck-input-required"))}),
        )
        .await["task"]
        .clone();
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "https://10.1.2.3/hook",
        "https://169.254.169.254/latest",
        "https://[::1]/x",
        "http://example.com/plain-http",
        "ftp://example.com/x",
        "not a url",
    ] {
        let code = server
            .err(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": task["id"], "url": url}),
            )
            .await;
        assert_eq!(code, -32602, "{url} was accepted");
    }
    server
        .ok(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task["id"], "url": "https://example.com/hook"}),
        )
        .await;
}

#[tokio::test]
async fn delivery_resolves_and_checks_every_address() {
    let resolver = StaticResolver::new()
        .with(
            "internal.example",
            &[IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))],
        )
        .with(
            "mixed.example",
            &[
                IpAddr::V4(Ipv4Addr::new(93, 184, 216, 34)),
                IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            ],
        )
        .with(
            "public.example",
            &[IpAddr::V4(Ipv4Addr::new(93, 184, 216, 34))],
        );
    let sender = PushSender::with_resolver(PushOptions::default(), Arc::new(resolver));
    assert!(sender
        .vet("https://internal.example/h")
        .await
        .unwrap_err()
        .to_string()
        .contains("private"));
    assert!(sender
        .vet("https://mixed.example/h")
        .await
        .unwrap_err()
        .to_string()
        .contains("loopback"));
    assert!(sender.vet("https://unknown.example/h").await.is_err());
    let (_, addrs) = sender.vet("https://public.example/h").await.unwrap();
    assert_eq!(addrs.len(), 1);
    assert_eq!(addrs[0].port(), 443);
}

#[tokio::test]
async fn without_push_every_config_method_is_not_supported() {
    let server = Server::with(Options {
        push: None,
        ..Options::default()
    })
    .await;
    let task = server
        .ok(
            "SendMessage",
            json!({"message": message(&unique("tck-input-required"))}),
        )
        .await["task"]
        .clone();
    let id = &task["id"];
    assert_eq!(
        server
            .err(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": id, "url": "https://example.com/h"})
            )
            .await,
        -32003
    );
    assert_eq!(
        server
            .err(
                "GetTaskPushNotificationConfig",
                json!({"taskId": id, "id": "x"})
            )
            .await,
        -32003
    );
    assert_eq!(
        server
            .err("ListTaskPushNotificationConfigs", json!({"taskId": id}))
            .await,
        -32003
    );
    assert_eq!(
        server
            .err(
                "DeleteTaskPushNotificationConfig",
                json!({"taskId": id, "id": "x"})
            )
            .await,
        -32003
    );
}
