//! Where this server may send requests (push webhooks, remote A2A agents): through
//! `web_fetch`'s public-address guard (`lumina_tools::builtin::refusal_reason` over the
//! resolved addresses, with the same injectable resolver). HTTPS only; plain HTTP to a
//! loopback address only behind the explicit test switch `allow_loopback`. A connection
//! is pinned to the vetted addresses (no proxy, no redirects), so a DNS answer that
//! changes after the check cannot redirect it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use lumina_tools::builtin::{refusal_reason, Resolver, SystemResolver};

/// Why an address is refused. Safe to show (no credentials).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error("not a URL: {0}")]
    NotAUrl(String),
    #[error("scheme {0} (only https)")]
    Scheme(String),
    #[error("{0} is {1}")]
    Address(IpAddr, &'static str),
    #[error("cannot resolve {0}")]
    Resolve(String),
}

/// The public-address guard with its one test switch.
#[derive(Clone)]
pub struct OutboundGuard {
    allow_loopback: bool,
    resolver: Arc<dyn Resolver>,
}

impl std::fmt::Debug for OutboundGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboundGuard")
            .field("allow_loopback", &self.allow_loopback)
            .finish_non_exhaustive()
    }
}

impl Default for OutboundGuard {
    fn default() -> Self {
        Self::new(false, Arc::new(SystemResolver))
    }
}

impl OutboundGuard {
    /// `allow_loopback`: tests and the TCK fixture only.
    pub fn new(allow_loopback: bool, resolver: Arc<dyn Resolver>) -> Self {
        Self {
            allow_loopback,
            resolver,
        }
    }

    /// The checks that need no DNS: a URL, https (or http to a loopback host behind the
    /// test switch), and no refused IP literal. [`Self::vet`] resolves and checks every
    /// address, since DNS answers change.
    pub fn vet_static(&self, url: &str) -> Result<(), GuardError> {
        let parsed = url::Url::parse(url).map_err(|e| GuardError::NotAUrl(e.to_string()))?;
        let ip = match parsed.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            Some(url::Host::Domain(_)) => None,
            None => return Err(GuardError::NotAUrl("no host".into())),
        };
        let local_name = parsed
            .host_str()
            .is_some_and(|h| h.eq_ignore_ascii_case("localhost"));
        let loopback = ip.is_some_and(|ip| ip.is_loopback()) || local_name;
        if loopback && !self.allow_loopback {
            let ip = ip.unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
            return Err(GuardError::Address(ip, "a loopback address"));
        }
        match parsed.scheme() {
            "https" => {}
            "http" if loopback => {}
            other => return Err(GuardError::Scheme(other.to_owned())),
        }
        if let Some(ip) = ip.filter(|ip| !ip.is_loopback()) {
            if let Some(reason) = refusal_reason(ip) {
                return Err(GuardError::Address(ip, reason));
            }
        }
        Ok(())
    }

    /// The addresses a request to `url` may use, or why none.
    pub async fn vet(&self, url: &str) -> Result<(url::Url, Vec<SocketAddr>), GuardError> {
        let parsed = url::Url::parse(url).map_err(|e| GuardError::NotAUrl(e.to_string()))?;
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| GuardError::NotAUrl("no port".into()))?;
        let ips: Vec<IpAddr> = match parsed.host() {
            Some(url::Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
            Some(url::Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
            Some(url::Host::Domain(name)) => self
                .resolver
                .resolve(name, port)
                .await
                .map_err(|e| GuardError::Resolve(format!("{name}: {e}")))?,
            None => return Err(GuardError::NotAUrl("no host".into())),
        };
        if ips.is_empty() {
            return Err(GuardError::Resolve("the host has no address".into()));
        }
        let loopback_ok = |ip: &IpAddr| self.allow_loopback && ip.is_loopback();
        match parsed.scheme() {
            "https" => {}
            "http" if ips.iter().all(loopback_ok) => {}
            other => return Err(GuardError::Scheme(other.to_owned())),
        }
        for ip in &ips {
            if loopback_ok(ip) {
                continue;
            }
            if let Some(reason) = refusal_reason(*ip) {
                return Err(GuardError::Address(*ip, reason));
            }
        }
        let addrs = ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect();
        Ok((parsed, addrs))
    }

    /// A client for one vetted URL: pinned to `addrs`, no proxy, no redirects, and the
    /// whole request (body included) bounded by `timeout` when given.
    pub fn pinned_client(
        &self,
        url: &url::Url,
        addrs: &[SocketAddr],
        timeout: Option<Duration>,
    ) -> reqwest::Result<reqwest::Client> {
        let host = url.host_str().unwrap_or_default().to_owned();
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .resolve_to_addrs(&host, addrs);
        if let Some(timeout) = timeout {
            builder = builder.timeout(timeout);
        }
        builder.build()
    }
}
