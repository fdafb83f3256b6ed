//! A server in the process on port 0 (the production router and service with the TCK
//! fixture executor, or another executor) and a small JSON-RPC / SSE client.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use lumina_a2a::http::{Authenticator, Principal, Unauthenticated};
use lumina_a2a::{A2aService, CardDocument, CardOptions, Executor, MemoryTaskStore, TaskStore};
use lumina_a2a::{PushOptions, PushSender};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

pub struct Server {
    pub url: String,
    pub http: reqwest::Client,
    shutdown: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub struct Options {
    pub executor: Arc<dyn Executor>,
    pub store: Arc<dyn TaskStore>,
    pub auth: Arc<dyn Authenticator>,
    pub input_modes: Vec<String>,
    pub push: Option<PushOptions>,
    pub rpc_path: &'static str,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            executor: Arc::new(lumina_a2a::fixture::TckFixture),
            store: Arc::new(MemoryTaskStore::new()),
            auth: Arc::new(lumina_a2a::OpenAccess),
            input_modes: vec!["text/plain".into(), "application/json".into()],
            push: Some(PushOptions {
                allow_loopback: true,
                ..Default::default()
            }),
            rpc_path: "/",
        }
    }
}

impl Server {
    pub async fn start() -> Self {
        Self::with(Options::default()).await
    }

    pub async fn with(options: Options) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let base = format!("http://{addr}");
        let _ = &base;
        let url = format!("{base}{}", options.rpc_path);
        let card = CardDocument::build(
            &CardOptions {
                name: "test".into(),
                description: "test agent".into(),
                version: "0.0.0".into(),
                url: url.clone(),
                listen: Some(addr),
                url_setting: "TEST_URL".into(),
                input_modes: options.input_modes.clone(),
                output_modes: vec!["text/plain".into()],
                push_notifications: options.push.is_some(),
                bearer_auth: false,
                streaming: true,
            },
            options.executor.skills(),
        );
        let service = A2aService::new(
            options.store.clone(),
            options.executor.clone(),
            card,
            options.push.map(PushSender::new),
        );
        let app = lumina_a2a::router(service, options.auth.clone(), options.rpc_path);
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
                .unwrap();
        });
        Self {
            url,
            http: reqwest::Client::new(),
            shutdown,
        }
    }

    /// A v1.0 call; the whole JSON-RPC response.
    pub async fn call(&self, method: &str, params: Value) -> Value {
        self.call_with(method, params, &[("A2A-Version", "1.0")])
            .await
    }

    pub async fn call_with(&self, method: &str, params: Value, headers: &[(&str, &str)]) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let mut request = self.http.post(&self.url).json(&body);
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let response = request.send().await.unwrap();
        response.json().await.unwrap()
    }

    /// A v1.0 call that must succeed; its result.
    pub async fn ok(&self, method: &str, params: Value) -> Value {
        let response = self.call(method, params).await;
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    /// A v1.0 call that must fail; its error code.
    pub async fn err(&self, method: &str, params: Value) -> i64 {
        let response = self.call(method, params).await;
        response["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method} did not fail: {response}"))
    }

    /// A streaming call: every event's `result`, until the stream closes.
    pub async fn stream(&self, method: &str, params: Value) -> Vec<Value> {
        let mut events = self
            .open_stream(method, params, &[("A2A-Version", "1.0")])
            .await;
        let mut all = Vec::new();
        while let Some(event) = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("stream stalled")
        {
            all.push(event);
        }
        all
    }

    /// A streaming call as a stream of `result`s (events arrive as the server sends them).
    pub async fn open_stream(
        &self,
        method: &str,
        params: Value,
        headers: &[(&str, &str)],
    ) -> futures::stream::BoxStream<'static, Value> {
        let body = json!({"jsonrpc": "2.0", "id": "s1", "method": method, "params": params});
        let mut request = self
            .http
            .post(&self.url)
            .header("Accept", "text/event-stream")
            .json(&body);
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let response = request.send().await.unwrap();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(
            content_type.starts_with("text/event-stream"),
            "not a stream: {}",
            response.text().await.unwrap()
        );
        let mut decoder = lumina_sse::SseDecoder::new();
        response
            .bytes_stream()
            .flat_map(move |chunk| {
                let events = decoder.push(&chunk.unwrap());
                futures::stream::iter(events.into_iter().filter(|e| !e.data.is_empty()).map(|e| {
                    let frame: Value = serde_json::from_str(&e.data).unwrap();
                    assert_eq!(frame["jsonrpc"], "2.0");
                    assert_eq!(frame["id"], "s1");
                    frame["result"].clone()
                }))
            })
            .boxed()
    }
}

/// A user message with one text part.
pub fn message(message_id: &str) -> Value {
    json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "hello"}]})
}

pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

/// The state of a task JSON.
pub fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

/// Bearer tokens: `rw-<name>` reads and writes as `<name>`, `ro-<name>` only reads; anything
/// else is refused.
pub struct TestBearer;

#[async_trait]
impl Authenticator for TestBearer {
    async fn authenticate(
        &self,
        headers: &axum::http::HeaderMap,
    ) -> Result<Principal, Unauthenticated> {
        let token = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or(Unauthenticated)?;
        if let Some(name) = token.strip_prefix("rw-") {
            return Ok(Principal {
                owner: name.into(),
                can_read: true,
                can_write: true,
                identity: Value::Null,
            });
        }
        if let Some(name) = token.strip_prefix("ro-") {
            return Ok(Principal {
                owner: name.into(),
                can_read: true,
                can_write: false,
                identity: Value::Null,
            });
        }
        Err(Unauthenticated)
    }
}
