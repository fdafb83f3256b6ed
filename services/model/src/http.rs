//! Mapping HTTP statuses and vendor error objects to [`ModelError`].

use serde_json::Value;

use crate::ModelError;

/// The status → kind table shared by HTTP responses and in-stream error objects.
pub(crate) fn error_for_status(status: u16, message: String) -> ModelError {
    match status {
        401 | 403 => ModelError::Auth { status, message },
        429 => ModelError::RateLimited { status, message },
        408 | 409 | 500..=599 => ModelError::Server { status, message },
        400..=499 => ModelError::BadRequest { status, message },
        _ => ModelError::Protocol(format!("unexpected HTTP status {status}: {message}")),
    }
}

/// The human-readable message from either vendor's error body, or from the common compat
/// shapes (`{"error": "..."}` from Ollama, `{"detail": "..."}` from FastAPI servers).
pub(crate) fn error_message(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    let err = v.get("error");
    let candidates = [
        err.and_then(|e| e.get("message")),
        err,
        v.get("message"),
        v.get("detail"),
    ];
    for c in candidates.into_iter().flatten() {
        if let Value::String(s) = c {
            if !s.is_empty() {
                return Some(s.clone());
            }
        }
    }
    None
}

/// A short, printable message for an HTTP error response.
pub(crate) fn http_error_message(status: u16, body: &str) -> String {
    if let Some(m) = error_message(body) {
        return m;
    }
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return reason_phrase(status).to_string();
    }
    // Proxies answer with HTML pages; a short prefix is enough to recognise them.
    let mut snippet: String = trimmed.chars().take(300).collect();
    if snippet.len() < trimmed.len() {
        snippet.push('…');
    }
    snippet
}

fn reason_phrase(status: u16) -> &'static str {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("error")
}

/// An error object that arrived inside a 200 stream: Anthropic `event: error`
/// (`{"type":"error","error":{"type":"overloaded_error",...}}`) or an OpenAI-style
/// `{"error":{"message","type","code"}}` chunk. Overloaded counts like HTTP 529.
pub(crate) fn stream_error(v: &Value) -> ModelError {
    let err = v.get("error").unwrap_or(v);
    let kind = err
        .get("type")
        .and_then(Value::as_str)
        .or_else(|| err.get("code").and_then(Value::as_str))
        .unwrap_or("");
    let numeric_code = err
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c));
    let status = numeric_code.unwrap_or_else(|| status_for_error_type(kind));
    let message = match err {
        Value::String(s) => s.clone(),
        _ => err
            .get("message")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| {
                if kind.is_empty() {
                    "error event in stream".to_string()
                } else {
                    kind.to_string()
                }
            }),
    };
    error_for_status(status, message)
}

fn status_for_error_type(kind: &str) -> u16 {
    match kind {
        "overloaded_error" | "overloaded" => 529,
        "rate_limit_error" | "rate_limit_exceeded" | "insufficient_quota" => 429,
        "timeout_error" => 504,
        "authentication_error" | "invalid_api_key" => 401,
        "permission_error" => 403,
        "billing_error" => 402,
        "invalid_request_error" | "context_length_exceeded" => 400,
        "not_found_error" | "model_not_found" => 404,
        "request_too_large" => 413,
        // api_error, server_error and anything unknown: a transient server fault.
        _ => 500,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn vendor_and_compat_error_bodies() {
        let anthropic = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_1"}"#;
        let openai = r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
        assert_eq!(
            error_message(anthropic).as_deref(),
            Some("invalid x-api-key")
        );
        assert_eq!(
            error_message(openai).as_deref(),
            Some("Incorrect API key provided")
        );
        assert_eq!(
            error_message(r#"{"error":"model not found"}"#).as_deref(),
            Some("model not found")
        );
        assert_eq!(
            error_message(r#"{"detail":"Not Found"}"#).as_deref(),
            Some("Not Found")
        );
        assert_eq!(http_error_message(502, ""), "Bad Gateway");
        assert_eq!(
            http_error_message(502, "<html>bad gateway</html>"),
            "<html>bad gateway</html>"
        );
    }

    #[test]
    fn status_table() {
        let kinds: Vec<(u16, &str)> = [
            400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 500, 503, 529,
        ]
        .into_iter()
        .map(|s| (s, error_for_status(s, String::new()).code()))
        .collect();
        assert_eq!(
            kinds,
            vec![
                (400, "model_bad_request"),
                (401, "model_auth"),
                (402, "model_bad_request"),
                (403, "model_auth"),
                (404, "model_bad_request"),
                (408, "model_server_error"),
                (409, "model_server_error"),
                (413, "model_bad_request"),
                (422, "model_bad_request"),
                (429, "model_rate_limited"),
                (500, "model_server_error"),
                (503, "model_server_error"),
                (529, "model_server_error"),
            ]
        );
    }

    #[test]
    fn in_stream_errors() {
        let overloaded =
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
        assert_eq!(
            stream_error(&overloaded),
            ModelError::Server {
                status: 529,
                message: "Overloaded".into()
            }
        );
        let api =
            json!({"type":"error","error":{"type":"api_error","message":"Internal server error"}});
        assert_eq!(
            stream_error(&api),
            ModelError::Server {
                status: 500,
                message: "Internal server error".into()
            }
        );
        let invalid =
            json!({"type":"error","error":{"type":"invalid_request_error","message":"bad"}});
        assert_eq!(
            stream_error(&invalid),
            ModelError::BadRequest {
                status: 400,
                message: "bad".into()
            }
        );
        let openai = json!({"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}});
        assert_eq!(
            stream_error(&openai),
            ModelError::Server {
                status: 500,
                message: "The server had an error".into()
            }
        );
        let vllm = json!({"error":{"object":"error","message":"too long","type":"BadRequestError","code":400}});
        assert_eq!(
            stream_error(&vllm),
            ModelError::BadRequest {
                status: 400,
                message: "too long".into()
            }
        );
    }
}
