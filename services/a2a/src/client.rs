//! The A2A client (v1.0, JSON-RPC binding): reads and caches a remote agent's card
//! (`Cache-Control: max-age` and `ETag` revalidation), picks its JSON-RPC interface, and
//! calls `SendMessage`, `SendStreamingMessage`, `GetTask` and `SubscribeToTask`. Every
//! request goes through the public-address guard ([`crate::outbound`]) and carries the
//! target's credentials: a bearer token and/or this deployment's peer signature
//! (`lumina-peer`, scope `a2a:write` for sends, `a2a:read` for reads). Following a task
//! to its end is [`crate::delegate`].

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use lumina_config::Secret;
use lumina_peer::Signer;
use lumina_tools::builtin::{Resolver, SystemResolver};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::outbound::{GuardError, OutboundGuard};
use crate::types::{SendMessageRequest, StreamResponse, Task};

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Allow `http://` agents on loopback addresses (tests only).
    pub allow_loopback: bool,
    /// A card fetch, and a unary call that does not wait for the task. Default 30 s.
    pub request_timeout: Duration,
    /// How long a card without `Cache-Control: max-age` is reused. Default 300 s.
    pub default_card_ttl: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            allow_loopback: false,
            request_timeout: Duration::from_secs(30),
            default_card_ttl: Duration::from_secs(300),
        }
    }
}

/// A remote agent and how to call it.
#[derive(Clone)]
pub struct Target {
    /// The configured peer's name, or the URL, for messages.
    pub name: String,
    /// The base URL (its card is `<url>/.well-known/agent-card.json`), or the card's URL.
    pub url: String,
    pub bearer: Option<Secret>,
    /// Signs each call for `audience` (the peer's node name); unsigned without both.
    pub signer: Option<Arc<Signer>>,
    pub audience: Option<String>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("bearer", &self.bearer)
            .field("signer", &self.signer)
            .field("audience", &self.audience)
            .finish()
    }
}

impl Target {
    /// Where the card is.
    pub fn card_url(&self) -> String {
        if self.url.ends_with(crate::http::CARD_PATH) {
            self.url.clone()
        } else {
            format!(
                "{}{}",
                self.url.trim_end_matches('/'),
                crate::http::CARD_PATH
            )
        }
    }
}

/// Why a call to a remote agent failed. Safe to show: no credentials, no bodies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("the address is refused: {0}")]
    Refused(#[from] GuardError),
    #[error("cannot reach {0}")]
    Unreachable(String),
    #[error("no answer within {0} s")]
    Timeout(u64),
    #[error("HTTP {status} from {url}")]
    Status { status: u16, url: String },
    #[error("the agent card is unusable: {0}")]
    BadCard(String),
    #[error("the agent answered JSON-RPC error {code}: {message}")]
    Rpc { code: i64, message: String },
    #[error("the agent's answer is unusable: {0}")]
    BadResponse(String),
    #[error("cannot sign the call: {0}")]
    Sign(String),
}

/// What the client needs of a card (lenient: other servers omit what ours always sends).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteCard {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The agent's own version.
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub supported_interfaces: Vec<RemoteInterface>,
    #[serde(default)]
    pub capabilities: RemoteCapabilities,
    #[serde(default)]
    pub skills: Vec<RemoteSkill>,
}

/// A skill of a card, as far as a listing needs it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct RemoteSkill {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteInterface {
    pub url: String,
    #[serde(default)]
    pub protocol_binding: String,
    #[serde(default)]
    pub protocol_version: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteCapabilities {
    #[serde(default)]
    pub streaming: Option<bool>,
}

/// The JSON-RPC endpoint of a card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub streaming: bool,
    /// The interface's `protocolVersion` (1.x).
    pub protocol_version: String,
}

impl RemoteCard {
    /// The first JSON-RPC interface of protocol version 1.x (the first is the preferred).
    pub fn endpoint(&self) -> Result<Endpoint, ClientError> {
        let jsonrpc = |i: &&RemoteInterface| i.protocol_binding.eq_ignore_ascii_case("JSONRPC");
        let v1 = |i: &&RemoteInterface| i.protocol_version.starts_with('1');
        let interface = self
            .supported_interfaces
            .iter()
            .filter(jsonrpc)
            .find(v1)
            .ok_or_else(|| {
                ClientError::BadCard(
                    "no JSON-RPC interface of A2A 1.0 in supportedInterfaces".into(),
                )
            })?;
        Ok(Endpoint {
            url: interface.url.clone(),
            streaming: self.capabilities.streaming.unwrap_or(false),
            protocol_version: interface.protocol_version.clone(),
        })
    }
}

struct CachedCard {
    card: Arc<RemoteCard>,
    etag: Option<String>,
    fresh_until: Instant,
}

/// The events of a streaming call.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamResponse, ClientError>> + Send>>;

/// Cheap to clone; clones share the card cache.
#[derive(Clone)]
pub struct A2aClient {
    guard: OutboundGuard,
    options: ClientOptions,
    cards: Arc<Mutex<HashMap<String, CachedCard>>>,
}

impl std::fmt::Debug for A2aClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("A2aClient")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Default for A2aClient {
    fn default() -> Self {
        Self::new(ClientOptions::default())
    }
}

/// The longest a card is cached, whatever `max-age` says.
const MAX_CARD_TTL: Duration = Duration::from_secs(24 * 3600);

impl A2aClient {
    pub fn new(options: ClientOptions) -> Self {
        Self::with_resolver(options, Arc::new(SystemResolver))
    }

    pub fn with_resolver(options: ClientOptions, resolver: Arc<dyn Resolver>) -> Self {
        Self {
            guard: OutboundGuard::new(options.allow_loopback, resolver),
            options,
            cards: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// The target's card: from the cache while fresh, revalidated with its `ETag` after.
    /// The second value says whether it came from the cache without a request.
    pub async fn card(&self, target: &Target) -> Result<(Arc<RemoteCard>, bool), ClientError> {
        let url = target.card_url();
        let etag = {
            let cards = self.cards.lock().map_err(|_| poisoned())?;
            match cards.get(&url) {
                Some(c) if c.fresh_until > Instant::now() => return Ok((c.card.clone(), true)),
                Some(c) => c.etag.clone(),
                None => None,
            }
        };
        let (parsed, addrs) = self.guard.vet(&url).await?;
        let client = self
            .guard
            .pinned_client(&parsed, &addrs, Some(self.options.request_timeout))
            .map_err(|e| ClientError::Unreachable(format!("{url}: {e}")))?;
        let mut request = client.get(parsed).header("Accept", "application/json");
        if let Some(etag) = &etag {
            request = request.header("If-None-Match", etag);
        }
        let response = request.send().await.map_err(|e| self.send_error(&url, e))?;
        let status = response.status();
        let ttl = max_age(response.headers()).unwrap_or(self.options.default_card_ttl);
        let fresh_until = Instant::now() + ttl.min(MAX_CARD_TTL);
        let new_etag = response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if status == reqwest::StatusCode::NOT_MODIFIED {
            let mut cards = self.cards.lock().map_err(|_| poisoned())?;
            if let Some(cached) = cards.get_mut(&url) {
                cached.fresh_until = fresh_until;
                return Ok((cached.card.clone(), false));
            }
            return Err(ClientError::BadCard("304 for a card never fetched".into()));
        }
        if !status.is_success() {
            return Err(ClientError::Status {
                status: status.as_u16(),
                url,
            });
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.send_error(&url, e))?;
        let card: RemoteCard = serde_json::from_slice(&bytes)
            .map_err(|e| ClientError::BadCard(format!("not a card: {e}")))?;
        let card = Arc::new(card);
        self.cards.lock().map_err(|_| poisoned())?.insert(
            url,
            CachedCard {
                card: card.clone(),
                etag: new_etag,
                fresh_until,
            },
        );
        Ok((card, false))
    }

    /// Forgets a cached card (after a call to its endpoint failed: the card may have
    /// moved).
    pub fn forget_card(&self, target: &Target) {
        if let Ok(mut cards) = self.cards.lock() {
            cards.remove(&target.card_url());
        }
    }

    fn send_error(&self, url: &str, error: reqwest::Error) -> ClientError {
        if error.is_timeout() {
            ClientError::Timeout(self.options.request_timeout.as_secs())
        } else {
            // reqwest's message names the URL and the cause, never headers.
            ClientError::Unreachable(format!("{url}: {}", without_url(&error)))
        }
    }

    /// One JSON-RPC POST; the response is checked for its HTTP status.
    async fn post(
        &self,
        target: &Target,
        endpoint: &Endpoint,
        method: &str,
        params: Value,
        stream: bool,
        timeout: Duration,
    ) -> Result<reqwest::Response, ClientError> {
        let (parsed, addrs) = self.guard.vet(&endpoint.url).await?;
        // A stream is bounded by its reader (between events), not as a whole.
        let whole = (!stream).then_some(timeout);
        let client = self
            .guard
            .pinned_client(&parsed, &addrs, whole)
            .map_err(|e| ClientError::Unreachable(format!("{}: {e}", endpoint.url)))?;
        let body = json!({"jsonrpc": "2.0", "id": uuid::Uuid::new_v4().to_string(), "method": method, "params": params});
        let mut request = client
            .post(parsed)
            .header("Content-Type", "application/json")
            .header("A2A-Version", "1.0")
            .header(
                "Accept",
                if stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .json(&body);
        if let Some(token) = &target.bearer {
            request = request.bearer_auth(token.expose());
        }
        if let (Some(signer), Some(audience)) = (&target.signer, &target.audience) {
            let scope = match method {
                "GetTask" | "SubscribeToTask" | "ListTasks" => lumina_peer::SCOPE_READ,
                _ => lumina_peer::SCOPE_WRITE,
            };
            let signed = signer
                .sign(scope, audience)
                .map_err(|e| ClientError::Sign(e.to_string()))?;
            for (name, value) in signed.headers() {
                request = request.header(name, value);
            }
        }
        let send = request.send();
        let response = if stream {
            tokio::time::timeout(timeout, send)
                .await
                .map_err(|_| ClientError::Timeout(timeout.as_secs()))?
        } else {
            send.await
        }
        .map_err(|e| {
            if e.is_timeout() {
                ClientError::Timeout(timeout.as_secs())
            } else {
                ClientError::Unreachable(format!("{}: {}", endpoint.url, without_url(&e)))
            }
        })?;
        if !response.status().is_success() {
            return Err(ClientError::Status {
                status: response.status().as_u16(),
                url: endpoint.url.clone(),
            });
        }
        Ok(response)
    }

    /// A unary call's `result`.
    async fn unary(
        &self,
        target: &Target,
        endpoint: &Endpoint,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let response = self
            .post(target, endpoint, method, params, false, timeout)
            .await?;
        let bytes = response.bytes().await.map_err(|e| {
            if e.is_timeout() {
                ClientError::Timeout(timeout.as_secs())
            } else {
                ClientError::Unreachable(format!("{}: {}", endpoint.url, without_url(&e)))
            }
        })?;
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ClientError::BadResponse(format!("not JSON: {e}")))?;
        result_of(value)
    }

    /// `SendMessage`: blocking unless the request says `returnImmediately`; the answer is
    /// a `task` or a `message`. `timeout` bounds the whole call.
    pub async fn send(
        &self,
        target: &Target,
        endpoint: &Endpoint,
        request: &SendMessageRequest,
        timeout: Duration,
    ) -> Result<StreamResponse, ClientError> {
        let params = serde_json::to_value(request)
            .map_err(|e| ClientError::BadResponse(format!("encode: {e}")))?;
        let result = self
            .unary(target, endpoint, "SendMessage", params, timeout)
            .await?;
        serde_json::from_value(result)
            .map_err(|e| ClientError::BadResponse(format!("SendMessage result: {e}")))
    }

    /// `GetTask`.
    pub async fn get_task(
        &self,
        target: &Target,
        endpoint: &Endpoint,
        task_id: &str,
    ) -> Result<Task, ClientError> {
        let params = json!({"id": task_id, "historyLength": 0});
        self.task_call(target, endpoint, "GetTask", params).await
    }

    /// `CancelTask`: the task as the remote has it after the request (canceled, or already
    /// terminal: the remote answers with its error then).
    pub async fn cancel_task(
        &self,
        target: &Target,
        endpoint: &Endpoint,
        task_id: &str,
    ) -> Result<Task, ClientError> {
        let params = json!({"id": task_id});
        self.task_call(target, endpoint, "CancelTask", params).await
    }

    /// A unary call whose result is a `Task`.
    async fn task_call(
        &self,
        target: &Target,
        endpoint: &Endpoint,
        method: &str,
        params: Value,
    ) -> Result<Task, ClientError> {
        let result = self
            .unary(
                target,
                endpoint,
                method,
                params,
                self.options.request_timeout,
            )
            .await?;
        serde_json::from_value(result)
            .map_err(|e| ClientError::BadResponse(format!("{method} result: {e}")))
    }

    /// `SendStreamingMessage`: the events as they come. `timeout` bounds the wait for the
    /// stream to open.
    pub async fn send_stream(
        &self,
        target: &Target,
        endpoint: &Endpoint,
        request: &SendMessageRequest,
        timeout: Duration,
    ) -> Result<EventStream, ClientError> {
        let params = serde_json::to_value(request)
            .map_err(|e| ClientError::BadResponse(format!("encode: {e}")))?;
        self.stream(target, endpoint, "SendStreamingMessage", params, timeout)
            .await
    }

    /// `SubscribeToTask`: the task, then its events.
    pub async fn subscribe(
        &self,
        target: &Target,
        endpoint: &Endpoint,
        task_id: &str,
        timeout: Duration,
    ) -> Result<EventStream, ClientError> {
        self.stream(
            target,
            endpoint,
            "SubscribeToTask",
            json!({"id": task_id}),
            timeout,
        )
        .await
    }

    async fn stream(
        &self,
        target: &Target,
        endpoint: &Endpoint,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<EventStream, ClientError> {
        let response = self
            .post(target, endpoint, method, params, true, timeout)
            .await?;
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            // An error before the stream opened is a plain JSON-RPC answer.
            let bytes = response
                .bytes()
                .await
                .map_err(|e| ClientError::Unreachable(without_url(&e)))?;
            let value: Value = serde_json::from_slice(&bytes)
                .map_err(|e| ClientError::BadResponse(format!("not JSON: {e}")))?;
            let result = result_of(value)?;
            let event = serde_json::from_value(result)
                .map_err(|e| ClientError::BadResponse(format!("{method} result: {e}")))?;
            return Ok(Box::pin(futures::stream::iter([Ok(event)])));
        }
        let url = endpoint.url.clone();
        let bytes = response.bytes_stream();
        let events = futures::stream::unfold(
            (
                bytes,
                lumina_sse::SseDecoder::new(),
                Vec::<lumina_sse::SseEvent>::new(),
                false,
            ),
            move |(mut bytes, mut decoder, mut pending, mut done)| {
                let url = url.clone();
                async move {
                    loop {
                        if !pending.is_empty() {
                            let event = pending.remove(0);
                            return Some((
                                decode_event(&event.data),
                                (bytes, decoder, pending, done),
                            ));
                        }
                        if done {
                            return None;
                        }
                        match bytes.next().await {
                            Some(Ok(chunk)) => pending.extend(decoder.push(&chunk)),
                            Some(Err(e)) => {
                                done = true;
                                let error = ClientError::Unreachable(format!(
                                    "{url}: the stream broke: {}",
                                    without_url(&e)
                                ));
                                return Some((Err(error), (bytes, decoder, pending, done)));
                            }
                            None => {
                                done = true;
                                pending.extend(decoder.finish());
                            }
                        }
                    }
                }
            },
        )
        .filter(|event| {
            // Keep-alive comments and empty events carry nothing.
            let keep = !matches!(event, Err(ClientError::BadResponse(why)) if why == EMPTY_EVENT);
            futures::future::ready(keep)
        });
        Ok(Box::pin(events))
    }
}

const EMPTY_EVENT: &str = "empty event";

fn decode_event(data: &str) -> Result<StreamResponse, ClientError> {
    if data.trim().is_empty() {
        return Err(ClientError::BadResponse(EMPTY_EVENT.into()));
    }
    let value: Value = serde_json::from_str(data)
        .map_err(|e| ClientError::BadResponse(format!("an event is not JSON: {e}")))?;
    let result = result_of(value)?;
    serde_json::from_value(result)
        .map_err(|e| ClientError::BadResponse(format!("an event is no StreamResponse: {e}")))
}

/// The `result` of a JSON-RPC response, or its error.
fn result_of(mut value: Value) -> Result<Value, ClientError> {
    if let Some(error) = value.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .take(500)
            .collect();
        return Err(ClientError::Rpc { code, message });
    }
    match value.get_mut("result") {
        Some(result) => Ok(result.take()),
        None => Err(ClientError::BadResponse("neither result nor error".into())),
    }
}

/// `max-age` of a `Cache-Control` header; `no-store` / `no-cache` are 0.
fn max_age(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get("cache-control")?.to_str().ok()?;
    let mut age = None;
    for directive in value.split(',').map(str::trim) {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Some(Duration::ZERO);
        }
        if let Some(n) = lower.strip_prefix("max-age=") {
            age = n
                .trim_matches('"')
                .parse::<u64>()
                .ok()
                .map(Duration::from_secs);
        }
    }
    age
}

/// reqwest's message without the URL it repeats (the caller names the URL once).
fn without_url(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(&format!(" for url ({url})"), "");
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn poisoned() -> ClientError {
    ClientError::BadResponse("the card cache is unusable".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_is_read_and_no_store_is_zero() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("cache-control", "public, max-age=120".parse().unwrap());
        assert_eq!(max_age(&h), Some(Duration::from_secs(120)));
        h.insert("cache-control", "no-store".parse().unwrap());
        assert_eq!(max_age(&h), Some(Duration::ZERO));
        h.remove("cache-control");
        assert_eq!(max_age(&h), None);
    }

    #[test]
    fn the_first_jsonrpc_v1_interface_is_chosen() {
        let card: RemoteCard = serde_json::from_value(json!({
            "name": "x",
            "supportedInterfaces": [
                {"url": "https://a/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
                {"url": "https://a/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": "https://a/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {"streaming": true}
        }))
        .unwrap();
        assert_eq!(
            card.endpoint().unwrap(),
            Endpoint {
                url: "https://a/rpc".into(),
                streaming: true,
                protocol_version: "1.0".into(),
            }
        );
        let bare: RemoteCard = serde_json::from_value(json!({"name": "y"})).unwrap();
        assert!(matches!(bare.endpoint(), Err(ClientError::BadCard(_))));
    }

    #[test]
    fn rpc_errors_and_results_are_told_apart() {
        assert_eq!(
            result_of(
                json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "no"}})
            ),
            Err(ClientError::Rpc {
                code: -32001,
                message: "no".into()
            })
        );
        assert_eq!(
            result_of(json!({"jsonrpc": "2.0", "id": 1, "result": {"a": 1}})),
            Ok(json!({"a": 1}))
        );
    }
}
