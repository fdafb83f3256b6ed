//! The frames on the WebSocket: client requests; server responses, events and deltas.
//!
//! A frame is a JSON object and nothing else. Serde's derived decoding would also read a
//! struct from an array of its fields (`["id","method",{}]`) and an internally tagged enum
//! from an array led by its tag — a second, undocumented spelling of every frame (found by
//! the `ws_frame` fuzz target) — so frames decode through `object_only!`, which takes a map.

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::{ErrorObject, Event};

/// A request from the client: `{"id", "method", "params"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
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
#[serde(remote = "Self", tag = "type", rename_all = "snake_case")]
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

/// The derived (`remote = "Self"`) encoding as the trait impls, the decoding fed only a map.
macro_rules! object_only {
    ($($frame:ident: $expecting:literal;)*) => {$(
        impl Serialize for $frame {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                $frame::serialize(self, serializer)
            }
        }

        impl<'de> Deserialize<'de> for $frame {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Object;
                impl<'de> Visitor<'de> for Object {
                    type Value = $frame;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<$frame, A::Error> {
                        $frame::deserialize(MapAccessDeserializer::new(map))
                    }
                }
                // A map only: an array or anything else is an error.
                deserializer.deserialize_map(Object)
            }
        }
    )*};
}

object_only! {
    ClientFrame: "a request object";
    ServerFrame: "a frame object";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_objects_only() {
        let request: ClientFrame =
            serde_json::from_str(r#"{"id":"1","method":"session.list"}"#).unwrap();
        assert_eq!(request.params, Value::Null);
        let again: ClientFrame =
            serde_json::from_value(serde_json::to_value(&request).unwrap()).unwrap();
        assert_eq!(again, request);
        for text in [r#"["1","session.list",{}]"#, r#"["",""]"#, r#""x""#, "7"] {
            let err = serde_json::from_str::<ClientFrame>(text).unwrap_err();
            assert!(
                err.to_string().contains("expected a request object"),
                "{text}: {err}"
            );
            let value: Value = serde_json::from_str(text).unwrap();
            assert!(
                serde_json::from_value::<ClientFrame>(value).is_err(),
                "{text}"
            );
        }
        let response: ServerFrame =
            serde_json::from_str(r#"{"type":"response","id":"1","result":null}"#).unwrap();
        assert_eq!(
            response,
            ServerFrame::Response {
                id: "1".into(),
                result: Value::Null
            }
        );
        for text in [r#"["response","1",null]"#, r#"["delta"]"#] {
            let err = serde_json::from_str::<ServerFrame>(text).unwrap_err();
            assert!(
                err.to_string().contains("expected a frame object"),
                "{text}: {err}"
            );
        }
    }

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
