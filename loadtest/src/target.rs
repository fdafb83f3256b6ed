//! Where the load goes and with which credentials: gateway URLs (checked to be loopback
//! unless `allow_remote`), the bearer token (given, read from a file, minted from a local
//! signing key with `lumina_auth::mint`, or the local backend's token from
//! `<AppRoot>/state/run/backend.json`), and the instances file of `scripts/local-cluster`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::instances::Instances;

/// A bearer token. Never printed: `Debug` shows `Secret(…)`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The token itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// How to obtain the bearer token; the first that is set wins, in field order, then the
/// signing key named by the instances file, then the local endpoint file's token.
#[derive(Debug, Clone, Default)]
pub struct AuthOptions {
    pub token: Option<Secret>,
    pub token_file: Option<PathBuf>,
    /// A `cluster init-local` credentials directory (`<AppRoot>/config/cluster`).
    pub signing_key_dir: Option<PathBuf>,
    /// Claims of a minted token.
    pub sub: String,
    pub tenant: Option<String>,
    pub scopes: Vec<String>,
    pub ttl: Duration,
}

impl AuthOptions {
    /// No explicit credentials; mint for `sub: loadtest` when a signing key is known.
    pub fn auto() -> AuthOptions {
        AuthOptions {
            sub: "loadtest".into(),
            scopes: vec![
                lumina_auth::SCOPE_READ.to_string(),
                lumina_auth::SCOPE_WRITE.to_string(),
            ],
            ttl: Duration::from_secs(6 * 3600),
            ..AuthOptions::default()
        }
    }
}

/// What the user named as the target.
#[derive(Debug, Clone, Default)]
pub struct TargetOptions {
    /// Gateway WebSocket URLs (`ws://127.0.0.1:PORT/v1/ws`); sessions are spread over them.
    pub urls: Vec<String>,
    /// `instances.json` written by `scripts/local-cluster` (URLs, pids, restart commands).
    pub instances_file: Option<PathBuf>,
    /// A local backend's AppRoot: its `state/run/backend.json` gives URL, token and pid.
    pub app_root: Option<PathBuf>,
    pub auth: AuthOptions,
    /// Permit non-loopback targets. Off by default: load goes to this machine only.
    pub allow_remote: bool,
    /// The server process whose RSS the `idle` scenario reads.
    pub server_pid: Option<u32>,
}

/// A resolved target.
#[derive(Debug, Clone)]
pub struct Target {
    pub urls: Vec<String>,
    pub bearer: Option<Secret>,
    pub server_pid: Option<u32>,
    pub instances: Option<Instances>,
    /// Where the credentials came from (for the report; never the token).
    pub auth_source: String,
    pub allow_remote: bool,
}

impl Target {
    /// The URL for the `i`-th connection (round robin).
    pub fn url(&self, i: usize) -> &str {
        let n = self.urls.len().max(1);
        self.urls.get(i % n).map(String::as_str).unwrap_or("")
    }

    pub fn bearer(&self) -> Option<&str> {
        self.bearer.as_ref().map(Secret::expose)
    }
}

/// `<AppRoot>/state/run/backend.json` of a local backend.
#[derive(Debug, Clone, Deserialize)]
struct EndpointFile {
    url: String,
    token: String,
    #[serde(default)]
    pid: Option<u32>,
}

impl TargetOptions {
    /// Checks everything and reads the files. Bad input is [`Error::Input`].
    pub fn resolve(&self) -> Result<Target> {
        let mut urls = Vec::new();
        let mut endpoint_token = None;
        let mut endpoint_pid = None;
        let instances = match &self.instances_file {
            Some(path) => Some(Instances::load(path)?),
            None => None,
        };
        if let Some(app_root) = &self.app_root {
            let path = app_root.join("state/run/backend.json");
            let text = std::fs::read_to_string(&path)
                .map_err(|e| Error::unreadable("the local endpoint file", &path, &e))?;
            let file: EndpointFile = serde_json::from_str(&text).map_err(|e| {
                Error::Input(format!(
                    "{} is not a backend endpoint file: {e}",
                    path.display()
                ))
            })?;
            urls.push(file.url);
            endpoint_token = Some(Secret::new(file.token));
            endpoint_pid = file.pid;
        }
        if let Some(instances) = &instances {
            urls.extend(instances.instances.iter().map(|i| i.ws_url.clone()));
        }
        // Explicit URLs replace the ones from files.
        if !self.urls.is_empty() {
            urls = self.urls.clone();
        }
        if urls.is_empty() {
            return Err(Error::Input(
                "no target: give --url, --instances FILE or --app-root DIR".into(),
            ));
        }
        // Besides loopback: the addresses of instances inside network namespaces of this
        // machine that the instances file names (`local-cluster --netns-instance`).
        let own = instances.as_ref().map(namespace_addrs).unwrap_or_default();
        let allowed = |url: &str, schemes: &[&str]| -> Result<()> {
            match check_url(url, schemes, self.allow_remote) {
                Err(e) if !self.allow_remote => match url::Url::parse(url) {
                    Ok(u) if matches!(u.host(), Some(url::Host::Ipv4(ip)) if own.contains(&ip)) => {
                        check_url(url, schemes, true).map(|_| ())
                    }
                    _ => Err(e),
                },
                other => other.map(|_| ()),
            }
        };
        for url in &urls {
            allowed(url, &["ws"])?;
        }
        if let Some(instances) = &instances {
            for instance in &instances.instances {
                allowed(&instance.ws_url, &["ws"])?;
                allowed(&instance.http_url, &["http"])?;
            }
        }
        if let Some(services) = instances.as_ref().and_then(|i| i.services.as_ref()) {
            check_postgres_url(&services.postgres_url)?;
        }
        let (bearer, auth_source) = self.resolve_auth(instances.as_ref(), endpoint_token)?;
        Ok(Target {
            urls,
            bearer,
            server_pid: self.server_pid.or(endpoint_pid),
            instances,
            auth_source,
            allow_remote: self.allow_remote,
        })
    }

    fn resolve_auth(
        &self,
        instances: Option<&Instances>,
        endpoint_token: Option<Secret>,
    ) -> Result<(Option<Secret>, String)> {
        let auth = &self.auth;
        if let Some(token) = &auth.token {
            return Ok((Some(token.clone()), "token".into()));
        }
        if let Some(path) = &auth.token_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::unreadable("the token file", path, &e))?;
            let token = text.trim();
            if token.is_empty() {
                return Err(Error::Input(format!(
                    "the token file {} is empty",
                    path.display()
                )));
            }
            return Ok((
                Some(Secret::new(token)),
                format!("token file {}", path.display()),
            ));
        }
        let key_dir = auth
            .signing_key_dir
            .clone()
            .or_else(|| instances.and_then(|i| i.auth.as_ref().map(|a| a.signing_key_dir.clone())));
        if let Some(dir) = key_dir {
            let tenant = auth
                .tenant
                .clone()
                .or_else(|| instances.and_then(|i| i.auth.as_ref().map(|a| a.tenant.clone())))
                .unwrap_or_else(|| "local".to_string());
            return Ok((Some(mint(&dir, auth, &tenant)?), minted_source(&dir)));
        }
        if let Some(token) = endpoint_token {
            return Ok((Some(token), "local endpoint file".into()));
        }
        Ok((None, "none".into()))
    }
}

fn minted_source(dir: &Path) -> String {
    format!("minted with the signing key in {}", dir.display())
}

fn mint(dir: &Path, auth: &AuthOptions, tenant: &str) -> Result<Secret> {
    if !dir.is_dir() {
        return Err(Error::Input(format!(
            "the signing key directory {} does not exist (run `lumina-backend cluster init-local`)",
            dir.display()
        )));
    }
    let scopes: Vec<&str> = auth.scopes.iter().map(String::as_str).collect();
    let sub = if auth.sub.is_empty() {
        "loadtest"
    } else {
        &auth.sub
    };
    let ttl = if auth.ttl.is_zero() {
        Duration::from_secs(3600)
    } else {
        auth.ttl
    };
    lumina_auth::mint(dir, sub, tenant, &scopes, ttl)
        .map(Secret::new)
        .map_err(|e| {
            Error::Input(format!(
                "cannot mint a token with the key in {}: {e}",
                dir.display()
            ))
        })
}

/// The namespace addresses of the instances file's `netns` entries whose namespace exists
/// on this machine (`/run/netns/NAME`) and whose address is private (10.0.0.0/8): the
/// namespaces a chaos run created, the only non-loopback addresses load may go to.
pub fn namespace_addrs(instances: &Instances) -> Vec<std::net::Ipv4Addr> {
    instances
        .instances
        .iter()
        .filter_map(|i| i.netns.as_ref())
        .filter(|n| n.ns_addr.octets()[0] == 10)
        .filter(|n| !n.name.contains('/') && Path::new("/run/netns").join(&n.name).exists())
        .map(|n| n.ns_addr)
        .collect()
}

/// The chaos checks' PostgreSQL URL: `postgres://`, on loopback.
pub fn check_postgres_url(raw: &str) -> Result<url::Url> {
    let parsed = url::Url::parse(raw)
        .map_err(|_| Error::Input("the services' postgres_url is not a URL".into()))?;
    // Not a special scheme for `url`: the host is only a string here.
    let loopback = parsed.host_str().is_some_and(|h| {
        h.eq_ignore_ascii_case("localhost")
            || h.trim_matches(['[', ']'])
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    if !matches!(parsed.scheme(), "postgres" | "postgresql") || !loopback {
        return Err(Error::Input(
            "the services' postgres_url must be a postgres:// URL on loopback".into(),
        ));
    }
    Ok(parsed)
}

/// Whether `host` (a URL host) is on this machine: 127.0.0.0/8, ::1 or `localhost`.
pub fn is_loopback_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
        // Only the name itself: any other name may resolve anywhere.
        url::Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
    }
}

fn check_url(url: &str, schemes: &[&str], allow_remote: bool) -> Result<url::Url> {
    let parsed =
        url::Url::parse(url).map_err(|e| Error::Input(format!("invalid URL {url:?}: {e}")))?;
    if !schemes.contains(&parsed.scheme()) {
        return Err(Error::Input(format!(
            "unsupported URL {url:?}: the scheme must be {}",
            schemes.join(" or ")
        )));
    }
    let Some(host) = parsed.host() else {
        return Err(Error::Input(format!("the URL {url:?} has no host")));
    };
    if !allow_remote && !is_loopback_host(&host) {
        return Err(Error::Input(format!(
            "refusing the non-loopback target {url:?}: load goes to 127.0.0.0/8, ::1 or \
             localhost unless --allow-remote is given"
        )));
    }
    if parsed.port_or_known_default().is_none() {
        return Err(Error::Input(format!("the URL {url:?} has no port")));
    }
    Ok(parsed)
}

/// A gateway URL: `ws://` (the client has no TLS), loopback unless `allow_remote`.
pub fn check_ws_url(url: &str, allow_remote: bool) -> Result<url::Url> {
    check_url(url, &["ws"], allow_remote)
}

/// A probe base URL (`http://127.0.0.1:PORT`), loopback unless `allow_remote`.
pub fn check_http_url(url: &str, allow_remote: bool) -> Result<url::Url> {
    check_url(url, &["http"], allow_remote)
}

/// Parses `--bind-ips` entries: IP addresses, loopback unless `allow_remote`.
pub fn parse_bind_ips(list: &[String], allow_remote: bool) -> Result<Vec<IpAddr>> {
    let mut ips = Vec::new();
    for item in list.iter().flat_map(|s| s.split(',')) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let ip: IpAddr = item
            .parse()
            .map_err(|_| Error::Input(format!("--bind-ips: {item:?} is not an IP address")))?;
        if !allow_remote && !ip.is_loopback() {
            return Err(Error::Input(format!(
                "--bind-ips: {ip} is not a loopback address (127.0.0.0/8 or ::1)"
            )));
        }
        ips.push(ip);
    }
    Ok(ips)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_unless_allowed() {
        assert!(check_ws_url("ws://127.0.0.1:1/v1/ws", false).is_ok());
        assert!(check_ws_url("ws://127.3.4.5:1/v1/ws", false).is_ok());
        assert!(check_ws_url("ws://[::1]:1/v1/ws", false).is_ok());
        assert!(check_ws_url("ws://localhost:1/v1/ws", false).is_ok());
        assert!(check_ws_url("ws://10.0.0.1:1/v1/ws", false).is_err());
        assert!(check_ws_url("ws://example.com:1/v1/ws", false).is_err());
        assert!(check_ws_url("ws://evil.localhost:1/v1/ws", false).is_err());
        assert!(check_ws_url("ws://10.0.0.1:1/v1/ws", true).is_ok());
        assert!(check_ws_url("wss://127.0.0.1:1/v1/ws", false).is_err());
        assert!(check_ws_url("not a url", false).is_err());
        assert!(check_http_url("http://127.0.0.1:8080", false).is_ok());
    }

    #[test]
    fn bind_ips() {
        let ips = parse_bind_ips(&["127.0.0.2,127.0.0.3".into()], false).unwrap();
        assert_eq!(ips.len(), 2);
        assert!(parse_bind_ips(&["192.168.1.1".into()], false).is_err());
        assert!(parse_bind_ips(&["nope".into()], false).is_err());
    }

    #[test]
    fn secret_is_not_printed() {
        assert_eq!(format!("{:?}", Secret::new("abc")), "Secret(…)");
    }

    #[test]
    fn missing_files_are_input_errors() {
        let options = TargetOptions {
            app_root: Some("/nonexistent/lumina".into()),
            ..TargetOptions::default()
        };
        let error = options.resolve().unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let none = TargetOptions::default().resolve().unwrap_err();
        assert_eq!(none.exit_code(), 2);
    }
}
