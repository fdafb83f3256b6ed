//! HTTP header helpers: configured headers and the 2026-07-28 header-value encoding.

use base64::Engine;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::jsonrpc::Message;
use crate::Error;

/// The configured headers as a map. Errors name the header, never its (secret) value.
pub(crate) fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, Error> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Error::Protocol(format!("invalid header name `{name}`")))?;
        let v = HeaderValue::from_str(value)
            .map_err(|_| Error::Protocol(format!("invalid value for header `{name}`")))?;
        map.insert(n, v);
    }
    Ok(map)
}

/// A header value as 2026-07-28 sends it: plain when it is visible ASCII without
/// surrounding spaces, else `=?base64?<base64 of the UTF-8>?=`.
pub(crate) fn encode_header_value(value: &str) -> String {
    let plain = !value.is_empty()
        && value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?") && value.ends_with("?="));
    if plain {
        value.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
        )
    }
}

/// `Mcp-Method` on every request/notification, `Mcp-Name` for the named-target methods.
pub(crate) fn stateless_headers(msg: &Message) -> Vec<(HeaderName, HeaderValue)> {
    let (method, params) = match msg {
        Message::Request { method, params, .. } | Message::Notification { method, params } => {
            (method, params)
        }
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    if let Ok(v) = HeaderValue::from_str(&encode_header_value(method)) {
        out.push((HeaderName::from_static("mcp-method"), v));
    }
    let key = match method.as_str() {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    let name = key.and_then(|k| params.as_ref()?.get(k)?.as_str());
    if let Some(Ok(v)) = name.map(|n| HeaderValue::from_str(&encode_header_value(n))) {
        out.push((HeaderName::from_static("mcp-name"), v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_only_what_needs_it() {
        assert_eq!(encode_header_value("tools/call"), "tools/call");
        assert_eq!(encode_header_value("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(encode_header_value(" x"), "=?base64?IHg=?=");
        assert_eq!(encode_header_value("=?a?="), "=?base64?PT9hPz0=?=");
    }

    #[test]
    fn stateless_requests_name_method_and_target() {
        let call = Message::request(
            crate::jsonrpc::Id::Num(1),
            "tools/call",
            Some(serde_json::json!({"name": "échо"})),
        );
        let got: Vec<(String, String)> = stateless_headers(&call)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("?").to_string()))
            .collect();
        assert_eq!(
            got,
            [
                ("mcp-method".to_string(), "tools/call".to_string()),
                ("mcp-name".to_string(), encode_header_value("échо")),
            ]
        );
    }
}
