//! `lumina-backend bench conversation`: the Conversation API as a web client sees it, over
//! real HTTP against an in-process local backend and a model server given by URL (the
//! scripted model server, `lumina-scripted-model`, for a figure without model time).
//!
//! - first-chunk latency: `POST /api/v1/agents/default/execute/stream` sent → the first
//!   `{"chunk": …}` event read by the client (and → `done`), one turn after another in one
//!   conversation;
//! - `/messages` page latency in a conversation of `messages` messages, built through
//!   `execute/sync` (every message a real run's, journaled as in the product), paged oldest
//!   first with the API's cursor.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use futures::StreamExt;
use lumina_sse::SseDecoder;
use reqwest::header::HeaderMap;
use serde_json::{json, Value};

use super::{bearer_client, ok, percentiles, Served};
use crate::conversation::types::{Conversation, ExecuteResult, MessagePage, StreamEventData};

/// What to measure.
pub struct ConversationBench {
    /// The model endpoint (Anthropic format).
    pub model_url: String,
    /// Streamed turns for the first-chunk figure.
    pub streams: usize,
    /// Messages in the paged conversation (two per turn: the task and its answer).
    pub messages: usize,
    /// Page sizes to walk the conversation with.
    pub page_sizes: Vec<u32>,
}

pub async fn run(bench: ConversationBench) -> anyhow::Result<Value> {
    ensure!(bench.messages >= 2, "--messages must be at least 2");
    let served = Served::start(Some(&bench.model_url)).await?;
    let api = Api::new(format!("http://{}/api/v1", served.addr), &served.token)?;
    let outcome = measure(&api, &bench).await;
    served.stop().await;
    outcome
}

async fn measure(api: &Api, bench: &ConversationBench) -> anyhow::Result<Value> {
    // First chunk: one conversation, `streams` turns (the hot window in effect after 10).
    let conversation = api.create("first-chunk").await?;
    let mut headers = Vec::new();
    let mut first_chunks = Vec::new();
    let mut dones = Vec::new();
    for i in 0..bench.streams {
        let turn = api
            .stream_turn(&conversation, &format!("streamed turn {i}"))
            .await?;
        headers.push(turn.headers);
        first_chunks.push(turn.first_chunk);
        dones.push(turn.done);
    }

    // The long conversation, built through the API.
    let long = api.create("long").await?;
    let turns = bench.messages.div_ceil(2);
    let started = Instant::now();
    let mut turn_times = Vec::with_capacity(turns);
    for i in 0..turns {
        let t0 = Instant::now();
        api.sync_turn(
            &long,
            &format!("message {} of the long conversation", 2 * i),
        )
        .await
        .with_context(|| format!("turn {i} of {turns}"))?;
        turn_times.push(t0.elapsed());
    }
    let built = started.elapsed();
    // How a turn's time changes as the conversation grows: the first and the last tenth.
    let tenth = (turns / 10).max(1);
    let mut first_turns = turn_times[..tenth.min(turns)].to_vec();
    let mut last_turns = turn_times[turns.saturating_sub(tenth)..].to_vec();

    let mut pages = Vec::new();
    for &size in &bench.page_sizes {
        let mut latencies = Vec::new();
        let mut cursor: Option<u64> = None;
        let mut seen = 0usize;
        loop {
            let t0 = Instant::now();
            let page = api.messages(&long, size, cursor).await?;
            latencies.push(t0.elapsed());
            seen += page.messages.len();
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        ensure!(
            seen == 2 * turns,
            "paging by {size} returned {seen} messages, the conversation has {}",
            2 * turns
        );
        let first = latencies.first().copied().unwrap_or_default();
        pages.push(json!({
            "page_size": size,
            "pages": latencies.len(),
            "first_page_ms": ms(first),
            "page_ms": percentiles(&mut latencies),
        }));
    }

    Ok(json!({
        "first_chunk": {
            "turns": bench.streams,
            "response_headers_ms": percentiles(&mut headers),
            "first_chunk_ms": percentiles(&mut first_chunks),
            "done_ms": percentiles(&mut dones),
        },
        "long_conversation": {
            "messages": 2 * turns,
            "built_in_s": built.as_secs_f64(),
            "turns_per_second": turns as f64 / built.as_secs_f64(),
            "sync_turn_ms_first_tenth": percentiles(&mut first_turns),
            "sync_turn_ms_last_tenth": percentiles(&mut last_turns),
        },
        "messages_pages": pages,
    }))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One streamed turn as the client saw it, from the moment the request was sent.
struct StreamTurn {
    headers: Duration,
    first_chunk: Duration,
    done: Duration,
}

/// A Conversation API client with the backend's token.
struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    fn new(base: String, token: &str) -> anyhow::Result<Api> {
        let http = bearer_client(token, HeaderMap::new())?;
        Ok(Api { base, http })
    }

    async fn create(&self, title: &str) -> anyhow::Result<String> {
        let response = self
            .http
            .post(format!("{}/conversations", self.base))
            .json(&json!({ "title": title }))
            .send()
            .await?;
        let conversation: Conversation = ok(response).await?.json().await?;
        Ok(conversation.id)
    }

    async fn sync_turn(&self, conversation: &str, task: &str) -> anyhow::Result<()> {
        let response = self
            .http
            .post(format!("{}/agents/default/execute/sync", self.base))
            .query(&[("task", task), ("conversationId", conversation)])
            .send()
            .await?;
        let result: ExecuteResult = ok(response).await?.json().await?;
        ensure!(
            result.status == "completed",
            "the run ended {}: {:?}",
            result.status,
            result.error
        );
        Ok(())
    }

    async fn messages(
        &self,
        conversation: &str,
        limit: u32,
        cursor: Option<u64>,
    ) -> anyhow::Result<MessagePage> {
        let mut request = self
            .http
            .get(format!(
                "{}/conversations/{conversation}/messages",
                self.base
            ))
            .query(&[("limit", limit)]);
        if let Some(cursor) = cursor {
            request = request.query(&[("cursor", cursor)]);
        }
        Ok(ok(request.send().await?).await?.json().await?)
    }

    async fn stream_turn(&self, conversation: &str, task: &str) -> anyhow::Result<StreamTurn> {
        let t0 = Instant::now();
        let response = self
            .http
            .post(format!("{}/agents/default/execute/stream", self.base))
            .query(&[("task", task), ("conversationId", conversation)])
            .send()
            .await?;
        let response = ok(response).await?;
        let headers = t0.elapsed();
        let mut first_chunk = None;
        let mut decoder = SseDecoder::new();
        let mut body = response.bytes_stream();
        while let Some(bytes) = body.next().await {
            for event in decoder.push(&bytes?) {
                if event.data.is_empty() {
                    continue;
                }
                let data: StreamEventData = serde_json::from_str(&event.data)
                    .with_context(|| format!("an event the API does not send: {}", event.data))?;
                if data.chunk.is_some() && first_chunk.is_none() {
                    first_chunk = Some(t0.elapsed());
                }
                if let Some(error) = data.error {
                    bail!("the streamed run failed: {error:?}");
                }
                if data.done == Some(true) {
                    return Ok(StreamTurn {
                        headers,
                        first_chunk: first_chunk.context("the run ended without a chunk")?,
                        done: t0.elapsed(),
                    });
                }
            }
        }
        bail!("the stream ended before `done`")
    }
}
