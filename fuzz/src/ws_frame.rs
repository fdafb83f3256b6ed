//! Target `ws_frame`: the protocol-v3 frames on the WebSocket.
//!
//! The backend's frame parser, `parse_frame` in `services/backend/src/ws.rs`, is a private
//! function of the `lumina-backend` crate, so it is not reachable from here. What it does is
//! two public steps of `lumina-protocol`, repeated here exactly: parse the text as a JSON
//! value, read the string `id` (kept for the error frame), then decode a [`ClientFrame`].
//! After that the dispatcher decodes `params` into the method's params type from the method
//! table (`null` counts as `{}`, as in `services/backend/src/execute.rs`). The same text is
//! also decoded as a [`ServerFrame`], which is what `lumina-client` does with every frame the
//! server sends.
//!
//! Properties: nothing panics; a decoded frame keeps the `id` the first step read; every
//! decoded value re-encodes and decodes to the same thing (what the server sends, the
//! client can read back), floating-point numbers up to rounding in the last bits.

use lumina_protocol::{ClientFrame, Method, ServerFrame};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Runs one input (bytes that are not UTF-8 are refused by the backend before parsing).
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    client_frame(text);
    server_frame(text);
}

fn client_frame(text: &str) {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let id = value.get("id").and_then(Value::as_str).map(str::to_owned);
    let Ok(frame) = serde_json::from_value::<ClientFrame>(value) else {
        return;
    };
    assert_eq!(
        Some(&frame.id),
        id.as_ref(),
        "the frame's id is the id read first"
    );
    let again: ClientFrame = reencode(&frame);
    assert_same(&again, &frame, "a client frame survives re-encoding");
    if let Some(method) = Method::from_name(&frame.method) {
        params(method, frame.params);
    }
}

fn server_frame(text: &str) {
    let Ok(frame) = serde_json::from_str::<ServerFrame>(text) else {
        return;
    };
    let again: ServerFrame = reencode(&frame);
    assert_same(&again, &frame, "a server frame survives re-encoding");
}

/// Equal as JSON, except that floating-point numbers may differ in the last bits:
/// serde_json's default float parser (without its `float_roundtrip` feature) is not
/// correctly rounded, so e.g. an integer beyond `u64` read as `f64`, printed and read again
/// can move by one unit in the last place.
fn assert_same<T: Serialize + std::fmt::Debug>(a: &T, b: &T, what: &str) {
    let (va, vb) = match (serde_json::to_value(a), serde_json::to_value(b)) {
        (Ok(va), Ok(vb)) => (va, vb),
        _ => panic!("{what}: a decoded value does not encode"),
    };
    assert!(same(&va, &vb), "{what}:\n{a:?}\n{b:?}");
}

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

/// Encodes `value` and decodes the text again; both steps must succeed.
fn reencode<T: Serialize + DeserializeOwned>(value: &T) -> T {
    let text = serde_json::to_string(value)
        .unwrap_or_else(|e| panic!("a decoded value does not encode: {e}"));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("an encoded value does not decode: {e}: {text}"))
}

/// Decodes params like the dispatcher; decoded params must re-encode to the same JSON.
fn decode_as<P: Serialize + DeserializeOwned>(params: Value) {
    let params = if params.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        params
    };
    let Ok(decoded) = serde_json::from_value::<P>(params) else {
        return;
    };
    let first = serde_json::to_value(&decoded)
        .unwrap_or_else(|e| panic!("decoded params do not encode: {e}"));
    let again: P = reencode(&decoded);
    let second = serde_json::to_value(&again)
        .unwrap_or_else(|e| panic!("re-decoded params do not encode: {e}"));
    assert!(
        same(&first, &second),
        "params survive re-encoding: {first} {second}"
    );
}

macro_rules! params_by_method {
    ($($variant:ident $fn_name:ident $name:literal ($params:ty) -> $result:ty,
        $scope:ident, $route:ident, $summary:literal;)*) => {
        /// The params type of every method, from the protocol's method table.
        fn params(method: Method, params: Value) {
            match method {
                $(Method::$variant => decode_as::<$params>(params),)*
            }
        }
    };
}

lumina_protocol::for_each_method!(params_by_method);
