//! The TCK fixture executor: the behaviours the official A2A TCK (`a2aproject/a2a-tck`,
//! `scenarios/*.feature`) asks for, keyed on the `messageId` prefix. Plugged into the same
//! service and router as the production executor; see `docs/a2a.md`.

use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;

use crate::card::AgentSkill;
use crate::executor::{EventSink, Executor, ExecutorError, RequestContext};
use crate::types::{Artifact, Part, PartContent, TaskState};

/// How long the long-running scenario stays working (twice the TCK's streaming timeout).
pub const LONG_RUNNING: Duration = Duration::from_secs(4);

pub struct TckFixture;

fn artifact(parts: Vec<Part>) -> Artifact {
    Artifact {
        artifact_id: uuid::Uuid::new_v4().to_string(),
        name: None,
        description: None,
        parts,
        metadata: None,
        extensions: Vec::new(),
    }
}

fn file_part() -> Part {
    Part {
        content: PartContent::Raw(base64::engine::general_purpose::STANDARD.encode(b"tck")),
        metadata: None,
        filename: Some("output.txt".into()),
        media_type: Some("text/plain".into()),
    }
}

fn failed(err: crate::error::Error) -> ExecutorError {
    ExecutorError::Failed(err.to_string())
}

/// Working, one text artifact, completed.
async fn lifecycle(events: &EventSink, text: &str) -> Result<(), ExecutorError> {
    events
        .status(TaskState::Working, None)
        .await
        .map_err(failed)?;
    events
        .artifact(artifact(vec![Part::text(text)]), false, false)
        .await
        .map_err(failed)?;
    events
        .status(TaskState::Completed, None)
        .await
        .map_err(failed)
}

#[async_trait]
impl Executor for TckFixture {
    fn skills(&self) -> Vec<AgentSkill> {
        vec![AgentSkill {
            id: "tck".into(),
            name: "TCK conformance".into(),
            description: "Behaves as the A2A TCK scenarios ask, keyed on the messageId prefix"
                .into(),
            tags: vec!["tck".into()],
            examples: Vec::new(),
        }]
    }

    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), ExecutorError> {
        let id = ctx.message.message_id.as_str();
        let complete = |events: &EventSink| {
            let events = events.clone();
            async move {
                events
                    .status(TaskState::Completed, None)
                    .await
                    .map_err(failed)
            }
        };
        // Longest prefixes first where one prefix extends another.
        if id.starts_with("tck-stream-artifact-chunked") {
            events
                .status(TaskState::Working, None)
                .await
                .map_err(failed)?;
            let mut chunk = artifact(vec![Part::text("chunk-1 ")]);
            events
                .artifact(chunk.clone(), false, false)
                .await
                .map_err(failed)?;
            chunk.parts = vec![Part::text("chunk-2")];
            events.artifact(chunk, true, true).await.map_err(failed)?;
            complete(&events).await
        } else if id.starts_with("test-resubscribe-message-id") {
            events
                .status(TaskState::Working, None)
                .await
                .map_err(failed)?;
            tokio::select! {
                _ = tokio::time::sleep(LONG_RUNNING) => complete(&events).await,
                _ = ctx.cancel.cancelled() => Ok(()),
            }
        } else if id.starts_with("tck-stream-artifact-text") {
            lifecycle(&events, "Streamed text content").await
        } else if id.starts_with("tck-stream-artifact-file") {
            events
                .status(TaskState::Working, None)
                .await
                .map_err(failed)?;
            events
                .artifact(artifact(vec![file_part()]), false, false)
                .await
                .map_err(failed)?;
            complete(&events).await
        } else if id.starts_with("tck-stream-ordering-001") {
            lifecycle(&events, "Ordered output").await
        } else if id.starts_with("tck-stream-001") {
            lifecycle(&events, "Stream hello from TCK").await
        } else if id.starts_with("tck-stream-002") {
            complete(&events).await
        } else if id.starts_with("tck-stream-003") {
            lifecycle(&events, "Stream task lifecycle").await
        } else if id.starts_with("tck-artifact-file-url") {
            let part = Part {
                content: PartContent::Url("https://example.com/output.txt".into()),
                metadata: None,
                filename: Some("output.txt".into()),
                media_type: Some("text/plain".into()),
            };
            events
                .artifact(artifact(vec![part]), false, false)
                .await
                .map_err(failed)?;
            complete(&events).await
        } else if id.starts_with("tck-artifact-file") {
            events
                .artifact(artifact(vec![file_part()]), false, false)
                .await
                .map_err(failed)?;
            complete(&events).await
        } else if id.starts_with("tck-artifact-text") {
            let part = Part::text("Generated text content");
            events
                .artifact(artifact(vec![part]), false, false)
                .await
                .map_err(failed)?;
            complete(&events).await
        } else if id.starts_with("tck-artifact-data") {
            let part = Part {
                content: PartContent::Data(serde_json::json!({"key": "value", "count": 42})),
                metadata: None,
                filename: None,
                media_type: None,
            };
            events
                .artifact(artifact(vec![part]), false, false)
                .await
                .map_err(failed)?;
            complete(&events).await
        } else if id.starts_with("tck-message-response") {
            let message = events.agent_text("Direct message response");
            events.message(message).await.map_err(failed)
        } else if id.starts_with("tck-input-required") {
            let message = events.agent_text("More input is required");
            events
                .status(TaskState::InputRequired, Some(message))
                .await
                .map_err(failed)
        } else if id.starts_with("tck-reject-task") {
            Err(ExecutorError::Rejected("rejected".into()))
        } else if id.starts_with("tck-complete-task") {
            let message = events.agent_text("Hello from TCK");
            events
                .status(TaskState::Completed, Some(message))
                .await
                .map_err(failed)
        } else {
            let message = events.agent_text(&format!("Unhandled messageId prefix: {id}"));
            events
                .status(TaskState::Completed, Some(message))
                .await
                .map_err(failed)
        }
    }
}

/// The fixture's service: the TCK executor over an in-memory store, push notifications on
/// (loopback webhooks allowed, as the TCK's receiver runs on this machine), at `url`.
pub fn service(url: &str, listen: std::net::SocketAddr) -> crate::service::A2aService {
    let options = crate::card::CardOptions {
        name: "Lumina A2A TCK fixture".into(),
        description:
            "Lumina's A2A server with the TCK fixture executor in place of the agent runtime".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        url: url.to_owned(),
        listen: Some(listen),
        url_setting: "--public-url".into(),
        // The fixture reads only the messageId, so it takes any media type. (The TCK's
        // CORE-SEND-003 at the pinned commit expects an unknown media type to succeed; the
        // ContentTypeNotSupportedError path is covered by this crate's tests.)
        input_modes: vec!["*/*".into()],
        output_modes: vec!["text/plain".into(), "application/json".into()],
        push_notifications: true,
        bearer_auth: false,
        streaming: true,
    };
    let card = crate::card::CardDocument::build(&options, TckFixture.skills());
    let push = crate::push::PushSender::new(crate::push::PushOptions {
        allow_loopback: true,
        ..Default::default()
    });
    crate::service::A2aService::new(
        std::sync::Arc::new(crate::store::MemoryTaskStore::new()),
        std::sync::Arc::new(TckFixture),
        card,
        Some(push),
    )
}

/// Serves the fixture on `listener` (JSON-RPC at `/`) until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    public_url: Option<String>,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let url = public_url.unwrap_or_else(|| format!("http://{addr}"));
    let service = service(&url, addr);
    let app = crate::http::router(
        service.clone(),
        std::sync::Arc::new(crate::http::OpenAccess),
        "/",
    );
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await;
    service.shutdown();
    result
}
