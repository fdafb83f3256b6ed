//! Streams RPC between instances.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lumina_cluster::{
    recover_dead_instance, ClusterError, HandlerError, Redis, RpcClient, RpcHandler, RpcOptions,
    RpcRequest, RpcServer,
};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::support::{eventually_ok, raw_cmd, start};

const LONG: Duration = Duration::from_secs(10);

struct Serving {
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl Serving {
    /// Stops gracefully.
    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
    }

    /// Stops like a crash: running handlers are dropped, nothing is acknowledged.
    async fn crash(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

async fn serve<H: RpcHandler>(redis: &Redis, id: &str, handler: H, options: RpcOptions) -> Serving {
    let server = RpcServer::bind(redis.clone(), id, handler, options)
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(server.run(shutdown.clone()));
    Serving { shutdown, task }
}

async fn echo(request: RpcRequest) -> Result<Value, HandlerError> {
    Ok(json!({
        "method": request.method,
        "payload": request.payload,
        "from": request.from_instance,
        "trace": request.trace,
    }))
}

type Seen = Arc<std::sync::Mutex<Vec<String>>>;

/// A handler answering "done" that records the methods it was called with.
fn recording() -> (
    Seen,
    impl Fn(RpcRequest) -> std::future::Ready<Result<Value, HandlerError>> + Send + Sync + 'static,
) {
    let seen = Seen::default();
    let handler = {
        let seen = seen.clone();
        move |request: RpcRequest| {
            seen.lock().unwrap().push(request.method.clone());
            std::future::ready(Ok(json!("done")))
        }
    };
    (seen, handler)
}

fn client(redis: &Redis, id: &str) -> RpcClient {
    RpcClient::start(redis.clone(), id, RpcOptions::default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_round_trips_with_its_trace_context() {
    let (_server, redis) = start().await;
    let serving = serve(&redis, "b", echo, RpcOptions::default()).await;
    let a = client(&redis, "a");

    let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let reply = a
        .call_traced(
            "b",
            "session.submit",
            json!({"text": "hi"}),
            LONG,
            Some(trace),
        )
        .await
        .unwrap();
    assert_eq!(
        reply,
        json!({"method": "session.submit", "payload": {"text": "hi"}, "from": "a", "trace": trace})
    );
    let plain = a.call("b", "m", json!(null), LONG).await.unwrap();
    assert_eq!(plain["trace"], Value::Null);
    serving.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_from_two_instances_get_their_own_replies() {
    let (_server, redis) = start().await;
    // Replies come back out of order.
    let handler = |request: RpcRequest| async move {
        let n = request.payload["n"].as_u64().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis((n * 7) % 23)).await;
        Ok(json!({"n": n, "from": request.from_instance}))
    };
    let serving = serve(&redis, "server", handler, RpcOptions::default()).await;
    let a = client(&redis, "a");
    let b = client(&redis, "b");

    let calls = (0..200u64).map(|n| {
        let (client, name) = if n % 2 == 0 {
            (a.clone(), "a")
        } else {
            (b.clone(), "b")
        };
        async move {
            let reply = client
                .call("server", "m", json!({"n": n}), LONG)
                .await
                .unwrap();
            (reply, json!({"n": n, "from": name}))
        }
    });
    for (got, want) in futures::future::join_all(calls).await {
        assert_eq!(got, want);
    }
    serving.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_after_idle_periods_longer_than_the_redis_crate_default_timeout_succeed() {
    // With the redis crate's default 500 ms response timeout, a blocking read abandoned by
    // the client keeps blocking in Redis and swallows the next request (SYSTEM.md §12).
    let (_server, redis) = start().await;
    let serving = serve(&redis, "b", echo, RpcOptions::default()).await;
    let a = client(&redis, "a");
    for n in 0..6u64 {
        tokio::time::sleep(Duration::from_millis(650 + 90 * n)).await;
        let reply = a
            .call("b", "m", json!(n), Duration::from_millis(1500))
            .await;
        assert_eq!(reply.map(|r| r["payload"].clone()), Ok(json!(n)));
    }
    serving.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_errors_reach_the_caller() {
    let (_server, redis) = start().await;
    let serving = serve(
        &redis,
        "b",
        |_: RpcRequest| async { Err::<Value, _>(HandlerError::from("no such session")) },
        RpcOptions::default(),
    )
    .await;
    let a = client(&redis, "a");
    assert_eq!(
        a.call("b", "m", json!({}), LONG).await,
        Err(ClusterError::Remote("no such session".to_owned()))
    );
    serving.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_run_concurrently_up_to_the_limit() {
    let (_server, redis) = start().await;
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (running, peak) = (running.clone(), peak.clone());
        move |_: RpcRequest| {
            let (running, peak) = (running.clone(), peak.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(json!(null))
            }
        }
    };
    let options = RpcOptions {
        max_concurrency: 4,
        ..RpcOptions::default()
    };
    let serving = serve(&redis, "b", handler, options).await;
    let a = client(&redis, "a");
    let started = Instant::now();
    let calls = (0..20).map(|_| a.call("b", "m", json!(null), LONG));
    for reply in futures::future::join_all(calls).await {
        reply.unwrap();
    }
    assert_eq!(peak.load(Ordering::SeqCst), 4);
    // 20 calls of 50 ms, 4 at a time: at least 5 rounds.
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    serving.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_time_out_when_the_target_is_not_serving() {
    let (_server, redis) = start().await;
    let serving = serve(&redis, "b", echo, RpcOptions::default()).await;
    serving.crash().await;
    let a = client(&redis, "a");

    let started = Instant::now();
    let result = a
        .call("b", "m", json!(null), Duration::from_millis(300))
        .await;
    assert_eq!(result, Err(ClusterError::Timeout));
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_an_instance_without_a_stream_fail_fast() {
    let (_server, redis) = start().await;
    let a = client(&redis, "a");
    let started = Instant::now();
    let result = a.call("never-started", "m", json!(null), LONG).await;
    assert!(
        matches!(result, Err(ClusterError::Unavailable(_))),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );

    // A graceful shutdown removes the stream: callers fail fast too.
    let serving = serve(&redis, "b", echo, RpcOptions::default()).await;
    a.call("b", "m", json!(null), LONG).await.unwrap();
    serving.stop().await;
    let result = a.call("b", "m", json!(null), LONG).await;
    assert!(
        matches!(result, Err(ClusterError::Unavailable(_))),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_their_deadline_are_skipped() {
    let (_server, redis) = start().await;
    let serving = serve(&redis, "b", echo, RpcOptions::default()).await;
    serving.crash().await;
    let a = client(&redis, "a");
    assert_eq!(
        a.call("b", "late", json!(null), Duration::from_millis(100))
            .await,
        Err(ClusterError::Timeout)
    );

    let (seen, handler) = recording();
    let serving = serve(&redis, "b", handler, RpcOptions::default()).await;
    assert_eq!(
        a.call("b", "fresh", json!(null), LONG).await.unwrap(),
        json!("done")
    );
    assert_eq!(*seen.lock().unwrap(), vec!["fresh".to_owned()]);
    // The skipped request was acknowledged and removed, not left pending.
    let len: u64 = raw_cmd(&_server, redis::cmd("XLEN").arg("lumina:test:rpc:b")).await;
    assert_eq!(len, 0);
    serving.stop().await;
}

/// Adds a request as a caller would: `timeout` (this release) and a wall-clock `deadline`
/// (all a caller of the previous release sends; a skewed caller's is off by its skew).
async fn add_raw(
    server: &lumina_testkit::redis::RedisServer,
    method: &str,
    timeout_ms: Option<u64>,
    deadline_ms: u64,
) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let mut xadd = redis::cmd("XADD");
    xadd.arg("lumina:test:rpc:b")
        .arg("*")
        .arg("id")
        .arg(&id)
        .arg("from")
        .arg("a")
        .arg("method")
        .arg(method)
        .arg("payload")
        .arg("null")
        .arg("deadline")
        .arg(deadline_ms);
    if let Some(timeout_ms) = timeout_ms {
        xadd.arg("timeout").arg(timeout_ms);
    }
    let _: String = raw_cmd(server, &xadd).await;
    id
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_follow_the_redis_clock_whatever_the_callers_wall_clock_says() {
    let (server, redis) = start().await;
    let (seen, handler) = recording();
    let bound = RpcServer::bind(redis.clone(), "b", handler, RpcOptions::default())
        .await
        .unwrap();
    // A caller whose clock is an hour behind: its wall-clock deadline passed long ago.
    let behind = add_raw(&server, "behind", Some(10_000), wall_ms() - 3_600_000).await;
    // A caller whose clock is an hour ahead, with 100 ms to wait: the request waits longer.
    add_raw(&server, "ahead", Some(100), wall_ms() + 3_600_000).await;
    // A caller of the previous release: only a (correct) wall-clock deadline.
    let previous = add_raw(&server, "previous-release", None, wall_ms() + 10_000).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let shutdown = CancellationToken::new();
    let task = tokio::spawn(bound.run(shutdown.clone()));
    super::support::eventually(LONG, "requests handled or dropped", || async {
        let len: u64 = raw_cmd(&server, redis::cmd("XLEN").arg("lumina:test:rpc:b")).await;
        len == 0
    })
    .await;
    let mut handled = seen.lock().unwrap().clone();
    handled.sort();
    assert_eq!(
        handled,
        vec!["behind".to_owned(), "previous-release".to_owned()]
    );

    let replies: Vec<(String, std::collections::HashMap<String, String>)> = raw_cmd(
        &server,
        redis::cmd("XRANGE")
            .arg("lumina:test:reply:a")
            .arg("-")
            .arg("+"),
    )
    .await;
    let mut answered: Vec<String> = replies.into_iter().map(|(_, f)| f["id"].clone()).collect();
    answered.sort();
    let mut expected = vec![behind, previous];
    expected.sort();
    assert_eq!(answered, expected);
    shutdown.cancel();
    task.await.unwrap();
}

async fn pending_count(server: &lumina_testkit::redis::RedisServer) -> u64 {
    let summary: (u64, redis::Value, redis::Value, redis::Value) = raw_cmd(
        server,
        redis::cmd("XPENDING")
            .arg("lumina:test:rpc:b")
            .arg("lumina-rpc"),
    )
    .await;
    summary.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_serves_what_its_crashed_predecessor_read_but_did_not_ack() {
    let (server, redis) = start().await;
    let options = RpcOptions {
        claim_min_idle_ms: 200,
        claim_interval_ms: 100,
        ..RpcOptions::default()
    };
    // The first incarnation reads the request and hangs in its handler.
    let reads = Arc::new(AtomicUsize::new(0));
    let hanging = {
        let reads = reads.clone();
        move |_: RpcRequest| {
            reads.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<Value, HandlerError>>()
        }
    };
    let first = serve(&redis, "b", hanging, options.clone()).await;
    let a = client(&redis, "a");
    let call = tokio::spawn({
        let a = a.clone();
        async move { a.call("b", "m", json!({"x": 1}), LONG).await }
    });
    super::support::eventually(Duration::from_secs(2), "request read", || async {
        reads.load(Ordering::SeqCst) == 1
    })
    .await;
    first.crash().await;
    assert_eq!(pending_count(&server).await, 1);

    let second = serve(&redis, "b", echo, options).await;
    let reply = call.await.unwrap().unwrap();
    assert_eq!(reply["payload"], json!({"x": 1}));
    assert_eq!(pending_count(&server).await, 0);
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovering_a_dead_instance_makes_callers_fail_fast() {
    let (_server, redis) = start().await;
    let serving = serve(&redis, "dead", echo, RpcOptions::default()).await;
    serving.crash().await;
    let a = client(&redis, "a");
    assert_eq!(
        a.call("dead", "m", json!(null), Duration::from_millis(100))
            .await,
        Err(ClusterError::Timeout)
    );

    assert_eq!(recover_dead_instance(&redis, "dead").await.unwrap(), 1);
    let started = Instant::now();
    let result = a.call("dead", "m", json!(null), LONG).await;
    assert!(
        matches!(result, Err(ClusterError::Unavailable(_))),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_recovers_by_itself_after_a_redis_restart() {
    let (mut server, redis) = start().await;
    let serving = serve(&redis, "b", echo, RpcOptions::default()).await;
    let a = client(&redis, "a");
    a.call("b", "m", json!(1), LONG).await.unwrap();

    server.stop();
    let started = Instant::now();
    let result = a.call("b", "m", json!(2), Duration::from_secs(3)).await;
    assert!(
        matches!(
            result,
            Err(ClusterError::Unavailable(_) | ClusterError::Timeout)
        ),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(3500));

    // Back, empty: the stream and group are gone; the same server and client objects must
    // recreate what they need (NOGROUP) and serve again.
    server.restart().unwrap();
    let reply = eventually_ok(|| a.call("b", "m", json!(3), Duration::from_millis(500))).await;
    assert_eq!(reply["payload"], json!(3));
    for n in 4..10 {
        let reply = a.call("b", "m", json!(n), LONG).await.unwrap();
        assert_eq!(reply["payload"], json!(n));
    }
    serving.stop().await;
}

/// Not a test: prints the round-trip latency (`cargo test -p lumina-cluster --release --
/// --ignored --nocapture rpc_latency`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn rpc_latency() {
    let (_server, redis) = start().await;
    let serving = serve(
        &redis,
        "b",
        |_: RpcRequest| async { Ok(json!({"ok": true})) },
        RpcOptions::default(),
    )
    .await;
    let a = client(&redis, "a");
    for _ in 0..200 {
        a.call("b", "warmup", json!(null), LONG).await.unwrap();
    }
    let mut samples = Vec::with_capacity(2000);
    for n in 0..2000 {
        let started = std::time::Instant::now();
        a.call("b", "ping", json!({"n": n}), LONG).await.unwrap();
        samples.push(started.elapsed());
    }
    samples.sort();
    let pct = |p: usize| samples[(samples.len() * p / 100).min(samples.len() - 1)];
    println!(
        "rpc round trip over {} calls: p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
        samples.len(),
        pct(50),
        pct(90),
        pct(99),
        samples[samples.len() - 1]
    );
    serving.stop().await;
}
