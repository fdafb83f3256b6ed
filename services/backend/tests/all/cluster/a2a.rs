//! A2A in the cluster profile (docs/a2a.md#the-cluster): every instance serves `/a2a` with
//! the WebSocket's JWT rules over the tasks in the shared PostgreSQL; a message sent to
//! one instance runs on the session's owner; any instance reads, follows and cancels the
//! task; another tenant sees nothing; the task reads right after its owner is killed; a
//! signed peer call replayed to another instance is refused (the nonce memory is Redis).

use std::time::{Duration, Instant};

use lumina_protocol::methods::SessionCreateParams;
use lumina_testkit::Turn;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::support::*;

fn base(cluster: &Cluster, i: usize) -> String {
    format!("http://127.0.0.1:{}", cluster.instances[i].port)
}

fn request(base: &str, auth: Auth<'_>, method: &str, params: Value) -> reqwest::RequestBuilder {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/a2a"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    match auth {
        Auth::Bearer(token) => request = request.bearer_auth(token),
        Auth::Signed(headers) => {
            for (name, value) in headers {
                request = request.header(*name, value);
            }
        }
    }
    request
}

#[derive(Clone, Copy)]
enum Auth<'a> {
    Bearer(&'a str),
    Signed(&'a [(&'static str, String)]),
}

async fn rpc(base: &str, auth: Auth<'_>, method: &str, params: Value) -> (u16, Value) {
    let response = request(base, auth, method, params).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The `result`s of a streaming answer, read to its end.
async fn stream(base: &str, token: &str, method: &str, params: Value) -> Vec<Value> {
    let response = tokio::time::timeout(
        Duration::from_secs(30),
        request(base, Auth::Bearer(token), method, params).send(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let body = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("the stream ends with the task")
        .unwrap();
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str::<Value>(d.trim()).unwrap()["result"].clone())
        .collect()
}

fn message(id: &str, text: &str, context: Option<&str>) -> Value {
    let mut m = json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(context) = context {
        m["contextId"] = json!(context);
    }
    m
}

/// GetTask through instance `i` until the task is `state`.
async fn until_state(cluster: &Cluster, i: usize, token: &str, task: &Value, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, got) = rpc(
            &base(cluster, i),
            Auth::Bearer(token),
            "GetTask",
            json!({"id": task}),
        )
        .await;
        if got["result"]["status"]["state"] == state {
            return got["result"].clone();
        }
        assert!(Instant::now() < deadline, "never {state}: {got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn last_state(events: &[Value]) -> &Value {
    &events.last().unwrap()["statusUpdate"]["status"]["state"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_instance_answers_for_a_task_the_owner_runs() {
    let keys = lumina_peer::generate_ed25519().unwrap();
    let untenanted = lumina_peer::generate_ed25519().unwrap();
    // The cluster's node name is the audience every signed call to it names.
    let peer = json!({"node": "the-cluster", "nodes": {
        "caller": {"ed25519_public_key": keys.public_key, "tenant": TENANT},
        "stranger": {"ed25519_public_key": untenanted.public_key},
    }});
    let cluster = Cluster::start_with_env(
        2,
        vec![
            Turn::text("the first answer").matching("q1first"),
            Turn::text("a streamed answer through the other instance")
                .with_chunk_delay_ms(150)
                .matching("q2follow"),
            Turn::text("streamed through B").matching("q3stream"),
            Turn::text("this never ends")
                .stall_after(1)
                .matching("q4endless"),
        ],
        vec![("LUMINA_PEER".into(), peer.to_string())],
    )
    .await;
    let token = cluster.user_token();
    let (a, b) = (base(&cluster, 0), base(&cluster, 1));

    // The card is public on every instance; JSON-RPC needs a JWT.
    let (status, card) = http_get(cluster.instances[1].port, "/.well-known/agent-card.json")
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert!(card.contains("\"agent-run\""), "{card}");
    let (status, _) = rpc(&a, Auth::Bearer("not-a-jwt"), "ListTasks", json!({})).await;
    assert_eq!(status, 401);

    // The session lives on instance 1; a message sent to instance 0 runs there.
    let (owner, _n) = cluster.client(1, &token).await;
    let session = owner
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: None,
        })
        .await
        .unwrap()
        .id;
    assert_eq!(owner.session_info(&session).await.unwrap().owner, "i1");
    let (_, sent) = rpc(
        &a,
        Auth::Bearer(&token),
        "SendMessage",
        json!({"message": message("m1", "q1first", Some(&session))}),
    )
    .await;
    let task = sent["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(task["contextId"], session.as_str());
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "the first answer");
    let run_id = task["metadata"]["lumina"]["runId"]
        .as_str()
        .unwrap()
        .to_owned();
    let journal = owner.session_events(&session, 0, Some(1000)).await.unwrap();
    assert!(journal
        .events
        .iter()
        .any(|e| matches!(&e.event, lumina_protocol::Event::RunCompleted { run_id: r, .. } if *r == run_id)));
    assert_eq!(owner.session_info(&session).await.unwrap().owner, "i1");

    // Instance 1 reads it.
    let (_, got) = rpc(
        &b,
        Auth::Bearer(&token),
        "GetTask",
        json!({"id": task["id"]}),
    )
    .await;
    assert_eq!(got["result"], task);
    let (_, list) = rpc(&b, Auth::Bearer(&token), "ListTasks", json!({})).await;
    assert_eq!(list["result"]["totalSize"], 1, "{list}");
    assert_eq!(list["result"]["tasks"][0]["id"], task["id"]);

    // Another tenant, or another user of the tenant, sees nothing: the task is unknown.
    let eve = cluster.token(
        "eve",
        "t2",
        &["lumina:session:read", "lumina:session:write"],
    );
    let bob = cluster.token(
        "bob",
        TENANT,
        &["lumina:session:read", "lumina:session:write"],
    );
    for other in [&eve, &bob] {
        let (_, got) = rpc(
            &b,
            Auth::Bearer(other),
            "GetTask",
            json!({"id": task["id"]}),
        )
        .await;
        assert_eq!(got["error"]["code"], -32001, "{got}");
        let (_, list) = rpc(&b, Auth::Bearer(other), "ListTasks", json!({})).await;
        assert_eq!(list["result"]["totalSize"], 0, "{list}");
        let (_, cancel) = rpc(
            &a,
            Auth::Bearer(other),
            "CancelTask",
            json!({"id": task["id"]}),
        )
        .await;
        assert_eq!(cancel["error"]["code"], -32001, "{cancel}");
    }
    // Scopes: a read-only token reads but may not send.
    let reader = cluster.token("alice", TENANT, &["lumina:session:read"]);
    let (status, _) = rpc(
        &b,
        Auth::Bearer(&reader),
        "GetTask",
        json!({"id": task["id"]}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = rpc(
        &b,
        Auth::Bearer(&reader),
        "SendMessage",
        json!({"message": message("m0", "q1first", None)}),
    )
    .await;
    assert_eq!(status, 403);

    // Sent to instance 0, followed through instance 1 until it completes.
    let (_, sent) = rpc(
        &a,
        Auth::Bearer(&token),
        "SendMessage",
        json!({"message": message("m2", "q2follow", Some(&session)), "configuration": {"returnImmediately": true}}),
    )
    .await;
    let followed = sent["result"]["task"]["id"].clone();
    let events = stream(&b, &token, "SubscribeToTask", json!({"id": followed})).await;
    assert_eq!(events[0]["task"]["id"], followed, "{events:?}");
    assert_eq!(last_state(&events), "TASK_STATE_COMPLETED", "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"]
                == "a streamed answer through the other instance"),
        "{events:?}"
    );
    let done = until_state(&cluster, 0, &token, &followed, "TASK_STATE_COMPLETED").await;
    // Applied once, though two instances followed the journal.
    assert_eq!(done["artifacts"].as_array().unwrap().len(), 1, "{done}");
    let history = done["history"].as_array().unwrap();
    let agent = history.iter().filter(|m| m["role"] == "ROLE_AGENT").count();
    assert_eq!(agent, 1, "{done}");

    // Streaming through instance 1.
    let events = stream(
        &b,
        &token,
        "SendStreamingMessage",
        json!({"message": message("m3", "q3stream", Some(&session))}),
    )
    .await;
    assert!(events[0].get("task").is_some(), "{events:?}");
    assert_eq!(last_state(&events), "TASK_STATE_COMPLETED", "{events:?}");

    // Sent to instance 0, canceled through instance 1: the run on the owner is interrupted.
    let (_, sent) = rpc(
        &a,
        Auth::Bearer(&token),
        "SendMessage",
        json!({"message": message("m4", "q4endless", Some(&session)), "configuration": {"returnImmediately": true}}),
    )
    .await;
    let endless = sent["result"]["task"]["id"].clone();
    until_state(&cluster, 1, &token, &endless, "TASK_STATE_WORKING").await;
    let (_, canceled) = rpc(
        &b,
        Auth::Bearer(&token),
        "CancelTask",
        json!({"id": endless}),
    )
    .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let run = until_state(&cluster, 0, &token, &endless, "TASK_STATE_CANCELED").await["metadata"]
        ["lumina"]["runId"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let journal = owner.session_events(&session, 0, Some(1000)).await.unwrap();
        if journal.events.iter().any(|e| {
            matches!(&e.event, lumina_protocol::Event::RunInterrupted { run_id, .. } if *run_id == run)
        }) {
            break;
        }
        assert!(Instant::now() < deadline, "the run was not interrupted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A signed peer call is accepted once: replayed to the other instance, it is refused.
    let signer = lumina_peer::Signer::from_settings(&lumina_config::PeerSettings {
        node: Some("caller".into()),
        ed25519_private_key: Some(lumina_config::Secret::new(keys.private_seed.expose())),
        ..Default::default()
    })
    .unwrap()
    .unwrap();
    let signed = signer
        .sign(lumina_peer::SCOPE_READ, "the-cluster")
        .unwrap()
        .headers()
        .to_vec();
    let (status, list) = rpc(&a, Auth::Signed(&signed), "ListTasks", json!({})).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(
        list["result"]["totalSize"], 0,
        "the peer sees only its own tasks"
    );
    let (status, _) = rpc(&b, Auth::Signed(&signed), "ListTasks", json!({})).await;
    assert_eq!(status, 401, "replayed to the other instance");
    let (status, _) = rpc(&a, Auth::Signed(&signed), "ListTasks", json!({})).await;
    assert_eq!(status, 401, "replayed to the same instance");
    let fresh = signer
        .sign(lumina_peer::SCOPE_READ, "the-cluster")
        .unwrap()
        .headers()
        .to_vec();
    let (status, body) = rpc(&b, Auth::Signed(&fresh), "ListTasks", json!({})).await;
    assert_eq!(status, 200, "{body}");
    // A node the cluster gives no tenant is refused, even with a good signature.
    let stranger = lumina_peer::Signer::from_settings(&lumina_config::PeerSettings {
        node: Some("stranger".into()),
        ed25519_private_key: Some(lumina_config::Secret::new(untenanted.private_seed.expose())),
        ..Default::default()
    })
    .unwrap()
    .unwrap();
    let signed = stranger
        .sign(lumina_peer::SCOPE_READ, "the-cluster")
        .unwrap()
        .headers()
        .to_vec();
    let (status, _) = rpc(&a, Auth::Signed(&signed), "ListTasks", json!({})).await;
    assert_eq!(status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_reads_right_after_its_owner_is_killed() {
    let mut cluster = Cluster::start(
        2,
        vec![
            Turn::text("this never ends")
                .stall_after(1)
                .matching("q4endless"),
            Turn::text("continued on the survivor").matching("q5again"),
        ],
    )
    .await;
    let token = cluster.user_token();
    let (a, b) = (base(&cluster, 0), base(&cluster, 1));
    // Instance 1 creates the session (it owns it) and executes the task.
    let (_, sent) = rpc(
        &b,
        Auth::Bearer(&token),
        "SendMessage",
        json!({"message": message("m1", "q4endless", None), "configuration": {"returnImmediately": true}}),
    )
    .await;
    let task = sent["result"]["task"].clone();
    let session = task["contextId"].as_str().unwrap().to_owned();
    until_state(&cluster, 0, &token, &task["id"], "TASK_STATE_WORKING").await;
    let (client, _n) = cluster.client(0, &token).await;
    assert_eq!(client.session_info(&session).await.unwrap().owner, "i1");

    // Mid-task: the owner is waiting for the model.
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.model.request_count() == 0 {
        assert!(Instant::now() < deadline, "the model was never asked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let killed = Instant::now();
    cluster.kill9(1);
    // The survivor takes the session over and journals the interruption (crash recovery):
    // the task reads input-required, marked as interrupted by a restart — a message on it
    // would continue it (docs/a2a.md).
    let read = until_state(
        &cluster,
        0,
        &token,
        &task["id"],
        "TASK_STATE_INPUT_REQUIRED",
    )
    .await;
    eprintln!(
        "the task read input-required {:?} after kill -9",
        killed.elapsed()
    );
    assert_eq!(read["id"], task["id"]);
    assert_eq!(
        read["status"]["message"]["metadata"]["interrupted"], "restart",
        "{read}"
    );
    assert_eq!(client.session_info(&session).await.unwrap().owner, "i0");

    // The context goes on through the survivor.
    let (_, next) = rpc(
        &a,
        Auth::Bearer(&token),
        "SendMessage",
        json!({"message": message("m2", "q5again", Some(&session))}),
    )
    .await;
    assert_eq!(
        next["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{next}"
    );
    let (_, list) = rpc(&a, Auth::Bearer(&token), "ListTasks", json!({})).await;
    assert_eq!(list["result"]["totalSize"], 2, "{list}");
}
