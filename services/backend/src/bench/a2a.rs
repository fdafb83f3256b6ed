//! `lumina-backend bench a2a`: the A2A JSON-RPC endpoint as a remote agent's client sees it,
//! over real HTTP against an in-process local backend and a model server given by URL (the
//! scripted model server, `lumina-scripted-model`, for a figure without model time).
//!
//! - `SendStreamingMessage` sent → the first SSE event (the Task), → the first
//!   `statusUpdate` (the run working), → the terminal `statusUpdate`; one message after
//!   another, each a new context (a new session), as a delegating agent sends them;
//! - `GetTask` throughput: `concurrency` clients reading the tasks just created (with
//!   `historyLength`) as fast as they answer, `gets` requests in all.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use futures::StreamExt;
use lumina_sse::SseDecoder;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{json, Value};

use super::{bearer_client, ok, percentiles, Served};

/// What to measure.
pub struct A2aBench {
    /// The model endpoint (Anthropic format).
    pub model_url: String,
    /// Streamed messages for the first-event figures.
    pub messages: usize,
    /// `GetTask` requests in all.
    pub gets: usize,
    /// Concurrent `GetTask` clients.
    pub concurrency: usize,
    /// `historyLength` of each `GetTask`.
    pub history_length: u32,
}

pub async fn run(bench: A2aBench) -> anyhow::Result<Value> {
    ensure!(bench.messages >= 1, "--messages must be at least 1");
    ensure!(bench.concurrency >= 1, "--concurrency must be at least 1");
    let served = Served::start(Some(&bench.model_url)).await?;
    let rpc = Rpc::new(format!("http://{}/a2a", served.addr), &served.token)?;
    let outcome = measure(rpc, &bench).await;
    served.stop().await;
    outcome
}

async fn measure(rpc: Rpc, bench: &A2aBench) -> anyhow::Result<Value> {
    let mut first_event = Vec::with_capacity(bench.messages);
    let mut first_status = Vec::with_capacity(bench.messages);
    let mut terminal = Vec::with_capacity(bench.messages);
    let mut tasks = Vec::with_capacity(bench.messages);
    for i in 0..bench.messages {
        let stream = rpc
            .send_streaming(&format!("bench-{i}"), &format!("delegated task {i}"))
            .await
            .with_context(|| format!("message {i} of {}", bench.messages))?;
        first_event.push(stream.first_event);
        first_status.push(stream.first_status);
        terminal.push(stream.terminal);
        tasks.push(stream.task_id);
    }

    let rpc = Arc::new(rpc);
    let tasks = Arc::new(tasks);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::with_capacity(bench.concurrency);
    for _ in 0..bench.concurrency {
        let (rpc, tasks, next) = (rpc.clone(), tasks.clone(), next.clone());
        let (gets, history_length) = (bench.gets, bench.history_length);
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= gets {
                    return Ok::<_, anyhow::Error>(latencies);
                }
                let id = &tasks[n % tasks.len()];
                let t0 = Instant::now();
                rpc.get_task(id, history_length).await?;
                latencies.push(t0.elapsed());
            }
        }));
    }
    let mut get_latencies = Vec::with_capacity(bench.gets);
    for worker in workers {
        get_latencies.extend(worker.await??);
    }
    let elapsed = started.elapsed();

    Ok(json!({
        "send_streaming_message": {
            "messages": bench.messages,
            "first_event_ms": percentiles(&mut first_event),
            "first_status_update_ms": percentiles(&mut first_status),
            "terminal_ms": percentiles(&mut terminal),
        },
        "get_task": {
            "requests": get_latencies.len(),
            "concurrency": bench.concurrency,
            "history_length": bench.history_length,
            "per_second": get_latencies.len() as f64 / elapsed.as_secs_f64(),
            "latency_ms": percentiles(&mut get_latencies),
        },
    }))
}

/// One streamed message as the client saw it, from the moment the request was sent.
struct StreamedTask {
    task_id: String,
    first_event: Duration,
    first_status: Duration,
    terminal: Duration,
}

/// A JSON-RPC client of the A2A endpoint with the backend's token.
struct Rpc {
    url: String,
    http: reqwest::Client,
}

impl Rpc {
    fn new(url: String, token: &str) -> anyhow::Result<Rpc> {
        let mut headers = HeaderMap::new();
        headers.insert("A2A-Version", HeaderValue::from_static("1.0"));
        let http = bearer_client(token, headers)?;
        Ok(Rpc { url, http })
    }

    async fn send_streaming(&self, message_id: &str, text: &str) -> anyhow::Result<StreamedTask> {
        let t0 = Instant::now();
        let response = self
            .http
            .post(&self.url)
            .json(&json!({
                "jsonrpc": "2.0",
                "id": message_id,
                "method": "SendStreamingMessage",
                "params": {"message": {
                    "messageId": message_id,
                    "role": "ROLE_USER",
                    "parts": [{"text": text}],
                }},
            }))
            .send()
            .await?;
        let response = ok(response).await?;
        let mut task_id = None;
        let mut first_event = None;
        let mut first_status = None;
        let mut decoder = SseDecoder::new();
        let mut body = response.bytes_stream();
        while let Some(bytes) = body.next().await {
            for event in decoder.push(&bytes?) {
                if event.data.is_empty() {
                    continue;
                }
                let reply: Value = serde_json::from_str(&event.data)
                    .with_context(|| format!("not JSON-RPC: {}", event.data))?;
                if let Some(error) = reply.get("error") {
                    bail!("the stream carried an error: {error}");
                }
                let result = &reply["result"];
                first_event.get_or_insert(t0.elapsed());
                if let Some(id) = result["task"]["id"].as_str() {
                    task_id.get_or_insert_with(|| id.to_string());
                }
                let Some(state) = result["statusUpdate"]["status"]["state"].as_str() else {
                    continue;
                };
                first_status.get_or_insert(t0.elapsed());
                if state == "TASK_STATE_COMPLETED" {
                    return Ok(StreamedTask {
                        task_id: task_id.context("the stream did not start with the Task")?,
                        first_event: first_event.unwrap_or_default(),
                        first_status: first_status.unwrap_or_default(),
                        terminal: t0.elapsed(),
                    });
                }
                if matches!(
                    state,
                    "TASK_STATE_FAILED" | "TASK_STATE_CANCELED" | "TASK_STATE_REJECTED"
                ) {
                    bail!("the task ended {state}");
                }
            }
        }
        bail!("the stream ended before the task completed")
    }

    async fn get_task(&self, id: &str, history_length: u32) -> anyhow::Result<()> {
        let response = self
            .http
            .post(&self.url)
            .json(&json!({
                "jsonrpc": "2.0",
                "id": 1,
                "method": "GetTask",
                "params": {"id": id, "historyLength": history_length},
            }))
            .send()
            .await?;
        let reply: Value = ok(response).await?.json().await?;
        ensure!(reply["result"]["id"] == id, "GetTask {id} answered {reply}");
        Ok(())
    }
}
