//! Target `mcp_jsonrpc`: the MCP JSON-RPC envelope, `lumina_mcp::jsonrpc::Message::parse`
//! (one stdio line or one HTTP body; the SSE transports hand it each event's data).
//!
//! Properties: nothing panics; a refused frame gets a JSON-RPC parse or invalid-request
//! error; an accepted message serializes on one line (stdio framing) and parses back to the
//! same message.

use lumina_mcp::jsonrpc::{code, Message};

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
            assert_eq!(
                Message::parse(&line).as_ref(),
                Ok(&message),
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
