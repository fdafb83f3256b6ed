//! The MCP tools that expose Lumina: start a session, prompt it (and wait for the answer),
//! read what happened, list sessions. Each call opens its own WebSocket connection to the
//! backend, with the configured credential or the HTTP request's bearer.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use lumina_client::protocol::methods::SessionCreateParams;
use lumina_client::{Client, Notifications};
use lumina_config::Secret;
use lumina_mcp_server::{
    code, CallToolResult, Content, ErrorObject, Handler, Implementation, RequestContext, Tool,
};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::backend::{BackendError, Target};
use super::prompt::{self, PromptRequest, DEFAULT_TIMEOUT, MAX_TIMEOUT};
use super::transcript;

/// The bearer an HTTP request brought (checked by the backend); never printed.
#[derive(Debug)]
pub struct Bearer(pub Secret);

/// Events shown by `lumina_session_read` without `after_seq`.
const RECENT_EVENTS: u64 = 400;

pub struct LuminaTools {
    pub target: Target,
    /// `project_root` of new sessions when the caller gives none (local backends only).
    pub default_project_root: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartArgs {
    project_root: Option<String>,
    title: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptArgs {
    session_id: String,
    prompt: String,
    wait: Option<bool>,
    timeout_ms: Option<u64>,
    request_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    session_id: String,
    after_seq: Option<u64>,
}

fn parse<T: DeserializeOwned>(args: Map<String, Value>) -> Result<T, ErrorObject> {
    serde_json::from_value(Value::Object(args))
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("invalid arguments: {e}")))
}

fn tool_list() -> Vec<Tool> {
    vec![
        Tool::new(
            "lumina_session_start",
            "Start a new Lumina agent session. Returns its session id.",
            json!({"type": "object", "additionalProperties": false, "properties": {
                "project_root": {"type": "string", "description": "Absolute path of the project the agent works in"},
                "title": {"type": "string", "description": "Session title"}
            }}),
        ),
        Tool::new(
            "lumina_prompt",
            "Send a prompt to a Lumina session. By default waits for the run to finish and returns the agent's final answer; permission requests are answered by the session's permission mode (denials are reported).",
            json!({"type": "object", "additionalProperties": false, "required": ["session_id", "prompt"], "properties": {
                "session_id": {"type": "string"},
                "prompt": {"type": "string"},
                "wait": {"type": "boolean", "default": true, "description": "Wait for the run to end"},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Longest wait (default 600000)"},
                "request_id": {"type": "string", "description": "Idempotency key: a retry with the same id returns the original run"}
            }}),
        ),
        Tool::new(
            "lumina_session_read",
            "Read a Lumina session's recent visible events as text: messages, tool calls and results, run outcomes.",
            json!({"type": "object", "additionalProperties": false, "required": ["session_id"], "properties": {
                "session_id": {"type": "string"},
                "after_seq": {"type": "integer", "minimum": 0, "description": "Only events after this seq (default: the most recent ones)"}
            }}),
        ),
        Tool::new(
            "lumina_sessions",
            "List Lumina sessions.",
            Tool::no_arguments(),
        ),
    ]
}

impl LuminaTools {
    async fn connect(&self, ctx: &RequestContext) -> Result<(Client, Notifications), BackendError> {
        let bearer = ctx.auth::<Bearer>();
        self.target.connect(bearer.as_ref().map(|b| &b.0)).await
    }

    async fn start(
        &self,
        args: StartArgs,
        ctx: &RequestContext,
    ) -> Result<CallToolResult, BackendError> {
        let (client, _notes) = self.connect(ctx).await?;
        let project_root = args.project_root.or_else(|| {
            self.default_project_root
                .as_ref()
                .map(|p| p.display().to_string())
        });
        let info = client
            .session_create(&SessionCreateParams {
                project_root,
                title: args.title,
            })
            .await?;
        client.close();
        let structured =
            json!({"session_id": info.id, "title": info.title, "project_root": info.project_root});
        Ok(CallToolResult::text(info.id.clone()).with_structured(structured))
    }

    async fn prompt(
        &self,
        args: PromptArgs,
        ctx: &RequestContext,
    ) -> Result<CallToolResult, BackendError> {
        let (client, mut notes) = self.connect(ctx).await?;
        let timeout = args
            .timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_TIMEOUT)
            .min(MAX_TIMEOUT);
        let request = PromptRequest {
            session_id: args.session_id,
            prompt: args.prompt,
            request_id: args
                .request_id
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            wait: args.wait.unwrap_or(true),
            timeout,
        };
        let outcome = prompt::run(&client, &mut notes, request, ctx).await;
        client.close();
        let outcome = outcome?;
        let mut status = format!("run {}: {}", outcome.run_id, outcome.status);
        for denial in &outcome.denials {
            status.push_str(&format!(
                "\npermission denied for {} ({}){}",
                if denial.tool.is_empty() {
                    "a tool"
                } else {
                    &denial.tool
                },
                denial.by,
                denial
                    .reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ));
        }
        let failed = matches!(outcome.status.as_str(), "failed" | "interrupted");
        let mut result = CallToolResult::new(vec![
            Content::text(outcome.text.clone()),
            Content::text(status),
        ]);
        result.is_error = failed;
        Ok(result.with_structured(serde_json::to_value(&outcome).unwrap_or(Value::Null)))
    }

    async fn read(
        &self,
        args: ReadArgs,
        ctx: &RequestContext,
    ) -> Result<CallToolResult, BackendError> {
        let (client, _notes) = self.connect(ctx).await?;
        let after = match args.after_seq {
            Some(after) => after,
            None => {
                let info = client.session_info(&args.session_id).await?;
                info.session.head_seq.saturating_sub(RECENT_EVENTS)
            }
        };
        let mut lines = Vec::new();
        let mut last = after;
        loop {
            let page = client.session_events(&args.session_id, last, None).await?;
            let before = last;
            for frame in &page.events {
                last = last.max(frame.seq);
                lines.extend(transcript::line(frame));
            }
            if !page.more || last == before {
                break;
            }
        }
        client.close();
        if lines.is_empty() {
            lines.push(format!("(no visible events after seq {after})"));
        }
        lines.push(format!("next after_seq: {last}"));
        let structured = json!({"session_id": args.session_id, "next_after_seq": last});
        Ok(CallToolResult::text(lines.join("\n")).with_structured(structured))
    }

    async fn sessions(&self, ctx: &RequestContext) -> Result<CallToolResult, BackendError> {
        let (client, _notes) = self.connect(ctx).await?;
        let sessions = client.session_list(false).await?;
        client.close();
        let text = if sessions.is_empty() {
            "(no sessions)".to_string()
        } else {
            sessions
                .iter()
                .map(|s| format!("{}  {}  {}  ({})", s.id, s.status, s.title, s.project_root))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let structured = json!({"sessions": sessions.iter().map(|s| json!({
            "session_id": s.id, "title": s.title, "status": s.status,
            "project_root": s.project_root, "head_seq": s.head_seq, "updated_at_ms": s.updated_at_ms,
        })).collect::<Vec<_>>()});
        Ok(CallToolResult::text(text).with_structured(structured))
    }
}

#[async_trait]
impl Handler for LuminaTools {
    fn server_info(&self) -> Implementation {
        Implementation::new("lumina", env!("CARGO_PKG_VERSION"))
    }

    fn instructions(&self) -> Option<String> {
        Some(
            "Lumina is a coding agent. Start a session with lumina_session_start, give it work with \
             lumina_prompt (it waits for the answer by default), follow a session with \
             lumina_session_read and find sessions with lumina_sessions."
                .into(),
        )
    }

    async fn list_tools(&self, _ctx: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
        Ok(tool_list())
    }

    async fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        ctx: RequestContext,
    ) -> Result<CallToolResult, ErrorObject> {
        let outcome = match name {
            "lumina_session_start" => self.start(parse(args)?, &ctx).await,
            "lumina_prompt" => self.prompt(parse(args)?, &ctx).await,
            "lumina_session_read" => self.read(parse(args)?, &ctx).await,
            "lumina_sessions" => self.sessions(&ctx).await,
            other => {
                return Err(ErrorObject::new(
                    code::INVALID_PARAMS,
                    format!("unknown tool: {other}"),
                ))
            }
        };
        Ok(outcome.unwrap_or_else(|error| {
            tracing::warn!(tool = name, %error, "lumina mcp tool failed");
            CallToolResult::error(error.to_string())
        }))
    }
}
