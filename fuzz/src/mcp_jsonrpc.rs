//! Target `mcp_jsonrpc`: the MCP JSON-RPC envelope, `lumina_mcp::jsonrpc::Message::parse`
//! (one stdio line or one HTTP body; the SSE transports hand it each event's data).
//!
//! Properties: nothing panics; a refused frame gets a JSON-RPC parse or invalid-request
//! error; an accepted message serializes on one line (stdio framing) and parses back to the
//! same message (floating-point numbers up to rounding in the last bits: serde_json's
//! default float parser is not correctly rounded, so a float printed and read again can move
//! by one unit in the last place).

use lumina_mcp::jsonrpc::{code, Message};
use serde_json::Value;

/// Runs one input (transports decode UTF-8 before the envelope is parsed).
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Message::parse(text) {
        Ok(message) => {
            let line = message.to_line();
            assert!(
                !line.contains(['\n', '\r']),
                "a serialized message is one line: {line}"
            );
            let again = Message::parse(&line)
                .unwrap_or_else(|e| panic!("a serialized message does not parse: {e}: {line}"));
            assert!(
                same(&again.to_value(), &message.to_value()),
                "a message survives serialization: {line}"
            );
            assert_eq!(
                message.method().is_some(),
                matches!(
                    message,
                    Message::Request { .. } | Message::Notification { .. }
                ),
                "only requests and notifications have a method"
            );
        }
        Err(error) => assert!(
            error.code == code::PARSE_ERROR || error.code == code::INVALID_REQUEST,
            "unexpected error code {}",
            error.code
        ),
    }
}

/// Equal as JSON, floating-point numbers within 1e-12 relative.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
