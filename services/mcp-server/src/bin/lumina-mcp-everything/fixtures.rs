//! The fixture data of the conformance scenarios: tool list, schemas, media.

use std::time::Duration;

use lumina_mcp_server::{
    code, CallToolResult, Content, ErrorObject, Prompt, PromptArgument, RequestContext, Resource,
    ResourceTemplate, Tool,
};
use serde_json::{json, Map, Value};

/// A 1×1 red PNG.
pub(crate) const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// An empty 8 kHz mono WAV.
pub(crate) const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";
pub(crate) const STEP: Duration = Duration::from_millis(50);

pub(crate) fn image() -> Content {
    Content::Image {
        data: PNG.into(),
        mime_type: "image/png".into(),
    }
}

pub(crate) fn string_arg<'a>(
    args: &'a Map<String, Value>,
    name: &str,
) -> Result<&'a str, ErrorObject> {
    args.get(name).and_then(Value::as_str).ok_or_else(|| {
        ErrorObject::new(
            code::INVALID_PARAMS,
            format!("`{name}` (string) is required"),
        )
    })
}

pub(crate) fn tools() -> Vec<Tool> {
    let none = Tool::no_arguments;
    let string_schema = |name: &str, description: &str| {
        json!({
            "type": "object",
            "properties": { name: { "type": "string", "description": description } },
            "required": [name],
        })
    };
    vec![
        Tool::new("test_simple_text", "Returns simple text", none()),
        Tool::new("test_image_content", "Returns a PNG image", none()),
        Tool::new("test_audio_content", "Returns WAV audio", none()),
        Tool::new(
            "test_embedded_resource",
            "Returns an embedded resource",
            none(),
        ),
        Tool::new(
            "test_multiple_content_types",
            "Returns text, image and resource",
            none(),
        ),
        Tool::new(
            "test_tool_with_logging",
            "Logs three messages while it runs",
            none(),
        ),
        Tool::new("test_error_handling", "Always fails", none()),
        Tool::new(
            "test_tool_with_progress",
            "Reports progress 0, 50, 100",
            none(),
        ),
        Tool::new(
            "test_sampling",
            "Asks the client's LLM",
            string_schema("prompt", "The prompt to send to the LLM"),
        ),
        Tool::new(
            "test_elicitation",
            "Asks the user for input",
            string_schema("message", "The message to show the user"),
        ),
        Tool::new(
            "test_elicitation_sep1034_defaults",
            "Elicitation with defaults",
            none(),
        ),
        Tool::new(
            "test_elicitation_sep1330_enums",
            "Elicitation with enum variants",
            none(),
        ),
        Tool::new(
            "test_reconnection",
            "Closes its SSE stream before it answers",
            none(),
        ),
        Tool::new(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "type": "object",
                        "properties": { "street": { "type": "string" }, "city": { "type": "string" } }
                    }
                },
                "properties": {
                    "name": { "type": "string" },
                    "address": { "$ref": "#/$defs/address" }
                },
                "additionalProperties": false
            }),
        ),
    ]
}

pub(crate) fn elicitation_text(prefix: &str, answer: &Value) -> String {
    let action = answer
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let content = answer.get("content").cloned().unwrap_or(Value::Null);
    format!("{prefix}: action={action}, content={content}")
}

pub(crate) async fn elicit(
    ctx: &RequestContext,
    message: &str,
    schema: Value,
    prefix: &str,
) -> CallToolResult {
    let params = json!({ "message": message, "requestedSchema": schema });
    match ctx.elicit(params).await {
        Ok(answer) => CallToolResult::text(elicitation_text(prefix, &answer)),
        Err(e) => CallToolResult::error(format!("elicitation failed: {e}")),
    }
}

pub(crate) fn sep1034_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "default": "John Doe" },
            "age": { "type": "integer", "default": 30 },
            "score": { "type": "number", "default": 95.5 },
            "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
            "verified": { "type": "boolean", "default": true }
        }
    })
}

pub(crate) fn sep1330_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
            "titledSingle": { "type": "string", "oneOf": [
                { "const": "value1", "title": "First Option" },
                { "const": "value2", "title": "Second Option" },
                { "const": "value3", "title": "Third Option" }
            ] },
            "legacyEnum": { "type": "string", "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"] },
            "untitledMulti": { "type": "array",
                "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
            "titledMulti": { "type": "array", "items": { "anyOf": [
                { "const": "value1", "title": "First Choice" },
                { "const": "value2", "title": "Second Choice" },
                { "const": "value3", "title": "Third Choice" }
            ] } }
        }
    })
}

pub(crate) fn resources() -> Vec<Resource> {
    let resource = |uri: &str, name: &str, description: &str, mime: &str| Resource {
        uri: uri.into(),
        name: name.into(),
        title: None,
        description: Some(description.into()),
        mime_type: Some(mime.into()),
    };
    vec![
        resource(
            "test://static-text",
            "Static Text Resource",
            "A static text resource",
            "text/plain",
        ),
        resource(
            "test://static-binary",
            "Static Binary Resource",
            "A static PNG image",
            "image/png",
        ),
        resource(
            "test://watched-resource",
            "Watched Resource",
            "A resource to subscribe to",
            "text/plain",
        ),
    ]
}

pub(crate) fn templates() -> Vec<ResourceTemplate> {
    vec![ResourceTemplate {
        uri_template: "test://template/{id}/data".into(),
        name: "Template Resource".into(),
        title: None,
        description: Some("Data for an id".into()),
        mime_type: Some("application/json".into()),
    }]
}

pub(crate) fn prompts() -> Vec<Prompt> {
    let prompt = |name: &str, description: &str, args: &[(&str, &str)]| Prompt {
        name: name.into(),
        title: None,
        description: Some(description.into()),
        arguments: args
            .iter()
            .map(|(n, d)| PromptArgument {
                name: (*n).into(),
                description: Some((*d).into()),
                required: true,
            })
            .collect(),
    };
    vec![
        prompt("test_simple_prompt", "A simple prompt", &[]),
        prompt(
            "test_prompt_with_arguments",
            "A prompt with arguments",
            &[
                ("arg1", "First test argument"),
                ("arg2", "Second test argument"),
            ],
        ),
        prompt(
            "test_prompt_with_embedded_resource",
            "A prompt with an embedded resource",
            &[("resourceUri", "URI of the resource to embed")],
        ),
        prompt("test_prompt_with_image", "A prompt with an image", &[]),
    ]
}
