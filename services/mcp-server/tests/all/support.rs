//! A small handler exercising the library, an in-process HTTP server and an SSE reader.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lumina_mcp_server::http::{self, HttpOptions};
use lumina_mcp_server::{
    code, CallToolResult, ErrorObject, Handler, Implementation, LogLevel, RequestContext, Tool,
};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

pub const LATEST: &str = "2025-11-25";
pub const STATELESS: &str = "2026-07-28";

/// Tools: `echo{text}`, `ask{message}` (elicitation), `wait` (until cancelled), `chatty`
/// (logs at debug and warning).
pub struct TestHandler;

#[async_trait]
impl Handler for TestHandler {
    fn server_info(&self) -> Implementation {
        Implementation::new("test-server", "0.0.1")
    }

    fn instructions(&self) -> Option<String> {
        Some("test instructions".into())
    }

    async fn list_tools(&self, _ctx: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
        let text = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        Ok(vec![
            Tool::new("echo", "Echoes text", text),
            Tool::new("ask", "Elicits an answer", Tool::no_arguments()),
            Tool::new("wait", "Waits until cancelled", Tool::no_arguments()),
            Tool::new("chatty", "Logs", Tool::no_arguments()),
        ])
    }

    async fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        ctx: RequestContext,
    ) -> Result<CallToolResult, ErrorObject> {
        match name {
            "echo" => {
                let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
                ctx.progress(1.0, Some(1.0), Some("echoed"));
                Ok(CallToolResult::text(text))
            }
            "ask" => {
                let params = json!({"message": "name?", "requestedSchema": {"type": "object"}});
                match ctx.elicit(params).await {
                    Ok(answer) => Ok(CallToolResult::text(format!("answer: {answer}"))),
                    Err(e) => Ok(CallToolResult::error(e.to_string())),
                }
            }
            "wait" => {
                ctx.cancellation().cancelled().await;
                Ok(CallToolResult::text("cancelled"))
            }
            "chatty" => {
                ctx.log(LogLevel::Debug, None, "debug line");
                ctx.log(LogLevel::Warning, None, "warning line");
                Ok(CallToolResult::text("done"))
            }
            _ => Err(ErrorObject::new(code::INTERNAL_ERROR, "unreachable")),
        }
    }
}

/// An in-process HTTP endpoint on 127.0.0.1:0.
pub struct Server {
    pub url: String,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    pub async fn start(options: HttpOptions) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let stop = CancellationToken::new();
        let shutdown = stop.clone();
        let task = tokio::spawn(async move {
            let handler: Arc<dyn Handler> = Arc::new(TestHandler);
            http::serve(listener, handler, options, async move {
                shutdown.cancelled().await
            })
            .await
            .unwrap();
        });
        Server { url, stop, task }
    }

    pub async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the server did not stop")
            .unwrap();
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().build().unwrap()
}

/// A POST with the usual MCP headers.
pub fn post(client: &reqwest::Client, url: &str, session: Option<&str>) -> reqwest::RequestBuilder {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", LATEST);
    }
    request
}

pub fn initialize_body(id: i64) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {
            "protocolVersion": LATEST,
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "test", "version": "1"}
        }
    })
}

/// `initialize` + `notifications/initialized`; returns the session id.
pub async fn open_session(client: &reqwest::Client, url: &str) -> String {
    let response = post(client, url, None)
        .json(&initialize_body(1))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["protocolVersion"], LATEST);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post(client, url, Some(&session))
        .json(&note)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    session
}

/// One SSE event: `(id, data)`.
pub type Event = (Option<String>, String);

/// Reads SSE events from a streaming response.
pub struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event with a `data` field; `None` when the stream ended. Panics after 10 s.
    pub async fn next(&mut self) -> Option<Event> {
        tokio::time::timeout(Duration::from_secs(10), self.next_inner())
            .await
            .expect("no SSE event within 10 s")
    }

    async fn next_inner(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut id = None;
                let mut data = None;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data = Some(v.trim_start().to_string());
                    }
                }
                if let Some(data) = data {
                    return Some((id, data));
                }
                continue;
            }
            let chunk = self.response.chunk().await.ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The next event that carries a JSON message, parsed.
    pub async fn next_message(&mut self) -> Option<(Option<String>, Value)> {
        loop {
            let (id, data) = self.next().await?;
            if !data.is_empty() {
                return Some((id, serde_json::from_str(&data).unwrap()));
            }
        }
    }
}
