//! The stateless revision (2026-07-28): no `initialize`; every request names its revision,
//! capabilities and log level in `_meta`; every result says `resultType`; `server/discover`
//! advertises what the server speaks.

use lumina_mcp_proto::jsonrpc::{code, ErrorObject};
use lumina_mcp_proto::version;
use serde_json::{json, Map, Value};

use crate::types::{Implementation, LogLevel};

pub use lumina_mcp_proto::meta::{
    CLIENT_CAPABILITIES as META_CLIENT_CAPABILITIES, CLIENT_INFO as META_CLIENT_INFO,
    LOG_LEVEL as META_LOG_LEVEL, PROTOCOL_VERSION as META_PROTOCOL_VERSION,
    SERVER_INFO as META_SERVER_INFO,
};

/// Methods of the handshake era that the stateless revision removed.
const REMOVED: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Results that carry cache hints (`CacheableResult`).
const CACHEABLE: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
];

/// Every revision this server answers, newest first.
pub fn supported_versions() -> Vec<&'static str> {
    let mut all = vec![version::STATELESS];
    all.extend(version::HANDSHAKE);
    all
}

/// How a request asks to be served.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Era {
    /// 2026-07-28 `_meta`: served statelessly.
    Stateless,
    /// No (or a handshake revision's) `_meta` version: the session's negotiated revision.
    Handshake,
    /// `_meta` names a revision this server does not speak.
    Unsupported(String),
}

/// `params._meta`, if an object.
pub(crate) fn meta(params: Option<&Value>) -> Option<&Map<String, Value>> {
    params?.get("_meta")?.as_object()
}

/// The revision a request names in `_meta`, if any.
pub fn requested_version(params: Option<&Value>) -> Option<&str> {
    meta(params)?.get(META_PROTOCOL_VERSION)?.as_str()
}

pub(crate) fn era(params: Option<&Value>) -> Era {
    match requested_version(params) {
        None => Era::Handshake,
        Some(v) if v == version::STATELESS => Era::Stateless,
        Some(v) if version::is_handshake(v) => Era::Handshake,
        Some(v) => Era::Unsupported(v.to_string()),
    }
}

pub(crate) fn is_removed(method: &str) -> bool {
    REMOVED.contains(&method)
}

/// -32022 with the versions to retry with.
pub fn unsupported_version(requested: &str) -> ErrorObject {
    let mut error = ErrorObject::new(
        code::UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
    );
    error.data = Some(json!({ "supported": supported_versions(), "requested": requested }));
    error
}

/// What the request's `_meta` says about the client.
pub(crate) struct RequestMeta {
    pub client_capabilities: Value,
    pub client_info: Option<Value>,
    pub log_level: Option<LogLevel>,
}

pub(crate) fn request_meta(params: Option<&Value>) -> RequestMeta {
    let meta = meta(params);
    let get = |key: &str| meta.and_then(|m| m.get(key)).cloned();
    RequestMeta {
        client_capabilities: get(META_CLIENT_CAPABILITIES).unwrap_or_else(|| json!({})),
        client_info: get(META_CLIENT_INFO),
        log_level: get(META_LOG_LEVEL).as_ref().and_then(LogLevel::parse),
    }
}

/// Adds `resultType`, the server's identity and, for cacheable results, cache hints.
pub(crate) fn decorate(method: &str, result: Value, info: &Implementation) -> Value {
    let mut map = match result {
        Value::Object(map) => map,
        // Every result is an object; anything else is wrapped rather than dropped.
        other => {
            let mut map = Map::new();
            map.insert("value".into(), other);
            map
        }
    };
    map.insert("resultType".into(), Value::from("complete"));
    if CACHEABLE.contains(&method) {
        // Lists can depend on the caller's credentials: never shared, never assumed fresh.
        map.entry("ttlMs").or_insert(Value::from(0));
        map.entry("cacheScope").or_insert(Value::from("private"));
    }
    let meta = map
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(
            META_SERVER_INFO.into(),
            serde_json::to_value(info).unwrap_or(Value::Null),
        );
    }
    Value::Object(map)
}

/// The `server/discover` result (before [`decorate`]).
pub(crate) fn discover(capabilities: Value, instructions: Option<String>) -> Value {
    let mut result = json!({
        "supportedVersions": supported_versions(),
        "capabilities": capabilities,
    });
    if let (Some(text), Some(map)) = (instructions, result.as_object_mut()) {
        map.insert("instructions".into(), Value::from(text));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_requests_by_meta() {
        let modern = json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}});
        let legacy = json!({"_meta": {META_PROTOCOL_VERSION: "2025-06-18"}});
        let future = json!({"_meta": {META_PROTOCOL_VERSION: "2099-01-01"}});
        assert_eq!(era(Some(&modern)), Era::Stateless);
        assert_eq!(era(Some(&legacy)), Era::Handshake);
        assert_eq!(era(None), Era::Handshake);
        assert_eq!(era(Some(&future)), Era::Unsupported("2099-01-01".into()));
    }

    #[test]
    fn decorates_cacheable_results() {
        let info = Implementation::new("s", "1");
        let v = decorate("tools/list", json!({"tools": []}), &info);
        assert_eq!(v["resultType"], "complete");
        assert_eq!(v["cacheScope"], "private");
        assert_eq!(v["_meta"][META_SERVER_INFO]["name"], "s");
        let v = decorate("tools/call", json!({"content": []}), &info);
        assert!(v.get("ttlMs").is_none());
    }
}
