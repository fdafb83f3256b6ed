//! The JSON-RPC 2.0 envelope (serde_json does the parsing; this only checks the shape) and
//! the one table of A2A methods with their v1.0 and v0.3 names.

use serde_json::{Map, Value};

use crate::error::Error;

/// A request id: a string, a number or null (JSON-RPC 2.0 §4).
#[derive(Debug, Clone, PartialEq)]
pub enum Id {
    Str(String),
    Num(serde_json::Number),
    Null,
}

impl Id {
    pub fn to_value(&self) -> Value {
        match self {
            Self::Str(s) => Value::String(s.clone()),
            Self::Num(n) => Value::Number(n.clone()),
            Self::Null => Value::Null,
        }
    }
}

/// A parsed request: its id, method name and params (an object; absent = `{}`).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: Id,
    pub method: String,
    pub params: Map<String, Value>,
}

/// Which protocol version shapes a request and its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V03,
}

macro_rules! methods {
    ($( $variant:ident => $v1:literal, $v03:expr, streaming: $streaming:literal, write: $write:literal; )*) => {
        /// The A2A operations, declared once.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Method { $( $variant, )* }

        impl Method {
            pub const ALL: &'static [Method] = &[ $( Method::$variant, )* ];

            /// The v1.0 method name (`SendMessage`).
            pub fn v1_name(self) -> &'static str {
                match self { $( Method::$variant => $v1, )* }
            }

            /// The v0.3 method name (`message/send`), if the operation exists in v0.3.
            pub fn v03_name(self) -> Option<&'static str> {
                match self { $( Method::$variant => $v03, )* }
            }

            /// Whether the answer is an SSE stream.
            pub fn is_streaming(self) -> bool {
                match self { $( Method::$variant => $streaming, )* }
            }

            /// Whether the call changes state (needs the write scope).
            pub fn is_write(self) -> bool {
                match self { $( Method::$variant => $write, )* }
            }
        }
    };
}

methods! {
    SendMessage => "SendMessage", Some("message/send"), streaming: false, write: true;
    SendStreamingMessage => "SendStreamingMessage", Some("message/stream"), streaming: true, write: true;
    GetTask => "GetTask", Some("tasks/get"), streaming: false, write: false;
    ListTasks => "ListTasks", None, streaming: false, write: false;
    CancelTask => "CancelTask", Some("tasks/cancel"), streaming: false, write: true;
    SubscribeToTask => "SubscribeToTask", Some("tasks/resubscribe"), streaming: true, write: false;
    CreatePushConfig => "CreateTaskPushNotificationConfig", Some("tasks/pushNotificationConfig/set"), streaming: false, write: true;
    GetPushConfig => "GetTaskPushNotificationConfig", Some("tasks/pushNotificationConfig/get"), streaming: false, write: false;
    ListPushConfigs => "ListTaskPushNotificationConfigs", Some("tasks/pushNotificationConfig/list"), streaming: false, write: false;
    DeletePushConfig => "DeleteTaskPushNotificationConfig", Some("tasks/pushNotificationConfig/delete"), streaming: false, write: true;
    GetExtendedAgentCard => "GetExtendedAgentCard", Some("agent/getAuthenticatedExtendedCard"), streaming: false, write: false;
}

impl Method {
    /// Resolves a method name. With `A2A-Version: 1.0` only v1.0 names exist; without the
    /// header (v0.3) the v0.3 names are read in v0.3 shapes, and v1.0 names are still
    /// accepted in v1.0 shapes.
    pub fn resolve(name: &str, header: Version) -> Option<(Method, Version)> {
        if let Some(m) = Method::ALL.iter().find(|m| m.v1_name() == name) {
            return Some((*m, Version::V1));
        }
        if header == Version::V03 {
            if let Some(m) = Method::ALL.iter().find(|m| m.v03_name() == Some(name)) {
                return Some((*m, Version::V03));
            }
        }
        None
    }
}

/// Parses one request body. The error carries the id when it could be read, so the error
/// response can echo it.
pub fn parse_request(body: &[u8]) -> Result<Request, (Id, Error)> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| (Id::Null, Error::Parse(format!("not JSON: {e}"))))?;
    let Value::Object(mut object) = value else {
        return Err((
            Id::Null,
            Error::InvalidRequest("a request is a JSON object (batches are not supported)".into()),
        ));
    };
    let id = match object.remove("id") {
        None => {
            return Err((
                Id::Null,
                Error::InvalidRequest("missing id (notifications are not supported)".into()),
            ))
        }
        Some(Value::String(s)) => Id::Str(s),
        Some(Value::Number(n)) => Id::Num(n),
        Some(Value::Null) => Id::Null,
        Some(_) => {
            return Err((
                Id::Null,
                Error::InvalidRequest("id must be a string, a number or null".into()),
            ))
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, Error::InvalidRequest("jsonrpc must be \"2.0\"".into())));
    }
    let method = match object.remove("method") {
        Some(Value::String(m)) if !m.is_empty() => m,
        _ => {
            return Err((
                id,
                Error::InvalidRequest("method must be a non-empty string".into()),
            ))
        }
    };
    let params = match object.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err((id, Error::InvalidParams("params must be an object".into()))),
    };
    Ok(Request { id, method, params })
}

/// A success response.
pub fn success(id: &Id, result: Value) -> Value {
    serde_json::json!({ "jsonrpc": "2.0", "id": id.to_value(), "result": result })
}

/// An error response.
pub fn failure(id: &Id, error: &Error, version: Version) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id.to_value(),
        "error": error.to_object(version == Version::V1),
    })
}
