//! JSON-RPC 2.0 as MCP uses it: one message per frame (no batches since 2025-06-18).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request id: MCP allows numbers and strings (never null for requests).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    Num(i64),
    Str(String),
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => f.write_str(s),
        }
    }
}

/// Standard and MCP error codes.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Legacy resource-not-found (≤ 2025-11-25).
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// 2026-07-28: `MCP-Protocol-Version` header differs from `_meta`.
    pub const HEADER_MISMATCH: i64 = -32020;
    pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
}

impl std::fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

/// One JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: Id,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    Response {
        id: Id,
        result: Value,
    },
    Error {
        /// `None` when the server could not read the id (parse errors).
        id: Option<Id>,
        error: ErrorObject,
    },
}

impl Message {
    pub fn request(id: Id, method: impl Into<String>, params: Option<Value>) -> Self {
        Message::Request {
            id,
            method: method.into(),
            params,
        }
    }

    pub fn notification(method: impl Into<String>, params: Option<Value>) -> Self {
        Message::Notification {
            method: method.into(),
            params,
        }
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            _ => None,
        }
    }

    pub fn to_value(&self) -> Value {
        let mut obj = serde_json::Map::new();
        obj.insert("jsonrpc".into(), Value::from("2.0"));
        match self {
            Message::Request { id, method, params } => {
                obj.insert("id".into(), id_value(id));
                obj.insert("method".into(), Value::from(method.as_str()));
                if let Some(p) = params {
                    obj.insert("params".into(), p.clone());
                }
            }
            Message::Notification { method, params } => {
                obj.insert("method".into(), Value::from(method.as_str()));
                if let Some(p) = params {
                    obj.insert("params".into(), p.clone());
                }
            }
            Message::Response { id, result } => {
                obj.insert("id".into(), id_value(id));
                obj.insert("result".into(), result.clone());
            }
            Message::Error { id, error } => {
                obj.insert(
                    "id".into(),
                    id.as_ref().map(id_value).unwrap_or(Value::Null),
                );
                obj.insert(
                    "error".into(),
                    serde_json::to_value(error).unwrap_or(Value::Null),
                );
            }
        }
        Value::Object(obj)
    }

    /// Serialized on one line (stdio framing forbids embedded newlines; JSON escapes them).
    pub fn to_line(&self) -> String {
        self.to_value().to_string()
    }

    /// Reads one message; the error says what is wrong with it.
    pub fn from_value(v: Value) -> Result<Self, ErrorObject> {
        let Value::Object(mut obj) = v else {
            return Err(ErrorObject::new(
                code::INVALID_REQUEST,
                "a JSON-RPC message must be an object (batches are not supported)",
            ));
        };
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(ErrorObject::new(
                code::INVALID_REQUEST,
                "missing or wrong \"jsonrpc\": \"2.0\"",
            ));
        }
        let id = match obj.remove("id") {
            None | Some(Value::Null) => None,
            Some(v) => Some(serde_json::from_value::<Id>(v).map_err(|_| {
                ErrorObject::new(code::INVALID_REQUEST, "\"id\" must be a number or a string")
            })?),
        };
        if let Some(method) = obj.remove("method") {
            let Value::String(method) = method else {
                return Err(ErrorObject::new(
                    code::INVALID_REQUEST,
                    "\"method\" must be a string",
                ));
            };
            let params = obj.remove("params");
            return Ok(match id {
                Some(id) => Message::Request { id, method, params },
                None => Message::Notification { method, params },
            });
        }
        if let Some(error) = obj.remove("error") {
            let error = serde_json::from_value::<ErrorObject>(error).map_err(|_| {
                ErrorObject::new(code::INVALID_REQUEST, "malformed \"error\" object")
            })?;
            return Ok(Message::Error { id, error });
        }
        match (id, obj.remove("result")) {
            (Some(id), Some(result)) => Ok(Message::Response { id, result }),
            _ => Err(ErrorObject::new(
                code::INVALID_REQUEST,
                "a message needs \"method\", \"result\" or \"error\"",
            )),
        }
    }

    /// Parses one frame (a stdio line or an HTTP body).
    pub fn parse(text: &str) -> Result<Self, ErrorObject> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| ErrorObject::new(code::PARSE_ERROR, format!("invalid JSON: {e}")))?;
        Self::from_value(v)
    }
}

fn id_value(id: &Id) -> Value {
    match id {
        Id::Num(n) => Value::from(*n),
        Id::Str(s) => Value::from(s.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_every_kind() {
        for m in [
            Message::request(Id::Num(1), "tools/list", Some(json!({}))),
            Message::request(Id::Str("a".into()), "ping", None),
            Message::notification("notifications/initialized", None),
            Message::Response {
                id: Id::Num(7),
                result: json!({"ok": true}),
            },
            Message::Error {
                id: None,
                error: ErrorObject::new(code::PARSE_ERROR, "bad"),
            },
        ] {
            assert_eq!(Message::parse(&m.to_line()), Ok(m));
        }
    }

    #[test]
    fn malformed_frames_get_clear_errors() {
        assert_eq!(
            Message::parse("{").map_err(|e| e.code),
            Err(code::PARSE_ERROR)
        );
        assert_eq!(
            Message::parse("[]").map_err(|e| e.code),
            Err(code::INVALID_REQUEST)
        );
        assert_eq!(
            Message::parse(r#"{"jsonrpc":"1.0","method":"x"}"#).map_err(|e| e.code),
            Err(code::INVALID_REQUEST)
        );
        assert_eq!(
            Message::parse(r#"{"jsonrpc":"2.0","id":1}"#).map_err(|e| e.code),
            Err(code::INVALID_REQUEST)
        );
    }
}
