//! Cluster settings, validated fail-closed: a missing setting is a start-up error that names
//! the setting (and its environment variable), never a fall-back to the local profile.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::HeaderName;
use lumina_config::{Secret, Settings};

/// Where the JWKS comes from.
#[derive(Debug, Clone)]
pub enum JwksLocation {
    Url(String),
    File(String),
}

/// Everything `cluster serve` needs. Secrets stay wrapped.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub cluster_id: String,
    pub instance_id: String,
    pub listen_addr: SocketAddr,
    pub advertise_addr: String,
    pub redis_url: Secret,
    pub postgres_url: Secret,
    pub jwt_issuer: String,
    pub jwt_audience: String,
    pub jwks: JwksLocation,
    pub lease_ttl: Duration,
    /// How long drain waits for running turns before interrupting them.
    pub drain_timeout: Duration,
    /// The header an authenticating reverse proxy puts the user's JWT in
    /// (docs/console.md#sign-in); `None`: no such header is read.
    pub jwt_proxy_header: Option<HeaderName>,
    /// `team_distributed`: member tasks of agent teams run on other live instances
    /// (docs/teams.md#distributed-members).
    pub team_distributed: bool,
}

/// A start-up configuration error. The message names settings, never values.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cluster mode is missing required settings: {}", .0.join(", "))]
    Missing(Vec<String>),
    #[error("invalid setting {setting}: {reason}")]
    Invalid { setting: String, reason: String },
}

fn named(key: &str) -> String {
    format!("{key} (LUMINA_{})", key.to_ascii_uppercase())
}

impl ClusterConfig {
    pub fn from_settings(settings: &Settings) -> Result<ClusterConfig, ConfigError> {
        let mut missing = Vec::new();
        let mut need = |key: &str, value: Option<String>| -> String {
            match value.filter(|v| !v.trim().is_empty()) {
                Some(v) => v,
                None => {
                    missing.push(named(key));
                    String::new()
                }
            }
        };
        let cluster_id = need("cluster_id", settings.cluster_id.clone());
        let instance_id = need("instance_id", settings.instance_id.clone());
        let listen = need("cluster_listen_addr", settings.cluster_listen_addr.clone());
        let redis_url = need(
            "redis_url",
            settings.redis_url.as_ref().map(|s| s.expose().to_string()),
        );
        let postgres_url = need(
            "postgres_url",
            settings
                .postgres_url
                .as_ref()
                .map(|s| s.expose().to_string()),
        );
        let jwt_issuer = need("jwt_issuer", settings.jwt_issuer.clone());
        let jwt_audience = need("jwt_audience", settings.jwt_audience.clone());
        let jwks = match (&settings.jwt_jwks_url, &settings.jwt_jwks_file) {
            (Some(url), _) if !url.trim().is_empty() => Some(JwksLocation::Url(url.clone())),
            (_, Some(file)) if !file.trim().is_empty() => Some(JwksLocation::File(file.clone())),
            _ => None,
        };
        if jwks.is_none() {
            missing.push(format!(
                "{} or {}",
                named("jwt_jwks_url"),
                named("jwt_jwks_file")
            ));
        }
        if !missing.is_empty() {
            return Err(ConfigError::Missing(missing));
        }
        let listen_addr: SocketAddr = listen.parse().map_err(|_| ConfigError::Invalid {
            setting: "cluster_listen_addr".into(),
            reason: "expected HOST:PORT, e.g. 0.0.0.0:8080".into(),
        })?;
        let advertise_addr = settings
            .cluster_advertise_addr
            .clone()
            .filter(|a| !a.trim().is_empty())
            .unwrap_or_else(|| listen_addr.to_string());
        let jwt_proxy_header = match settings.jwt_proxy_header.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(name) => Some(proxy_header(name)?),
        };
        Ok(ClusterConfig {
            cluster_id,
            instance_id,
            listen_addr,
            advertise_addr,
            redis_url: Secret::new(redis_url),
            postgres_url: Secret::new(postgres_url),
            jwt_issuer,
            jwt_audience,
            jwks: jwks.unwrap_or(JwksLocation::File(String::new())),
            lease_ttl: Duration::from_millis(settings.cluster_lease_ttl_ms.clamp(1_000, 60_000)),
            drain_timeout: Duration::from_millis(settings.cluster_drain_timeout_ms),
            jwt_proxy_header,
            team_distributed: settings.team_distributed,
        })
    }
}

/// The proxy header's name, checked: a valid header name that is not one a browser sets
/// (or the WebSocket handshake uses) itself, so it can only come from the proxy.
fn proxy_header(name: &str) -> Result<HeaderName, ConfigError> {
    let invalid = |reason: &str| ConfigError::Invalid {
        setting: "jwt_proxy_header".into(),
        reason: reason.into(),
    };
    let header = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| invalid("not an HTTP header name, e.g. X-Forwarded-Access-Token"))?;
    let browser_set = header.as_str() == "cookie"
        || header.as_str() == "origin"
        || header.as_str() == "host"
        || header.as_str().starts_with("sec-");
    if browser_set {
        return Err(invalid(
            "a header the browser sets cannot carry the proxy's JWT",
        ));
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_header_is_a_header_name_no_browser_sets() {
        assert_eq!(
            proxy_header("X-Forwarded-Access-Token").unwrap().as_str(),
            "x-forwarded-access-token"
        );
        assert!(proxy_header("Authorization").is_ok());
        for bad in ["not a header", "Cookie", "Sec-WebSocket-Protocol", "Origin"] {
            let err = proxy_header(bad).unwrap_err().to_string();
            assert!(err.contains("jwt_proxy_header"), "{bad}: {err}");
        }
    }
}
