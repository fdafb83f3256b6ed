//! What the client does with server requests and notifications.
//!
//! Lumina runs MCP tools without a human in the loop, so elicitation is answered by a
//! non-interactive policy: accept with every field's schema `default`, or decline when a
//! required field has none. Sampling and roots are not offered (not in our capabilities).

use std::sync::atomic::Ordering;

use serde_json::{json, Map, Value};

use super::rpc::Rpc;
use crate::jsonrpc::{code, ErrorObject};

/// The answer to a server→client request.
pub(crate) fn answer(method: &str, params: Option<&Value>) -> Result<Value, ErrorObject> {
    match method {
        "ping" => Ok(json!({})),
        "elicitation/create" => Ok(elicit(params)),
        _ => Err(ErrorObject::new(
            code::METHOD_NOT_FOUND,
            format!("method not found: {method} (not supported by this client)"),
        )),
    }
}

/// Accepts a form elicitation with the schema's defaults; declines URL elicitations and
/// forms whose required fields have no default.
pub fn elicit(params: Option<&Value>) -> Value {
    let params = params.cloned().unwrap_or(Value::Null);
    if params.get("mode").and_then(Value::as_str) == Some("url") {
        return json!({"action": "decline"});
    }
    let schema = params.get("requestedSchema");
    let props = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let mut content = Map::new();
    for (name, prop) in props.into_iter().flatten() {
        if let Some(default) = prop.get("default") {
            content.insert(name.clone(), default.clone());
        }
    }
    let required = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    let missing: Vec<&str> = required.filter(|r| !content.contains_key(*r)).collect();
    if !missing.is_empty() {
        tracing::info!(fields = ?missing, "declining mcp elicitation: required fields without defaults");
        return json!({"action": "decline"});
    }
    json!({"action": "accept", "content": content})
}

pub(crate) fn notification(rpc: &Rpc, method: &str, params: Option<&Value>) {
    match method {
        "notifications/tools/list_changed" => {
            tracing::debug!(server = %rpc.label, "mcp tool list changed");
            rpc.tools_changed.store(true, Ordering::Release);
        }
        "notifications/message" => log_message(&rpc.label, params),
        "notifications/progress" | "notifications/cancelled" => {}
        other => tracing::debug!(server = %rpc.label, method = other, "ignoring mcp notification"),
    }
}

fn log_message(server: &str, params: Option<&Value>) {
    let level = params
        .and_then(|p| p.get("level"))
        .and_then(Value::as_str)
        .unwrap_or("info");
    let logger = params
        .and_then(|p| p.get("logger"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let data = params
        .and_then(|p| p.get("data"))
        .cloned()
        .unwrap_or(Value::Null);
    let data = match data {
        Value::String(s) => s,
        other => other.to_string(),
    };
    match level {
        "debug" => tracing::debug!(server, logger, data, "mcp server log"),
        "info" | "notice" => tracing::info!(server, logger, data, "mcp server log"),
        _ => tracing::warn!(server, logger, level, data, "mcp server log"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elicitation_takes_defaults() {
        let params = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "ok": {"type": "boolean", "default": true},
            "free": {"type": "string"}
        }}});
        assert_eq!(
            elicit(Some(&params)),
            json!({"action": "accept", "content": {
                "name": "John Doe", "age": 30, "score": 95.5, "status": "a", "ok": true
            }})
        );
        let required = json!({"requestedSchema": {"properties": {"x": {"type": "string"}}, "required": ["x"]}});
        assert_eq!(elicit(Some(&required)), json!({"action": "decline"}));
        assert_eq!(elicit(None), json!({"action": "accept", "content": {}}));
    }

    #[test]
    fn unsupported_requests_are_method_not_found() {
        assert_eq!(answer("ping", None), Ok(json!({})));
        for m in ["sampling/createMessage", "roots/list"] {
            assert_eq!(
                answer(m, None).map_err(|e| e.code),
                Err(code::METHOD_NOT_FOUND)
            );
        }
    }
}
