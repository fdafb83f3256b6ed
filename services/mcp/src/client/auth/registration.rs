//! Who the client is to the authorization server, in the MCP spec's priority order:
//! pre-registered credentials (configuration), a Client ID Metadata Document (an HTTPS URL
//! as `client_id`, when the server advertises `client_id_metadata_document_supported`), or
//! Dynamic Client Registration (RFC 7591). Also the token endpoint authentication method.

use lumina_config::Secret;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use url::Url;

use super::assertion::SigningKey;
use super::discovery::AsMetadata;
use super::error::{clip, AuthError};
use super::net::{oauth_error, read_json, AuthHttp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    PreRegistered,
    MetadataDocument,
    Dynamic,
}

/// A client identity. `Debug` never shows the secret ([`Secret`] redacts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// The `token_endpoint_auth_method` registration settled on, if it said.
    pub auth_method: Option<String>,
    pub redirect_uris: Vec<String>,
    /// The authorization server this identity belongs to.
    pub issuer: String,
    pub kind: ClientKind,
    /// `client_secret_expires_at` (Unix seconds; absent or 0: never).
    pub secret_expires_at: Option<u64>,
    /// A pre-registered client's key for `private_key_jwt` (never stored).
    #[serde(skip)]
    pub signing_key: Option<SigningKey>,
}

/// Pre-registered credentials from configuration (`"oauth": {"client_id", "client_secret"}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreRegistered {
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// For `private_key_jwt` client authentication.
    pub signing_key: Option<SigningKey>,
}

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// HTTP Basic with the URL-encoded id and secret (RFC 6749 §2.3.1).
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form body.
    ClientSecretPost,
    /// A public client: `client_id` in the body, no secret.
    None,
    /// A JWT signed with the client's private key (RFC 7523 §2.2).
    PrivateKeyJwt,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::None => "none",
            AuthMethod::PrivateKeyJwt => "private_key_jwt",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            Self::ClientSecretBasic,
            Self::ClientSecretPost,
            Self::None,
            Self::PrivateKeyJwt,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

impl ClientInfo {
    pub fn pre_registered(p: &PreRegistered, issuer: &str) -> Self {
        Self {
            client_id: p.client_id.clone(),
            client_secret: p.client_secret.clone().filter(|s| !s.is_empty()),
            auth_method: None,
            redirect_uris: Vec::new(),
            issuer: issuer.to_string(),
            kind: ClientKind::PreRegistered,
            secret_expires_at: None,
            signing_key: p.signing_key.clone(),
        }
    }

    /// A Client ID Metadata Document client: a public client named by its document's URL.
    pub fn metadata_document(url: &str, issuer: &str, redirect_uri: &Url) -> Self {
        Self {
            client_id: url.to_string(),
            client_secret: None,
            auth_method: Some(AuthMethod::None.as_str().into()),
            redirect_uris: vec![redirect_uri.to_string()],
            issuer: issuer.to_string(),
            kind: ClientKind::MetadataDocument,
            secret_expires_at: None,
            signing_key: None,
        }
    }

    /// Whether a stored registration can be used again with this server and redirect URI.
    pub fn reusable(&self, issuer: &str, redirect_uri: &Url, now: u64) -> bool {
        self.kind == ClientKind::Dynamic
            && self.issuer == issuer
            && self
                .redirect_uris
                .iter()
                .any(|r| r == redirect_uri.as_str())
            && self
                .secret_expires_at
                .is_none_or(|t| t == 0 || t > now + 60)
    }

    fn has_secret(&self) -> bool {
        self.client_secret.as_ref().is_some_and(|s| !s.is_empty())
    }

    /// The token endpoint authentication method: the registered one when the server allows
    /// it, else Basic / Post with a secret, else none (RFC 8414: an absent list means
    /// `client_secret_basic` only).
    pub fn auth_method(&self, supported: Option<&[String]>) -> AuthMethod {
        let listed = |m: AuthMethod| match supported {
            Some(list) => list.iter().any(|s| s == m.as_str()),
            None => m == AuthMethod::ClientSecretBasic,
        };
        if self.signing_key.is_some() && listed(AuthMethod::PrivateKeyJwt) {
            return AuthMethod::PrivateKeyJwt;
        }
        let usable = |m: AuthMethod| match m {
            AuthMethod::None => true,
            AuthMethod::PrivateKeyJwt => self.signing_key.is_some(),
            _ => self.has_secret(),
        };
        if let Some(m) = self.auth_method.as_deref().and_then(AuthMethod::parse) {
            if usable(m) && (listed(m) || supported.is_none()) {
                return m;
            }
        }
        let secret_methods = [AuthMethod::ClientSecretBasic, AuthMethod::ClientSecretPost];
        if let Some(m) = secret_methods
            .into_iter()
            .find(|m| self.has_secret() && listed(*m))
        {
            return m;
        }
        if listed(AuthMethod::None) || !self.has_secret() {
            AuthMethod::None
        } else {
            AuthMethod::ClientSecretBasic
        }
    }
}

/// The method a new registration asks for: `none` (a public client with PKCE) when allowed.
fn requested_method(meta: &AsMetadata) -> Option<AuthMethod> {
    let Some(list) = &meta.token_endpoint_auth_methods_supported else {
        return Some(AuthMethod::None);
    };
    [
        AuthMethod::None,
        AuthMethod::ClientSecretBasic,
        AuthMethod::ClientSecretPost,
    ]
    .into_iter()
    .find(|m| list.iter().any(|s| s == m.as_str()))
}

/// Registers a client (RFC 7591) for `redirect_uri`.
pub(crate) async fn register(
    http: &AuthHttp,
    meta: &AsMetadata,
    issuer: &str,
    redirect_uri: &Url,
    client_name: &str,
) -> Result<ClientInfo, AuthError> {
    let Some(endpoint) = &meta.registration_endpoint else {
        return Err(AuthError::Needed(
            "the authorization server supports neither client ID metadata documents nor \
             dynamic client registration; set `oauth.client_id` (and `client_secret`) in this \
             server's definition"
                .into(),
        ));
    };
    let endpoint = Url::parse(endpoint).map_err(|e| AuthError::failed(e.to_string()))?;
    let mut body = json!({
        "client_name": client_name,
        "redirect_uris": [redirect_uri.as_str()],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    });
    if let Some(m) = requested_method(meta) {
        body["token_endpoint_auth_method"] = m.as_str().into();
    }
    let resp = http
        .post(&endpoint)
        .json(&body)
        .send()
        .await
        .map_err(|e| AuthError::http("dynamic client registration failed", e))?;
    let status = resp.status();
    let reply = read_json(resp).await.unwrap_or(Value::Null);
    if !status.is_success() {
        let why = oauth_error(&reply).unwrap_or_default();
        return Err(AuthError::failed(format!(
            "dynamic client registration at {endpoint} failed: HTTP {} {why}",
            status.as_u16()
        )));
    }
    let text = |k: &str| reply.get(k).and_then(Value::as_str).map(str::to_string);
    let client_id = text("client_id")
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            AuthError::failed(format!(
                "dynamic client registration at {endpoint} returned no client_id"
            ))
        })?;
    tracing::info!(client_id = %clip(&client_id), "registered an oauth client");
    Ok(ClientInfo {
        client_id,
        client_secret: text("client_secret")
            .filter(|s| !s.is_empty())
            .map(Secret::new),
        auth_method: text("token_endpoint_auth_method"),
        redirect_uris: vec![redirect_uri.to_string()],
        issuer: issuer.to_string(),
        kind: ClientKind::Dynamic,
        secret_expires_at: reply
            .get("client_secret_expires_at")
            .and_then(Value::as_u64),
        signing_key: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(secret: Option<&str>, method: Option<&str>) -> ClientInfo {
        ClientInfo {
            client_id: "c".into(),
            client_secret: secret.map(Secret::new),
            auth_method: method.map(str::to_string),
            redirect_uris: vec!["http://localhost/callback".into()],
            issuer: "https://as".into(),
            kind: ClientKind::Dynamic,
            secret_expires_at: None,
            signing_key: None,
        }
    }

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn auth_method_follows_registration_and_metadata() {
        use AuthMethod as M;
        let basic = list(&["client_secret_basic"]);
        let post = list(&["client_secret_post"]);
        let none = list(&["none"]);
        let cases = [
            (client(Some("s"), None), Some(&basic), M::ClientSecretBasic),
            (
                client(Some("s"), Some("client_secret_post")),
                Some(&post),
                M::ClientSecretPost,
            ),
            (client(None, Some("none")), Some(&none), M::None),
            // A secret the server's list has no use for: a public client.
            (client(Some("s"), None), Some(&none), M::None),
            // No metadata: the RFC default.
            (client(Some("s"), None), None, M::ClientSecretBasic),
            (client(None, None), None, M::None),
            (
                client(Some("s"), Some("client_secret_post")),
                None,
                M::ClientSecretPost,
            ),
            // Registered as basic but the server only lists post: post.
            (
                client(Some("s"), Some("client_secret_basic")),
                Some(&post),
                M::ClientSecretPost,
            ),
        ];
        for (c, supported, want) in cases {
            assert_eq!(c.auth_method(supported.map(Vec::as_slice)), want, "{c:?}");
        }
    }

    #[test]
    fn debug_redacts_the_secret() {
        let c = client(Some("very-secret"), None);
        assert!(!format!("{c:?}").contains("very-secret"));
        let p = PreRegistered {
            client_id: "id".into(),
            client_secret: Some(Secret::new("very-secret")),
            signing_key: None,
        };
        assert!(!format!("{p:?}").contains("very-secret"));
    }

    #[test]
    fn stored_registrations_are_reused_only_when_they_fit() {
        let c = client(Some("s"), None);
        let uri = Url::parse("http://localhost/callback").unwrap();
        let other = Url::parse("http://127.0.0.1:9/callback").unwrap();
        assert!(c.reusable("https://as", &uri, 0));
        assert!(!c.reusable("https://other", &uri, 0));
        assert!(!c.reusable("https://as", &other, 0));
        let expired = ClientInfo {
            secret_expires_at: Some(100),
            ..c
        };
        assert!(!expired.reusable("https://as", &uri, 1000));
    }
}
