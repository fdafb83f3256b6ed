//! Endpoint resolution: which wire format, which URL, which headers.

use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};

use crate::openai::LimitField;
use crate::{anthropic, ApiType, ModelEndpoint, ModelError};

impl ModelEndpoint {
    /// The wire format to speak; `Auto` becomes Anthropic when the host contains
    /// "anthropic" or the model name starts with "claude", otherwise OpenAI-compatible.
    pub fn resolved_api_type(&self) -> ApiType {
        match self.api_type {
            ApiType::Auto => {
                let host = self.host();
                let model = self.model.trim().to_ascii_lowercase();
                if host.contains("anthropic") || model.starts_with("claude") {
                    ApiType::Anthropic
                } else {
                    ApiType::OpenaiCompatible
                }
            }
            explicit => explicit,
        }
    }

    /// `{base}/v1/messages` or `{base}/v1/chat/completions`; a base that already ends in
    /// `/v1` (with or without a trailing slash) does not get a second one.
    pub fn request_url(&self) -> String {
        let base = self.base_url.trim().trim_end_matches('/');
        let prefix = if base.ends_with("/v1") {
            base.to_string()
        } else {
            format!("{base}/v1")
        };
        match self.resolved_api_type() {
            ApiType::Anthropic => format!("{prefix}/messages"),
            ApiType::OpenaiCompatible | ApiType::Auto => format!("{prefix}/chat/completions"),
        }
    }

    fn host(&self) -> String {
        reqwest::Url::parse(self.base_url.trim())
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
            .unwrap_or_else(|| self.base_url.to_ascii_lowercase())
    }

    pub(crate) fn limit_field(&self) -> LimitField {
        if self.host() == "api.openai.com" {
            LimitField::MaxCompletionTokens
        } else {
            LimitField::MaxTokens
        }
    }

    /// Request headers. This is the only place the key is exposed; the header is marked
    /// sensitive so HTTP-level debug output redacts it too. An empty key sends no auth
    /// header (local servers such as Ollama need none).
    pub(crate) fn headers(&self) -> Result<HeaderMap, ModelError> {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let key = self.api_key.expose().trim();
        let api = self.resolved_api_type();
        if api == ApiType::Anthropic {
            h.insert(
                "anthropic-version",
                HeaderValue::from_static(anthropic::API_VERSION),
            );
        }
        if key.is_empty() {
            return Ok(h);
        }
        let value = match api {
            ApiType::Anthropic => HeaderValue::from_str(key),
            ApiType::OpenaiCompatible | ApiType::Auto => {
                HeaderValue::from_str(&format!("Bearer {key}"))
            }
        };
        let mut value = value.map_err(|_| ModelError::Auth {
            status: 0,
            message: "the API key contains characters that are not allowed in an HTTP header"
                .into(),
        })?;
        value.set_sensitive(true);
        match api {
            ApiType::Anthropic => h.insert("x-api-key", value),
            ApiType::OpenaiCompatible | ApiType::Auto => h.insert(AUTHORIZATION, value),
        };
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumina_config::Secret;
    use pretty_assertions::assert_eq;

    fn ep(api_type: ApiType, base_url: &str, model: &str) -> ModelEndpoint {
        ModelEndpoint {
            api_type,
            base_url: base_url.into(),
            model: model.into(),
            api_key: Secret::new("sk-test"),
        }
    }

    #[test]
    fn urls_with_and_without_v1_and_slashes() {
        let cases = [
            (
                ApiType::Anthropic,
                "https://api.anthropic.com",
                "https://api.anthropic.com/v1/messages",
            ),
            (
                ApiType::Anthropic,
                "https://api.anthropic.com/",
                "https://api.anthropic.com/v1/messages",
            ),
            (
                ApiType::Anthropic,
                "https://api.anthropic.com/v1",
                "https://api.anthropic.com/v1/messages",
            ),
            (
                ApiType::Anthropic,
                "https://api.anthropic.com/v1/",
                "https://api.anthropic.com/v1/messages",
            ),
            (
                ApiType::OpenaiCompatible,
                "http://localhost:11434",
                "http://localhost:11434/v1/chat/completions",
            ),
            (
                ApiType::OpenaiCompatible,
                "http://gw/openai/v1/",
                "http://gw/openai/v1/chat/completions",
            ),
        ];
        for (api, base, want) in cases {
            assert_eq!(ep(api, base, "m").request_url(), want, "{base}");
        }
    }

    #[test]
    fn auto_resolution() {
        let cases = [
            ("https://api.anthropic.com", "x", ApiType::Anthropic),
            (
                "https://gateway.example",
                "Claude-3-haiku",
                ApiType::Anthropic,
            ),
            (
                "https://api.openai.com",
                "gpt-4o",
                ApiType::OpenaiCompatible,
            ),
            ("http://127.0.0.1:8000", "qwen", ApiType::OpenaiCompatible),
        ];
        for (base, model, want) in cases {
            assert_eq!(
                ep(ApiType::Auto, base, model).resolved_api_type(),
                want,
                "{base} {model}"
            );
        }
        // An explicit type wins over the heuristics.
        assert_eq!(
            ep(
                ApiType::OpenaiCompatible,
                "https://api.anthropic.com",
                "claude"
            )
            .resolved_api_type(),
            ApiType::OpenaiCompatible
        );
    }

    #[test]
    fn auth_headers_are_sensitive_and_vendor_specific() {
        let h = ep(ApiType::Anthropic, "http://x", "m").headers().unwrap();
        assert_eq!(h.get("anthropic-version").unwrap(), "2023-06-01");
        assert!(h.get("x-api-key").unwrap().is_sensitive());
        assert!(h.get(AUTHORIZATION).is_none());
        let h = ep(ApiType::OpenaiCompatible, "http://x", "m")
            .headers()
            .unwrap();
        assert_eq!(h.get(AUTHORIZATION).unwrap(), "Bearer sk-test");
        assert!(h.get(AUTHORIZATION).unwrap().is_sensitive());
        let mut bad = ep(ApiType::OpenaiCompatible, "http://x", "m");
        bad.api_key = Secret::new("sk-\nsecret");
        let err = bad.headers().unwrap_err();
        assert!(!err.to_string().contains("secret"));
    }
}
