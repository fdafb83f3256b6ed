//! The token endpoint: the authorization code exchange (with the PKCE verifier), refresh,
//! and the `client_credentials` grant — each with the RFC 8707 `resource` and the client's
//! authentication method.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use lumina_config::Secret;
use reqwest::header::{HeaderValue, AUTHORIZATION};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use super::assertion::{client_assertion, ASSERTION_TYPE};
use super::challenge::split_scopes;
use super::discovery::Discovered;
use super::error::{clip, AuthError};
use super::net::{oauth_error, read_json, AuthHttp};
use super::registration::{AuthMethod, ClientInfo};

/// Tokens for one server. `Debug` redacts both tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub access_token: Secret,
    pub refresh_token: Option<Secret>,
    /// When the access token expires (Unix seconds), if the server said.
    pub expires_at: Option<u64>,
    /// The granted scopes (the requested ones when the server did not say).
    pub scopes: Vec<String>,
    /// When they were issued (Unix seconds).
    #[serde(default)]
    pub issued_at: Option<u64>,
}

/// Refresh this long before expiry (at most half the token's lifetime).
const REFRESH_MARGIN_SECS: u64 = 60;

impl Tokens {
    /// Whether the access token is expired or expires within `margin` seconds.
    pub fn expires_within(&self, now: u64, margin: u64) -> bool {
        self.expires_at.is_some_and(|t| t <= now + margin)
    }

    /// Whether to refresh before the next request: within a minute of expiry, or within
    /// half the lifetime for short-lived tokens.
    pub fn refresh_due(&self, now: u64) -> bool {
        let lifetime = match (self.issued_at, self.expires_at) {
            (Some(i), Some(e)) => e.saturating_sub(i),
            _ => u64::MAX,
        };
        self.expires_within(now, REFRESH_MARGIN_SECS.min(lifetime / 2))
    }
}

/// A failed token request; `rejected`: the server refused the grant (an OAuth error), as
/// opposed to being unreachable.
#[derive(Debug)]
pub(crate) struct TokenFailure {
    pub error: AuthError,
    pub rejected: bool,
}

/// What a token request grants or uses.
pub(crate) enum Grant<'a> {
    Code {
        code: &'a str,
        redirect_uri: &'a Url,
        verifier: &'a str,
    },
    Refresh {
        refresh_token: &'a Secret,
    },
    ClientCredentials,
}

/// Sends one token request. `scopes`: requested (sent for client credentials, and the
/// granted set when the reply has no `scope`); `previous_refresh` is kept when a refresh
/// reply has no new refresh token.
pub(crate) async fn request(
    http: &AuthHttp,
    disc: &Discovered,
    client: &ClientInfo,
    grant: Grant<'_>,
    scopes: &[String],
    now: u64,
) -> Result<Tokens, TokenFailure> {
    let fail = |error: AuthError| TokenFailure {
        error,
        rejected: false,
    };
    let endpoint = Url::parse(&disc.metadata.token_endpoint)
        .map_err(|e| fail(AuthError::failed(format!("invalid token endpoint: {e}"))))?;
    let mut form: Vec<(&str, String)> = Vec::new();
    let mut previous_refresh = None;
    match &grant {
        Grant::Code {
            code,
            redirect_uri,
            verifier,
        } => {
            form.push(("grant_type", "authorization_code".into()));
            form.push(("code", code.to_string()));
            form.push(("redirect_uri", redirect_uri.to_string()));
            form.push(("code_verifier", verifier.to_string()));
        }
        Grant::Refresh { refresh_token } => {
            form.push(("grant_type", "refresh_token".into()));
            form.push(("refresh_token", refresh_token.expose().to_string()));
            previous_refresh = Some((*refresh_token).clone());
        }
        Grant::ClientCredentials => {
            form.push(("grant_type", "client_credentials".into()));
            if !scopes.is_empty() {
                form.push(("scope", scopes.join(" ")));
            }
        }
    }
    form.push(("resource", disc.resource.clone()));
    let method = client.auth_method(
        disc.metadata
            .token_endpoint_auth_methods_supported
            .as_deref(),
    );
    let mut req = http.post(&endpoint);
    let secret = client
        .client_secret
        .as_ref()
        .map(Secret::expose)
        .unwrap_or("");
    match method {
        AuthMethod::ClientSecretBasic => {
            req = req.header(AUTHORIZATION, basic_auth(&client.client_id, secret));
        }
        AuthMethod::ClientSecretPost => {
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_secret", secret.to_string()));
        }
        AuthMethod::None => form.push(("client_id", client.client_id.clone())),
        AuthMethod::PrivateKeyJwt => {
            let Some(key) = &client.signing_key else {
                return Err(fail(AuthError::failed(
                    "no private key for private_key_jwt",
                )));
            };
            let jwt = client_assertion(key, &client.client_id, &disc.issuer).map_err(fail)?;
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_assertion_type", ASSERTION_TYPE.into()));
            form.push(("client_assertion", jwt));
        }
    }
    let resp = req
        .form(&form)
        .send()
        .await
        .map_err(|e| fail(AuthError::http("the token request failed", e)))?;
    let status = resp.status();
    let body = read_json(resp).await.unwrap_or(Value::Null);
    if !status.is_success() {
        let why = oauth_error(&body);
        return Err(TokenFailure {
            rejected: why.is_some() && matches!(status.as_u16(), 400 | 401),
            error: AuthError::failed(format!(
                "the token endpoint answered HTTP {} {}",
                status.as_u16(),
                why.unwrap_or_default()
            )),
        });
    }
    parse_tokens(&body, scopes, previous_refresh, now).map_err(fail)
}

/// `Basic base64(urlencode(id) ":" urlencode(secret))` (RFC 6749 §2.3.1), marked sensitive.
pub fn basic_auth(client_id: &str, secret: &str) -> HeaderValue {
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let raw = format!("{}:{}", enc(client_id), enc(secret));
    let mut v = HeaderValue::from_str(&format!("Basic {}", STANDARD.encode(raw)))
        .unwrap_or_else(|_| HeaderValue::from_static("Basic"));
    v.set_sensitive(true);
    v
}

fn parse_tokens(
    body: &Value,
    requested: &[String],
    previous_refresh: Option<Secret>,
    now: u64,
) -> Result<Tokens, AuthError> {
    let text = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let access = text("access_token")
        .ok_or_else(|| AuthError::failed("the token response has no access_token"))?;
    if let Some(kind) = text("token_type") {
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::failed(format!(
                "the token endpoint issued a `{}` token; only Bearer tokens are supported",
                clip(kind)
            )));
        }
    }
    let expires_in = match body.get("expires_in") {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    };
    Ok(Tokens {
        access_token: Secret::new(access),
        refresh_token: text("refresh_token").map(Secret::new).or(previous_refresh),
        expires_at: expires_in.map(|s| now.saturating_add(s)),
        scopes: match text("scope") {
            Some(s) => split_scopes(s),
            None => requested.to_vec(),
        },
        issued_at: Some(now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn basic_auth_url_encodes_before_base64() {
        let v = basic_auth("id:1", "s p&c");
        assert!(v.is_sensitive());
        let raw = v.to_str().unwrap().strip_prefix("Basic ").unwrap();
        let decoded = String::from_utf8(STANDARD.decode(raw).unwrap()).unwrap();
        assert_eq!(decoded, "id%3A1:s+p%26c");
    }

    #[test]
    fn token_responses_parse_and_keep_the_old_refresh_token() {
        let t = parse_tokens(
            &json!({"access_token": "a", "token_type": "bearer", "expires_in": 60}),
            &["x".to_string()],
            Some(Secret::new("r0")),
            1000,
        )
        .unwrap();
        assert_eq!(t.expires_at, Some(1060));
        assert_eq!(t.scopes, ["x"]);
        assert_eq!(t.refresh_token.as_ref().map(Secret::expose), Some("r0"));
        assert!(t.expires_within(1000, 60) && !t.expires_within(999, 60));
        // A 60 s token is refreshed in its second half, not on every request.
        assert!(!t.refresh_due(1029) && t.refresh_due(1030));
        let debug = format!("{t:?}");
        assert!(!debug.contains("\"a\"") && !debug.contains("r0"), "{debug}");

        let t = parse_tokens(
            &json!({"access_token": "b", "refresh_token": "r1", "scope": "p q", "expires_in": "5"}),
            &[],
            Some(Secret::new("r0")),
            0,
        )
        .unwrap();
        assert_eq!((t.scopes.len(), t.expires_at), (2, Some(5)));
        assert_eq!(t.refresh_token.as_ref().map(Secret::expose), Some("r1"));
        assert!(parse_tokens(&json!({"token_type": "bearer"}), &[], None, 0).is_err());
        assert!(parse_tokens(
            &json!({"access_token": "a", "token_type": "DPoP"}),
            &[],
            None,
            0
        )
        .is_err());
    }
}
