//! The application side of an MCP server: implement [`Handler`]; the library does the
//! protocol (lifecycle, capabilities, errors, cancellation, transports).

use async_trait::async_trait;
use lumina_mcp_proto::jsonrpc::{code, ErrorObject};
use serde_json::{Map, Value};

use crate::context::RequestContext;
use crate::types::{
    CallToolResult, Completion, Features, GetPromptResult, Implementation, Prompt, Resource,
    ResourceContents, ResourceTemplate, Tool,
};

/// What a server offers. Only [`Handler::server_info`] and the tool methods are needed for a
/// tools-only server; everything else has a default that answers "nothing here". Declare
/// optional features in [`Handler::features`]: capabilities are derived from it.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// `serverInfo` in `initialize` (and `_meta` of stateless results).
    fn server_info(&self) -> Implementation;

    /// Guidance for the client's model (`instructions` in `initialize`).
    fn instructions(&self) -> Option<String> {
        None
    }

    /// The features this handler serves (default: tools and logging).
    fn features(&self) -> Features {
        Features::default()
    }

    async fn list_tools(&self, _ctx: &RequestContext) -> Result<Vec<Tool>, ErrorObject> {
        Ok(Vec::new())
    }

    /// Runs a listed tool (the library answers unknown names with -32602 itself). Failures
    /// of the tool belong in the result (`CallToolResult::error`), not in `Err`.
    async fn call_tool(
        &self,
        name: &str,
        _arguments: Map<String, Value>,
        _ctx: RequestContext,
    ) -> Result<CallToolResult, ErrorObject> {
        Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!("unknown tool: {name}"),
        ))
    }

    async fn list_resources(&self, _ctx: &RequestContext) -> Result<Vec<Resource>, ErrorObject> {
        Ok(Vec::new())
    }

    async fn list_resource_templates(
        &self,
        _ctx: &RequestContext,
    ) -> Result<Vec<ResourceTemplate>, ErrorObject> {
        Ok(Vec::new())
    }

    async fn read_resource(
        &self,
        uri: &str,
        ctx: &RequestContext,
    ) -> Result<Vec<ResourceContents>, ErrorObject> {
        Err(resource_not_found(uri, ctx))
    }

    async fn subscribe(&self, _uri: &str, _ctx: &RequestContext) -> Result<(), ErrorObject> {
        Ok(())
    }

    async fn unsubscribe(&self, _uri: &str, _ctx: &RequestContext) -> Result<(), ErrorObject> {
        Ok(())
    }

    async fn list_prompts(&self, _ctx: &RequestContext) -> Result<Vec<Prompt>, ErrorObject> {
        Ok(Vec::new())
    }

    async fn get_prompt(
        &self,
        name: &str,
        _arguments: Map<String, Value>,
        _ctx: &RequestContext,
    ) -> Result<GetPromptResult, ErrorObject> {
        Err(ErrorObject::new(
            code::INVALID_PARAMS,
            format!("unknown prompt: {name}"),
        ))
    }

    /// `completion/complete`: `reference` is the `ref` object (`ref/prompt` or
    /// `ref/resource`), `argument` is `{name, value}`, `context` the optional
    /// `{arguments}` already filled in.
    async fn complete(
        &self,
        _reference: &Value,
        _argument: &Value,
        _context: Option<&Value>,
        _ctx: &RequestContext,
    ) -> Result<Completion, ErrorObject> {
        Ok(Completion::default())
    }

    /// A client notification the library does not handle itself (e.g.
    /// `notifications/roots/list_changed`).
    async fn on_notification(&self, _method: &str, _params: Option<&Value>) {}
}

/// The "resource not found" error of the request's protocol revision (-32002 before
/// 2026-07-28, -32602 since).
pub fn resource_not_found(uri: &str, ctx: &RequestContext) -> ErrorObject {
    let code = if ctx.is_stateless() {
        code::INVALID_PARAMS
    } else {
        code::RESOURCE_NOT_FOUND
    };
    let mut error = ErrorObject::new(code, format!("resource not found: {uri}"));
    error.data = Some(serde_json::json!({ "uri": uri }));
    error
}
