//! Argument parsing shared by the built-in tools.
//!
//! serde's own messages do not say which field was wrong ("invalid type: integer `5`,
//! expected a string"), so arguments are first checked against the tool's JSON schema
//! (the subset the built-ins use: `type`, `required`, `properties`,
//! `additionalProperties: false`, `items`, `enum`, `minimum`) to produce a message that names
//! the field, then deserialized into the tool's typed argument struct.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ToolOutput;

/// Validates `args` against `schema` and deserializes them; the error is a ready-to-return
/// tool output naming the offending field.
pub fn parse<T: DeserializeOwned>(
    tool: &str,
    schema: &Value,
    args: Value,
) -> Result<T, ToolOutput> {
    // Some models send `null` instead of `{}` for a call without arguments.
    let args = if args.is_null() {
        Value::Object(Default::default())
    } else {
        args
    };
    if let Err(problem) = validate(schema, &args, "") {
        return Err(invalid(tool, &problem.to_string()));
    }
    serde_json::from_value(args).map_err(|e| invalid(tool, &e.to_string()))
}

fn invalid(tool: &str, problem: &str) -> ToolOutput {
    ToolOutput::error(format!("invalid arguments for {tool}: {problem}"))
}

/// Where arguments break the schema; the message names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum Mismatch {
    #[error("arguments must be a JSON {expected}, got {got}")]
    Arguments { expected: String, got: &'static str },
    #[error("field `{path}` must be {}, got {got}", article(.expected))]
    Type {
        path: String,
        expected: String,
        got: &'static str,
    },
    #[error("field `{path}` must be one of {}, got {value}", .allowed.join(", "))]
    NotAllowed {
        path: String,
        allowed: Vec<String>,
        value: Value,
    },
    #[error("field `{path}` must be at least {min}, got {value}")]
    TooSmall {
        path: String,
        min: f64,
        value: Value,
    },
    #[error("missing required field `{0}`")]
    Missing(String),
    #[error("unknown field `{field}` (expected one of: {})", .known.join(", "))]
    Unknown { field: String, known: Vec<String> },
}

/// Checks `value` against the schema subset; `path` is the field path so far (`todos[2].status`).
fn validate(schema: &Value, value: &Value, path: &str) -> Result<(), Mismatch> {
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        if !has_type(value, expected) {
            let (expected, got) = (expected.to_string(), kind(value));
            return Err(if path.is_empty() {
                Mismatch::Arguments { expected, got }
            } else {
                Mismatch::Type {
                    path: path.to_string(),
                    expected,
                    got,
                }
            });
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            return Err(Mismatch::NotAllowed {
                path: path.to_string(),
                allowed: allowed.iter().map(Value::to_string).collect(),
                value: value.clone(),
            });
        }
    }
    if let (Some(min), Some(n)) = (
        schema.get("minimum").and_then(Value::as_f64),
        value.as_f64(),
    ) {
        if n < min {
            return Err(Mismatch::TooSmall {
                path: path.to_string(),
                min,
                value: value.clone(),
            });
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    return Err(Mismatch::Missing(join(path, name)));
                }
            }
        }
        let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
        for (name, field) in object {
            match properties.and_then(|p| p.get(name)) {
                Some(field_schema) => validate(field_schema, field, &join(path, name))?,
                None if closed => {
                    let mut known: Vec<String> = properties
                        .map(|p| p.keys().cloned().collect())
                        .unwrap_or_default();
                    known.sort_unstable();
                    return Err(Mismatch::Unknown {
                        field: join(path, name),
                        known,
                    });
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, item) in array.iter().enumerate() {
            validate(items, item, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

fn has_type(value: &Value, expected: &str) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a fractional number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn article(ty: &str) -> String {
    match ty {
        "integer" | "array" | "object" => format!("an {ty}"),
        _ => format!("a {ty}"),
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Args {
        path: String,
        limit: Option<u64>,
        items: Option<Vec<Item>>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Item {
        status: String,
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1},
                "items": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"status": {"type": "string", "enum": ["a", "b"]}},
                    "required": ["status"],
                    "additionalProperties": false
                }}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn err(args: Value) -> String {
        parse::<Args>("t", &schema(), args).unwrap_err().content
    }

    #[test]
    fn valid_arguments_deserialize() {
        let args: Args = parse("t", &schema(), json!({"path": "a", "limit": 3})).unwrap();
        assert_eq!(
            args,
            Args {
                path: "a".into(),
                limit: Some(3),
                items: None
            }
        );
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            err(json!({})),
            "invalid arguments for t: missing required field `path`"
        );
        assert_eq!(
            err(json!({"path": 5})),
            "invalid arguments for t: field `path` must be a string, got an integer"
        );
        assert_eq!(
            err(json!({"path": "a", "limit": 0})),
            "invalid arguments for t: field `limit` must be at least 1, got 0"
        );
        assert_eq!(
            err(json!({"path": "a", "limit": 1.5})),
            "invalid arguments for t: field `limit` must be an integer, got a fractional number"
        );
        assert_eq!(
            err(json!({"path": "a", "extra": true})),
            "invalid arguments for t: unknown field `extra` (expected one of: items, limit, path)"
        );
        assert_eq!(
            err(json!("nope")),
            "invalid arguments for t: arguments must be a JSON object, got a string"
        );
        assert_eq!(
            err(json!(null)),
            "invalid arguments for t: missing required field `path`"
        );
    }

    #[test]
    fn nested_errors_carry_the_path() {
        assert_eq!(
            err(json!({"path": "a", "items": [{"status": "a"}, {"status": "c"}]})),
            "invalid arguments for t: field `items[1].status` must be one of \"a\", \"b\", got \"c\""
        );
        assert_eq!(
            err(json!({"path": "a", "items": [{}]})),
            "invalid arguments for t: missing required field `items[0].status`"
        );
    }
}
