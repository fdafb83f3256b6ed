//! Errors of the Conversation API: `{"error": {"code", "message"}}` with the protocol's error
//! codes (docs/errors.md), mapped to HTTP statuses here and nowhere else.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use lumina_protocol::{ErrorCode, ErrorObject};
use serde::Serialize;

/// An error answer: a protocol error object with the status it maps to.
#[derive(Debug, Clone)]
pub struct ApiError(pub ErrorObject);

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError(ErrorObject::new(code, message))
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidParams, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn unauthorized() -> Self {
        Self::new(
            ErrorCode::Unauthorized,
            "missing, invalid or expired bearer token",
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    pub fn status(&self) -> StatusCode {
        status_of(self.0.code)
    }
}

impl From<ErrorObject> for ApiError {
    fn from(error: ErrorObject) -> Self {
        ApiError(error)
    }
}

/// The one mapping from protocol error codes to HTTP statuses.
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::ParseError
        | ErrorCode::InvalidUtf8
        | ErrorCode::InvalidParams
        | ErrorCode::UnsupportedVersion => StatusCode::BAD_REQUEST,
        ErrorCode::FrameTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::UnknownMethod | ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::Conflict => StatusCode::CONFLICT,
        ErrorCode::Fenced | ErrorCode::Unavailable | ErrorCode::Draining => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::NotImplemented => StatusCode::NOT_IMPLEMENTED,
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The body of every error answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// A protocol error: its code (docs/errors.md) and a message for people.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// `not_found`, `invalid_params`, `unauthorized`, …
    pub code: String,
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let retry_after = (self.0.code == ErrorCode::RateLimited).then(|| {
            let ms = self
                .0
                .data
                .as_ref()
                .and_then(|d| d.get("retry_after_ms"))
                .and_then(|v| v.as_u64())
                .unwrap_or(1000);
            ms.div_ceil(1000).to_string()
        });
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.0.code.as_str().to_string(),
                message: self.0.message,
            },
        };
        let mut response = (status, Json(body)).into_response();
        if let Some(seconds) = retry_after.and_then(|s| s.parse().ok()) {
            response.headers_mut().insert(header::RETRY_AFTER, seconds);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_client_error_is_a_4xx_and_every_server_error_a_5xx() {
        assert_eq!(status_of(ErrorCode::NotFound), StatusCode::NOT_FOUND);
        assert_eq!(status_of(ErrorCode::InvalidParams), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(ErrorCode::Unauthorized), StatusCode::UNAUTHORIZED);
        assert_eq!(
            status_of(ErrorCode::Draining),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            status_of(ErrorCode::Internal),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
