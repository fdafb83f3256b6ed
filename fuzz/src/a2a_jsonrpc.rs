//! Target `a2a_jsonrpc`: one A2A JSON-RPC request body as the server reads it —
//! `lumina_a2a::jsonrpc::parse_request`, the method table under both `A2A-Version`
//! readings (1.0 and absent = 0.3), and `params::Params::decode` (which converts v0.3
//! params first); then the v0.3 result conversion of the decoded params.
//!
//! Properties: nothing panics; a refused body is a parse or invalid-request (or
//! invalid-params for a non-object `params`) error; decoded params re-encode as v1.0 and
//! decode to the same value; every error object carries its code.

use lumina_a2a::jsonrpc::{parse_request, Method, Version};
use lumina_a2a::params::Params;
use lumina_a2a::Error;

/// Runs one input.
pub fn run(data: &[u8]) {
    let request = match parse_request(data) {
        Ok(request) => request,
        Err((_, error)) => {
            assert!(
                matches!(
                    error,
                    Error::Parse(_) | Error::InvalidRequest(_) | Error::InvalidParams(_)
                ),
                "unexpected envelope error {error:?}"
            );
            let object = error.to_object(true);
            assert_eq!(object["code"].as_i64(), Some(error.code()));
            return;
        }
    };
    assert!(
        !request.method.is_empty(),
        "an accepted request has a method"
    );
    for header in [Version::V1, Version::V03] {
        let Some((method, version)) = Method::resolve(&request.method, header) else {
            continue;
        };
        assert!(
            method.v1_name() == request.method || method.v03_name() == Some(&request.method),
            "the method table resolved {} to {method:?}",
            request.method
        );
        match Params::decode(method, version, request.params.clone()) {
            Ok(params) => {
                let value = params.to_value();
                let serde_json::Value::Object(map) = value.clone() else {
                    panic!("params encode as an object: {value}");
                };
                let again = Params::decode(method, Version::V1, map)
                    .unwrap_or_else(|e| panic!("re-encoded params do not decode: {e}: {value}"));
                assert_eq!(again, params, "params survive a round trip: {value}");
                let _ = lumina_a2a::v03::result_out(method, value);
            }
            Err(error) => assert_eq!(error.code(), -32602, "params errors are -32602: {error}"),
        }
    }
}
