//! [`ModelClient`]: one streamed turn with retries
//! (docs/specs/model-streaming.md#retry-policy) and the fallback rule
//! (docs/design.md#fallback).

use std::time::{Duration, SystemTime};

use futures::StreamExt;
use reqwest::header::{HeaderMap, CONTENT_TYPE};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::http::{error_for_status, http_error_message, stream_error};
use crate::sse::SseDecoder;
use crate::stream::{Assembled, Progress, StreamParser};
use crate::{
    anthropic, openai, retry, ApiType, ChatRequest, ChatResponse, ModelEndpoint, ModelError,
    ModelOptions, Provider, StreamDelta,
};

/// Error bodies are only read for their message; a hostile or broken server cannot make
/// us buffer more than this.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Streams chat turns from a primary endpoint, falling back to a second one when allowed.
/// Cheap to clone: clones share one connection pool.
#[derive(Debug, Clone)]
pub struct ModelClient {
    http: reqwest::Client,
    primary: ModelEndpoint,
    fallback: Option<ModelEndpoint>,
    options: ModelOptions,
}

/// Why one attempt failed, with what the retry decision needs.
struct AttemptError {
    error: ModelError,
    /// Output already reached the caller: never retry or fall back.
    produced: bool,
    server_delay: Option<Duration>,
    should_retry: Option<bool>,
}

impl From<ModelError> for AttemptError {
    fn from(error: ModelError) -> Self {
        Self {
            error,
            produced: false,
            server_delay: None,
            should_retry: None,
        }
    }
}

/// An endpoint's final failure after its retries.
struct EndpointError {
    error: ModelError,
    produced: bool,
}

/// Everything about a request that does not change between attempts.
struct Prepared {
    api: ApiType,
    url: String,
    headers: HeaderMap,
    body: Value,
}

impl ModelClient {
    /// Fails only if the HTTP client cannot be constructed (TLS initialisation).
    pub fn new(
        primary: ModelEndpoint,
        fallback: Option<ModelEndpoint>,
        options: ModelOptions,
    ) -> Result<Self, ModelError> {
        let http = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .build()
            .map_err(|e| {
                ModelError::Network(format!("cannot build the HTTP client: {}", chain(&e)))
            })?;
        Ok(Self {
            http,
            primary,
            fallback,
            options,
        })
    }

    pub fn primary(&self) -> &ModelEndpoint {
        &self.primary
    }

    pub fn fallback(&self) -> Option<&ModelEndpoint> {
        self.fallback.as_ref()
    }

    pub fn options(&self) -> &ModelOptions {
        &self.options
    }

    /// Stream one model turn. Text and thinking fragments go to `on_delta` as they arrive;
    /// the assembled turn is returned at the end.
    ///
    /// Retries (docs/specs/model-streaming.md#retry-policy) happen only while nothing has
    /// been forwarded for the current attempt; the fallback endpoint is used only after the
    /// primary's retries are exhausted with a fallback-eligible error and nothing was
    /// emitted. Cancelling `cancel` ends the call promptly with [`ModelError::Cancelled`].
    pub async fn stream(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, ModelError> {
        let primary = self
            .run_endpoint(&self.primary, Provider::Primary, req, cancel, on_delta)
            .await;
        let failure = match primary {
            Ok(resp) => return Ok(resp),
            Err(f) => f,
        };
        let fallback = match &self.fallback {
            Some(fb) if !failure.produced && failure.error.allows_fallback() => fb,
            _ => return Err(failure.error),
        };
        warn!(
            provider = Provider::Primary.as_str(),
            status = status_of(&failure.error),
            error = %failure.error,
            "primary model failed, trying fallback"
        );
        self.run_endpoint(fallback, Provider::Fallback, req, cancel, on_delta)
            .await
            .map_err(|f| f.error)
    }

    async fn run_endpoint(
        &self,
        ep: &ModelEndpoint,
        provider: Provider,
        req: &ChatRequest,
        cancel: &CancellationToken,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, EndpointError> {
        let prepared = prepare(ep, &self.options, req).map_err(|error| EndpointError {
            error,
            produced: false,
        })?;
        let mut attempt: u32 = 0;
        loop {
            debug!(
                attempt,
                provider = provider.as_str(),
                model = %ep.model,
                api = prepared.api.as_str(),
                "sending model request"
            );
            let outcome = tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(AttemptError::from(ModelError::Cancelled)),
                r = self.attempt(&prepared, on_delta) => r,
            };
            let failed = match outcome {
                Ok(a) => return Ok(response(a, ep, provider)),
                Err(mut failed) => {
                    failed.error = redact(failed.error, ep.api_key.expose());
                    failed
                }
            };
            let retryable = !failed.produced
                && !matches!(
                    failed.error,
                    ModelError::Cancelled | ModelError::Protocol(_)
                )
                && failed
                    .should_retry
                    .unwrap_or_else(|| failed.error.is_retryable());
            if !retryable || attempt >= self.options.max_retries {
                return Err(EndpointError {
                    error: failed.error,
                    produced: failed.produced,
                });
            }
            let delay = retry::retry_delay(attempt, failed.server_delay, self.options.max_backoff);
            warn!(
                attempt,
                provider = provider.as_str(),
                status = status_of(&failed.error),
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                error = %failed.error,
                "model request failed, retrying"
            );
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    return Err(EndpointError { error: ModelError::Cancelled, produced: false });
                }
                _ = tokio::time::sleep(delay) => {}
            }
            attempt += 1;
        }
    }

    async fn attempt(
        &self,
        p: &Prepared,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<Assembled, AttemptError> {
        let idle = self.options.idle_timeout;
        let send = self
            .http
            .post(&p.url)
            .headers(p.headers.clone())
            .json(&p.body)
            .send();
        let resp = match tokio::time::timeout(idle, send).await {
            Err(_) => {
                return Err(
                    ModelError::Timeout(format!("no response headers within {idle:?}")).into(),
                )
            }
            Ok(Err(e)) => return Err(transport_error(&e).into()),
            Ok(Ok(resp)) => resp,
        };
        let status = resp.status();
        if !status.is_success() {
            return Err(http_failure(resp, idle).await);
        }
        let is_json = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            // A gateway that answered with a plain JSON document despite `stream: true`.
            let body = read_capped(resp, idle).await;
            return Err(match serde_json::from_str::<Value>(&body) {
                Ok(v) if v.get("error").is_some_and(|e| !e.is_null()) => stream_error(&v).into(),
                _ => ModelError::Protocol(
                    "expected an event stream but got a JSON document (does the server support \"stream\": true?)"
                        .into(),
                )
                .into(),
            });
        }
        let mut parser = StreamParser::new(p.api);
        let read = read_events(resp, &mut parser, idle, on_delta).await;
        let produced = parser.produced();
        let with_flag = |error| AttemptError {
            produced,
            ..AttemptError::from(error)
        };
        let done = read.map_err(with_flag)?;
        parser.finish(done).map_err(with_flag)
    }
}

fn prepare(
    ep: &ModelEndpoint,
    options: &ModelOptions,
    req: &ChatRequest,
) -> Result<Prepared, ModelError> {
    let api = ep.resolved_api_type();
    let body = match api {
        ApiType::Anthropic => anthropic::request_body(&ep.model, options, req),
        ApiType::OpenaiCompatible | ApiType::Auto => {
            openai::request_body(&ep.model, options, req, ep.limit_field())
        }
    };
    Ok(Prepared {
        api,
        url: ep.request_url(),
        headers: ep.headers()?,
        body,
    })
}

/// Feed the body through the SSE decoder and the parser. Returns whether the parser saw the
/// end of the message (`false`: the server closed the stream first).
async fn read_events(
    resp: reqwest::Response,
    parser: &mut StreamParser,
    idle: Duration,
    on_delta: &mut (dyn FnMut(StreamDelta) + Send),
) -> Result<bool, ModelError> {
    let mut body = resp.bytes_stream();
    let mut decoder = SseDecoder::new();
    loop {
        // The idle clock restarts on any bytes, so `:` keep-alive comments and pings count.
        let next = tokio::time::timeout(idle, body.next())
            .await
            .map_err(|_| ModelError::Timeout(format!("no data from the model API for {idle:?}")))?;
        let (events, eof) = match next {
            Some(Ok(bytes)) => (decoder.push(&bytes), false),
            Some(Err(e)) => {
                return Err(ModelError::Network(format!(
                    "stream interrupted: {}",
                    chain(&e)
                )))
            }
            None => (decoder.finish().into_iter().collect(), true),
        };
        for ev in &events {
            if parser.on_event(ev, &mut *on_delta)? == Progress::Done {
                return Ok(true);
            }
        }
        if eof {
            return Ok(false);
        }
    }
}

async fn http_failure(resp: reqwest::Response, idle: Duration) -> AttemptError {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = read_capped(resp, idle).await;
    let mut message = http_error_message(status, &body);
    let request_id = ["request-id", "x-request-id"]
        .iter()
        .find_map(|h| headers.get(*h).and_then(|v| v.to_str().ok()));
    if let Some(id) = request_id {
        message.push_str(&format!(" (request-id: {id})"));
    }
    AttemptError {
        error: error_for_status(status, message),
        produced: false,
        server_delay: retry::server_delay(&headers, SystemTime::now()),
        should_retry: retry::should_retry_header(&headers),
    }
}

/// Best effort: a body that cannot be read within the idle timeout yields what arrived.
async fn read_capped(resp: reqwest::Response, idle: Duration) -> String {
    let mut body = resp.bytes_stream();
    let mut buf = Vec::new();
    while buf.len() < MAX_ERROR_BODY {
        match tokio::time::timeout(idle, body.next()).await {
            Ok(Some(Ok(bytes))) => buf.extend_from_slice(&bytes),
            _ => break,
        }
    }
    buf.truncate(MAX_ERROR_BODY);
    String::from_utf8_lossy(&buf).into_owned()
}

fn transport_error(e: &reqwest::Error) -> ModelError {
    if e.is_timeout() {
        ModelError::Timeout(chain(e))
    } else {
        ModelError::Network(chain(e))
    }
}

/// The error and its sources, which is where reqwest keeps the useful part
/// ("connection refused", "tls handshake eof", ...).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}

/// Servers sometimes echo what they were sent; make sure the key never leaves in a message.
fn redact(error: ModelError, key: &str) -> ModelError {
    let key = key.trim();
    if key.len() < 4 {
        return error;
    }
    let clean = |m: String| {
        if m.contains(key) {
            m.replace(key, "[redacted]")
        } else {
            m
        }
    };
    match error {
        ModelError::Auth { status, message } => ModelError::Auth {
            status,
            message: clean(message),
        },
        ModelError::BadRequest { status, message } => ModelError::BadRequest {
            status,
            message: clean(message),
        },
        ModelError::RateLimited { status, message } => ModelError::RateLimited {
            status,
            message: clean(message),
        },
        ModelError::Server { status, message } => ModelError::Server {
            status,
            message: clean(message),
        },
        ModelError::Timeout(m) => ModelError::Timeout(clean(m)),
        ModelError::Network(m) => ModelError::Network(clean(m)),
        ModelError::Protocol(m) => ModelError::Protocol(clean(m)),
        ModelError::Cancelled => ModelError::Cancelled,
    }
}

fn status_of(e: &ModelError) -> Option<u16> {
    match e {
        ModelError::Auth { status, .. }
        | ModelError::BadRequest { status, .. }
        | ModelError::RateLimited { status, .. }
        | ModelError::Server { status, .. } => Some(*status),
        _ => None,
    }
}

fn response(a: Assembled, ep: &ModelEndpoint, provider: Provider) -> ChatResponse {
    ChatResponse {
        text: a.text,
        tool_calls: a.tool_calls,
        stop_reason: a.stop_reason,
        usage: a.usage,
        model: a.model.unwrap_or_else(|| ep.model.clone()),
        provider,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn redaction_covers_every_message() {
        let e = redact(
            ModelError::Auth {
                status: 401,
                message: "bad key sk-live-123456".into(),
            },
            "sk-live-123456",
        );
        assert_eq!(
            e,
            ModelError::Auth {
                status: 401,
                message: "bad key [redacted]".into()
            }
        );
        let e = redact(
            ModelError::Network("x sk-live-123456".into()),
            "sk-live-123456",
        );
        assert_eq!(e, ModelError::Network("x [redacted]".into()));
    }

    #[test]
    fn stream_future_is_send() {
        fn assert_send<T: Send>(_: T) {}
        let client = ModelClient::new(
            ModelEndpoint {
                api_type: ApiType::Anthropic,
                base_url: "http://127.0.0.1:9".into(),
                model: "m".into(),
                api_key: lumina_config::Secret::new("k"),
            },
            None,
            ModelOptions::default(),
        )
        .unwrap();
        let req = ChatRequest::default();
        let cancel = CancellationToken::new();
        let mut sink = |_d: StreamDelta| {};
        assert_send(client.stream(&req, &cancel, &mut sink));
    }
}
