//! Finding the authorization server (MCP 2025-11-25 "Authorization Server Discovery").
//!
//! 1. Protected Resource Metadata (RFC 9728): the `resource_metadata` URL of the
//!    `WWW-Authenticate` challenge, else `/.well-known/oauth-protected-resource{path}`, then
//!    `/.well-known/oauth-protected-resource` at the server's origin. Its `resource` must be
//!    this server (same origin, a path prefix); it becomes the RFC 8707 `resource` parameter.
//! 2. Authorization server metadata for each listed issuer, in the spec's order: RFC 8414
//!    path insertion, OIDC path insertion, OIDC path appending (no path: RFC 8414 then
//!    OIDC). The `issuer` must match; PKCE `S256` must be advertised.
//! 3. No PRM at all (2025-03-26 servers): metadata at the MCP server's origin, else the
//!    default endpoints `/authorize`, `/token` and `/register` there.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use super::error::{clip, AuthError};
use super::net::{is_secure_endpoint, AuthHttp, Fetched};
use super::wellknown::{
    authorization_server_metadata_urls, canonical_resource, origin,
    protected_resource_metadata_urls, resource_matches,
};

/// Authorization server metadata (RFC 8414 / OpenID Connect Discovery): the fields used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AsMetadata {
    pub issuer: Option<String>,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub scopes_supported: Option<Vec<String>>,
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub grant_types_supported: Option<Vec<String>>,
    pub client_id_metadata_document_supported: bool,
}

/// Everything discovery found out; persisted with the tokens so a restart can refresh.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovered {
    /// The PRM document used; `None` for a 2025-03-26 server without one.
    pub prm_url: Option<String>,
    /// The RFC 8707 `resource` parameter: the PRM's `resource`, else the server's URL.
    pub resource: String,
    /// `scopes_supported` of the PRM.
    pub prm_scopes: Option<Vec<String>>,
    /// The authorization server's identifier (its issuer; the server's origin without PRM).
    pub issuer: String,
    pub metadata: AsMetadata,
}

/// Why authorization server metadata (or the default endpoints) cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    #[error("no `{0}`")]
    Missing(String),
    #[error("invalid `{key}`: {source}")]
    InvalidUrl {
        key: String,
        #[source]
        source: url::ParseError,
    },
    /// An endpoint (named by its metadata key, if any) that may not receive credentials.
    #[error("{}{url} is neither HTTPS nor loopback HTTP", .key.as_ref().map(|k| format!("`{k}` ")).unwrap_or_default())]
    Insecure { key: Option<String>, url: String },
    #[error(
        "it does not advertise PKCE `S256` in `code_challenge_methods_supported`; refusing to \
         authorize"
    )]
    NoPkce,
    /// A default endpoint path that does not join the server's origin.
    #[error("{0}")]
    Join(#[source] url::ParseError),
    #[error("the authorization server metadata at {url} is unusable: {source}")]
    Unusable {
        url: String,
        #[source]
        source: Box<MetadataError>,
    },
    #[error("the metadata at {url} names issuer `{named}`, not `{issuer}`")]
    IssuerMismatch {
        url: String,
        named: String,
        issuer: String,
    },
}

impl AsMetadata {
    /// Parses and validates a metadata document. `require_pkce`: refuse without `S256` in
    /// `code_challenge_methods_supported` (MCP "Authorization Code Protection").
    pub fn parse(v: &Value, require_pkce: bool) -> Result<Self, MetadataError> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let list = |k: &str| {
            v.get(k).and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
        };
        let endpoint = |k: &str| -> Result<String, MetadataError> {
            let raw = text(k).ok_or_else(|| MetadataError::Missing(k.to_string()))?;
            let url = Url::parse(&raw).map_err(|source| MetadataError::InvalidUrl {
                key: k.to_string(),
                source,
            })?;
            if !is_secure_endpoint(&url) {
                return Err(MetadataError::Insecure {
                    key: Some(k.to_string()),
                    url: url.to_string(),
                });
            }
            Ok(url.to_string())
        };
        if require_pkce {
            let methods = list("code_challenge_methods_supported").unwrap_or_default();
            if !methods.iter().any(|m| m == "S256") {
                return Err(MetadataError::NoPkce);
            }
        }
        Ok(Self {
            issuer: text("issuer"),
            authorization_endpoint: endpoint("authorization_endpoint")?,
            token_endpoint: endpoint("token_endpoint")?,
            registration_endpoint: match text("registration_endpoint") {
                Some(_) => Some(endpoint("registration_endpoint")?),
                None => None,
            },
            scopes_supported: list("scopes_supported"),
            token_endpoint_auth_methods_supported: list("token_endpoint_auth_methods_supported"),
            grant_types_supported: list("grant_types_supported"),
            client_id_metadata_document_supported: v
                .get("client_id_metadata_document_supported")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// The 2025-03-26 defaults when a server publishes no metadata: `/authorize`, `/token`,
    /// `/register` at its origin.
    pub fn fallback(origin: &Url) -> Result<Self, MetadataError> {
        let at = |p: &str| -> Result<String, MetadataError> {
            let url = origin.join(p).map_err(MetadataError::Join)?;
            if !is_secure_endpoint(&url) {
                return Err(MetadataError::Insecure {
                    key: None,
                    url: url.to_string(),
                });
            }
            Ok(url.to_string())
        };
        Ok(Self {
            issuer: None,
            authorization_endpoint: at("/authorize")?,
            token_endpoint: at("/token")?,
            registration_endpoint: Some(at("/register")?),
            scopes_supported: None,
            token_endpoint_auth_methods_supported: None,
            grant_types_supported: None,
            client_id_metadata_document_supported: false,
        })
    }

    pub fn supports_grant(&self, grant: &str) -> bool {
        self.grant_types_supported
            .as_ref()
            .is_none_or(|g| g.iter().any(|x| x == grant))
    }
}

/// Runs discovery for `server`; `hint` is the challenge's `resource_metadata`.
pub(crate) async fn discover(
    http: &AuthHttp,
    server: &Url,
    hint: Option<&str>,
) -> Result<Discovered, AuthError> {
    let mut candidates = Vec::new();
    if let Some(h) = hint {
        match server.join(h) {
            Ok(u) if matches!(u.scheme(), "https" | "http") => candidates.push(u),
            _ => tracing::debug!("ignoring an unusable resource_metadata URL"),
        }
    }
    candidates.extend(protected_resource_metadata_urls(server));
    for url in candidates {
        match http.get_json(&url).await {
            Fetched::Json(prm) => return from_prm(http, server, &url, &prm).await,
            Fetched::Missing(why) => {
                tracing::debug!(%url, why, "no protected resource metadata here")
            }
        }
    }
    legacy(http, server).await
}

async fn from_prm(
    http: &AuthHttp,
    server: &Url,
    prm_url: &Url,
    prm: &Value,
) -> Result<Discovered, AuthError> {
    let resource = prm
        .get("resource")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| canonical_resource(server));
    if !resource_matches(server, &resource) {
        return Err(AuthError::failed(format!(
            "the protected resource metadata at {prm_url} is for `{}`, not for this server; \
             refusing to authorize",
            clip(&resource)
        )));
    }
    let servers: Vec<&str> = prm
        .get("authorization_servers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if servers.is_empty() {
        return Err(AuthError::failed(format!(
            "the protected resource metadata at {prm_url} lists no authorization server"
        )));
    }
    let prm_scopes = prm
        .get("scopes_supported")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        });
    let mut problems = Vec::new();
    for issuer in servers {
        let Ok(issuer_url) = Url::parse(issuer) else {
            problems.push(format!("`{}` is not a URL", clip(issuer)));
            continue;
        };
        match issuer_metadata(http, &issuer_url, true).await {
            Ok(Some(metadata)) => {
                return Ok(Discovered {
                    prm_url: Some(prm_url.to_string()),
                    resource,
                    prm_scopes,
                    issuer: issuer.to_string(),
                    metadata,
                })
            }
            Ok(None) => problems.push(format!("found no metadata for {issuer}")),
            Err(e) => problems.push(e.to_string()),
        }
    }
    Err(AuthError::failed(format!(
        "no usable authorization server metadata: {}",
        problems.join("; ")
    )))
}

/// The first metadata document of `issuer` (`None`: there is none). `check_issuer`: its
/// `issuer` must be `issuer` (RFC 8414 §3.3; a trailing `/` aside). A document that is
/// found but unusable is an error, not a reason to look further.
async fn issuer_metadata(
    http: &AuthHttp,
    issuer: &Url,
    check_issuer: bool,
) -> Result<Option<AsMetadata>, MetadataError> {
    for url in authorization_server_metadata_urls(issuer) {
        let doc = match http.get_json(&url).await {
            Fetched::Json(doc) => doc,
            Fetched::Missing(why) => {
                tracing::debug!(%url, why, "no authorization server metadata here");
                continue;
            }
        };
        let meta = AsMetadata::parse(&doc, true).map_err(|e| MetadataError::Unusable {
            url: url.to_string(),
            source: Box::new(e),
        })?;
        let same = |a: &str| a.trim_end_matches('/') == issuer.as_str().trim_end_matches('/');
        if check_issuer && !meta.issuer.as_deref().is_some_and(same) {
            return Err(MetadataError::IssuerMismatch {
                url: url.to_string(),
                named: clip(meta.issuer.as_deref().unwrap_or("")),
                issuer: issuer.to_string(),
            });
        }
        return Ok(Some(meta));
    }
    Ok(None)
}

/// 2025-03-26: the MCP server's origin is the authorization base URL.
async fn legacy(http: &AuthHttp, server: &Url) -> Result<Discovered, AuthError> {
    let base = origin(server)?;
    let metadata = match issuer_metadata(http, &base, false).await {
        Ok(Some(m)) => m,
        Ok(None) => {
            tracing::debug!("no authorization server metadata; using the default endpoints");
            AsMetadata::fallback(&base).map_err(|e| {
                AuthError::failed(format!("cannot use the default OAuth endpoints: {e}"))
            })?
        }
        Err(e) => return Err(AuthError::Failed(e.to_string())),
    };
    Ok(Discovered {
        prm_url: None,
        resource: canonical_resource(server),
        prm_scopes: None,
        issuer: base.as_str().trim_end_matches('/').to_string(),
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_needs_pkce_and_secure_endpoints() {
        let doc = serde_json::json!({
            "issuer": "https://a.example",
            "authorization_endpoint": "https://a.example/authorize",
            "token_endpoint": "https://a.example/token",
            "code_challenge_methods_supported": ["S256"],
            "client_id_metadata_document_supported": true,
        });
        let m = AsMetadata::parse(&doc, true).unwrap();
        assert!(m.client_id_metadata_document_supported);
        assert!(m.supports_grant("authorization_code"));
        let mut no_pkce = doc.clone();
        no_pkce["code_challenge_methods_supported"] = serde_json::json!(["plain"]);
        assert!(AsMetadata::parse(&no_pkce, true).is_err());
        let mut insecure = doc;
        insecure["token_endpoint"] = "http://a.example/token".into();
        assert!(AsMetadata::parse(&insecure, true).is_err());
        let legacy = AsMetadata::fallback(&Url::parse("http://localhost:3000").unwrap()).unwrap();
        assert_eq!(legacy.token_endpoint, "http://localhost:3000/token");
    }
}
