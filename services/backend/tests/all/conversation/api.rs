//! A real HTTP client for the Conversation API (reqwest) and an SSE reader (lumina-sse).

use std::collections::VecDeque;
use std::time::Duration;

use lumina_sse::{SseDecoder, SseEvent};
use serde_json::Value;

pub struct Api {
    pub base: String,
    pub token: String,
    pub http: reqwest::Client,
}

impl Api {
    /// `base`: `http://host:port`.
    pub fn new(base: impl Into<String>, token: impl Into<String>) -> Api {
        Api {
            base: base.into(),
            token: token.into(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        }
    }

    /// The API of the backend whose WebSocket URL is `ws_url`.
    pub fn for_ws(ws_url: &str, token: &str) -> Api {
        let base = ws_url
            .replacen("ws://", "http://", 1)
            .trim_end_matches(lumina_protocol::WS_PATH)
            .to_string();
        Api::new(base, token)
    }

    pub fn with_token(&self, token: &str) -> Api {
        Api::new(self.base.clone(), token)
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    async fn json(response: reqwest::Response) -> (u16, Value) {
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"))
        };
        (status, value)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        Self::json(
            self.request(reqwest::Method::GET, path)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn post(&self, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.request(reqwest::Method::POST, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        Self::json(request.send().await.unwrap()).await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        Self::json(
            self.request(reqwest::Method::DELETE, path)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// Creates a conversation; its id.
    pub async fn create(&self, title: &str) -> String {
        let (status, body) = self
            .post(
                "/api/v1/conversations",
                Some(serde_json::json!({ "title": title })),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    /// Opens an SSE stream (POST for execute, GET for resume).
    pub async fn stream(
        &self,
        method: reqwest::Method,
        path: &str,
        last_event_id: Option<&str>,
    ) -> Result<Sse, (u16, Value)> {
        let mut request = self.request(method, path);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.unwrap();
        if response.status() != 200 {
            return Err(Self::json(response).await);
        }
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        Ok(Sse {
            response,
            decoder: SseDecoder::new(),
            pending: VecDeque::new(),
            ended: false,
        })
    }

    /// Runs one turn through execute/stream to the end: (conversation id, events).
    pub async fn turn(&self, task: &str, conversation: Option<&str>) -> (String, Vec<Event>) {
        let mut path = format!(
            "/api/v1/agents/default/execute/stream?task={}",
            encode(task)
        );
        if let Some(id) = conversation {
            path.push_str(&format!("&conversationId={id}"));
        }
        let mut sse = self
            .stream(reqwest::Method::POST, &path, None)
            .await
            .unwrap_or_else(|e| panic!("execute/stream: {e:?}"));
        let events = sse.all().await;
        let id = events[0].data["conversationId"]
            .as_str()
            .unwrap()
            .to_string();
        (id, events)
    }
}

pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An SSE event: its id and parsed data.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: String,
    pub data: Value,
}

pub struct Sse {
    response: reqwest::Response,
    decoder: SseDecoder,
    pending: VecDeque<SseEvent>,
    ended: bool,
}

impl Sse {
    /// The next event (heartbeat comments are skipped); `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                if event.data.is_empty() {
                    continue;
                }
                return Some(Event {
                    id: event.id.expect("every event has an id"),
                    data: serde_json::from_str(&event.data).unwrap(),
                });
            }
            if self.ended {
                return None;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.response.chunk())
                .await
                .expect("no SSE bytes within 30 s")
                .unwrap();
            match chunk {
                Some(bytes) => self.pending.extend(self.decoder.push(&bytes)),
                None => {
                    self.pending.extend(self.decoder.finish());
                    self.ended = true;
                }
            }
        }
    }

    /// Every event until the stream ends.
    pub async fn all(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }
}

/// The text of the chunk events, in order.
pub fn chunks(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| e.data["chunk"].as_str())
        .collect()
}

/// The texts of a model request's messages (Anthropic format), role by role.
pub fn request_texts(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| {
            let role = m["role"].as_str().unwrap().to_string();
            let content = &m["content"];
            let texts: Vec<String> = match content {
                Value::String(s) => vec![s.clone()],
                Value::Array(blocks) => blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str().map(str::to_string))
                    .collect(),
                _ => vec![],
            };
            texts.into_iter().map(move |t| (role.clone(), t))
        })
        .collect()
}
