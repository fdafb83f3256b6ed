//! `lumina-mcp-everything`: the fixture server the MCP conformance suite's server scenarios
//! expect (tools, resources, prompts and completions named `test_*`). Fixture data only; all
//! protocol code is the library's.
//!
//! `lumina-mcp-everything --listen 127.0.0.1:PORT` serves Streamable HTTP at `/mcp` and prints
//! the bound address on the first stdout line; `--stdio` serves stdin/stdout.

use std::process::ExitCode;
use std::sync::Arc;

use async_trait::async_trait;
use lumina_mcp_server::{
    code, CallToolResult, Completion, Content, ErrorObject, Features, GetPromptResult, Handler,
    Implementation, LogLevel, Prompt, PromptMessage, RequestContext, Resource, ResourceContents,
    ResourceTemplate, Role, Tool,
};
use serde_json::{json, Map, Value};

mod fixtures;

use fixtures::{
    elicit, image, prompts, resources, sep1034_schema, sep1330_schema, string_arg, templates,
    tools, PNG, STEP, WAV,
};

struct Everything;

#[async_trait]
impl Handler for Everything {
    fn server_info(&self) -> Implementation {
        Implementation::new("lumina-mcp-everything", env!("CARGO_PKG_VERSION"))
    }

    fn instructions(&self) -> Option<String> {
        Some("Fixture server for the MCP conformance suite.".into())
    }

    fn features(&self) -> Features {
        Features::all()
    }

    async fn list_tools(&self, _ctx: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
        Ok(tools())
    }

    async fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        ctx: RequestContext,
    ) -> Result<CallToolResult, ErrorObject> {
        Ok(match name {
            "test_simple_text" => {
                CallToolResult::text("This is a simple text response for testing.")
            }
            "test_image_content" => CallToolResult::new(vec![image()]),
            "test_audio_content" => CallToolResult::new(vec![Content::Audio {
                data: WAV.into(),
                mime_type: "audio/wav".into(),
            }]),
            "test_embedded_resource" => CallToolResult::new(vec![Content::Resource {
                resource: ResourceContents::text(
                    "test://embedded-resource",
                    "text/plain",
                    "This is an embedded resource content.",
                ),
            }]),
            "test_multiple_content_types" => CallToolResult::new(vec![
                Content::text("Multiple content types test:"),
                image(),
                Content::Resource {
                    resource: ResourceContents::text(
                        "test://mixed-content-resource",
                        "application/json",
                        r#"{"test":"data","value":123}"#,
                    ),
                },
            ]),
            "test_tool_with_logging" => {
                for (i, text) in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ]
                .into_iter()
                .enumerate()
                {
                    if i > 0 {
                        tokio::time::sleep(STEP).await;
                    }
                    ctx.log(LogLevel::Info, Some("test_tool_with_logging"), text);
                }
                CallToolResult::text("Tool with logging executed successfully")
            }
            "test_error_handling" => {
                CallToolResult::error("This tool intentionally returns an error for testing")
            }
            "test_tool_with_progress" => {
                for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(STEP).await;
                    }
                    ctx.progress(progress, Some(100.0), None);
                }
                CallToolResult::text("Tool with progress executed successfully")
            }
            "test_sampling" => {
                let prompt = string_arg(&args, "prompt")?;
                let params = json!({
                    "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
                    "maxTokens": 100,
                });
                match ctx.create_message(params).await {
                    Ok(reply) => {
                        let text = reply
                            .pointer("/content/text")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        CallToolResult::text(format!("LLM response: {text}"))
                    }
                    Err(e) => CallToolResult::error(format!("sampling failed: {e}")),
                }
            }
            "test_elicitation" => {
                let message = string_arg(&args, "message")?;
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "username": { "type": "string", "description": "User's response" },
                        "email": { "type": "string", "description": "User's email address" }
                    },
                    "required": ["username", "email"]
                });
                elicit(&ctx, message, schema, "User response").await
            }
            "test_elicitation_sep1034_defaults" => {
                let message = "Please review and update the form fields with defaults";
                elicit(&ctx, message, sep1034_schema(), "Elicitation completed").await
            }
            "test_elicitation_sep1330_enums" => {
                let message = "Please select options from the enum fields";
                elicit(&ctx, message, sep1330_schema(), "Elicitation completed").await
            }
            "test_reconnection" => {
                // SEP-1699: end the stream first; the answer waits for the client's resume.
                ctx.close_sse_stream();
                tokio::time::sleep(STEP * 2).await;
                CallToolResult::text("Reconnection test completed successfully")
            }
            "json_schema_2020_12_tool" => {
                CallToolResult::text(format!("Received: {}", Value::Object(args)))
            }
            other => {
                return Err(ErrorObject::new(
                    code::INVALID_PARAMS,
                    format!("unknown tool: {other}"),
                ))
            }
        })
    }

    async fn list_resources(&self, _ctx: &RequestContext) -> Result<Vec<Resource>, ErrorObject> {
        Ok(resources())
    }

    async fn list_resource_templates(
        &self,
        _ctx: &RequestContext,
    ) -> Result<Vec<ResourceTemplate>, ErrorObject> {
        Ok(templates())
    }

    async fn read_resource(
        &self,
        uri: &str,
        ctx: &RequestContext,
    ) -> Result<Vec<ResourceContents>, ErrorObject> {
        let contents = match uri {
            "test://static-text" => ResourceContents::text(
                uri,
                "text/plain",
                "This is the content of the static text resource.",
            ),
            "test://static-binary" => ResourceContents::blob(uri, "image/png", PNG),
            "test://watched-resource" => {
                ResourceContents::text(uri, "text/plain", "Watched resource content")
            }
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
                .filter(|id| !id.is_empty() && !id.contains('/'))
            {
                Some(id) => {
                    let body = json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") });
                    ResourceContents::text(uri, "application/json", body.to_string())
                }
                None => return Err(lumina_mcp_server::resource_not_found(uri, ctx)),
            },
        };
        Ok(vec![contents])
    }

    async fn list_prompts(&self, _ctx: &RequestContext) -> Result<Vec<Prompt>, ErrorObject> {
        Ok(prompts())
    }

    async fn get_prompt(
        &self,
        name: &str,
        args: Map<String, Value>,
        _ctx: &RequestContext,
    ) -> Result<GetPromptResult, ErrorObject> {
        let user = |content: Content| PromptMessage {
            role: Role::User,
            content,
        };
        let messages = match name {
            "test_simple_prompt" => {
                vec![user(Content::text("This is a simple prompt for testing."))]
            }
            "test_prompt_with_arguments" => {
                let (a, b) = (string_arg(&args, "arg1")?, string_arg(&args, "arg2")?);
                vec![user(Content::text(format!(
                    "Prompt with arguments: arg1='{a}', arg2='{b}'"
                )))]
            }
            "test_prompt_with_embedded_resource" => {
                let uri = string_arg(&args, "resourceUri")?;
                vec![
                    user(Content::Resource {
                        resource: ResourceContents::text(
                            uri,
                            "text/plain",
                            "Embedded resource content for testing.",
                        ),
                    }),
                    user(Content::text("Please process the embedded resource above.")),
                ]
            }
            "test_prompt_with_image" => {
                vec![
                    user(image()),
                    user(Content::text("Please analyze the image above.")),
                ]
            }
            other => {
                return Err(ErrorObject::new(
                    code::INVALID_PARAMS,
                    format!("unknown prompt: {other}"),
                ))
            }
        };
        Ok(GetPromptResult {
            description: None,
            messages,
        })
    }

    async fn complete(
        &self,
        _reference: &Value,
        argument: &Value,
        _context: Option<&Value>,
        _ctx: &RequestContext,
    ) -> Result<Completion, ErrorObject> {
        let typed = argument
            .get("value")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let values: Vec<String> = ["paris", "park", "party"]
            .into_iter()
            .filter(|v| v.starts_with(typed))
            .map(String::from)
            .collect();
        Ok(Completion {
            total: Some(values.len() as u64),
            has_more: Some(false),
            values,
        })
    }
}

async fn run(args: Vec<String>) -> Result<(), String> {
    let handler: Arc<dyn Handler> = Arc::new(Everything);
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["--stdio"] => lumina_mcp_server::serve_process_stdio(handler, terminated())
            .await
            .map_err(|e| e.to_string()),
        ["--listen", addr] => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot bind {addr}: {e}"))?;
            let bound = listener.local_addr().map_err(|e| e.to_string())?;
            println!("{bound}");
            let options = lumina_mcp_server::http::HttpOptions::default();
            lumina_mcp_server::http::serve(listener, handler, options, terminated())
                .await
                .map_err(|e| e.to_string())
        }
        _ => Err("usage: lumina-mcp-everything (--stdio | --listen HOST:PORT)".into()),
    }
}

/// Completes on SIGINT or SIGTERM.
async fn terminated() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn main() -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LUMINA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("lumina-mcp-everything: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(std::env::args().skip(1).collect())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lumina-mcp-everything: {e}");
            ExitCode::FAILURE
        }
    }
}
