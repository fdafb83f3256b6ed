//! The frames on the WebSocket: client requests; server responses, events and deltas.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ErrorObject, Event};

/// A request from the client: `{"id", "method", "params"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientFrame {
    /// Chosen by the client (a UUID); echoed in the response. Retrying a mutation after a
    /// reconnect with the same id is safe.
    pub id: String,
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

/// A durable event pushed to a subscriber.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventFrame {
    pub session_id: String,
    /// The session journal's global sequence: contiguous from 1, never reused.
    pub seq: u64,
    pub stream: String,
    pub stream_seq: u64,
    /// Unix milliseconds when the event was appended.
    pub ts_ms: i64,
    pub event: Event,
}

/// An ephemeral frame: streamed text that is not journaled (the completed message is).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeltaFrame {
    pub session_id: String,
    pub run_id: String,
    pub step: u32,
    /// `text` (assistant text) or `thinking`.
    pub channel: String,
    pub text: String,
}

/// Everything the server sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    Response {
        id: String,
        result: Value,
    },
    Error {
        /// `null` when the request could not be parsed far enough to read its id.
        id: Option<String>,
        error: ErrorObject,
    },
    Event(EventFrame),
    Delta(DeltaFrame),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_frame_shape() {
        let frame = ServerFrame::Event(EventFrame {
            session_id: "s".into(),
            seq: 7,
            stream: "main".into(),
            stream_seq: 3,
            ts_ms: 1,
            event: Event::SessionArchived {},
        });
        let json = serde_json::to_value(&frame).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "event", "session_id": "s", "seq": 7, "stream": "main",
                "stream_seq": 3, "ts_ms": 1, "event": {"kind": "session.archived"}
            })
        );
    }
}
