//! Push-notification delivery. Every webhook URL goes through `web_fetch`'s SSRF guard
//! (`lumina_tools::builtin::refusal_reason` over the resolved addresses, with the same
//! injectable resolver); the connection is pinned to the vetted addresses, no proxy, no
//! redirects. HTTPS only; plain HTTP to a loopback address only behind the explicit test
//! switch [`PushOptions::allow_loopback`]. Each POST carries the config's token in
//! `X-A2A-Notification-Token`; failures are retried a few times, then logged.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use lumina_tools::builtin::{refusal_reason, Resolver, SystemResolver};

use crate::store::TaskStore;
use crate::types::{StreamResponse, TaskPushNotificationConfig};

/// Delivery settings.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// Allow `http://` webhooks on loopback addresses (tests and the TCK fixture only).
    pub allow_loopback: bool,
    /// One POST. Default 10 s.
    pub timeout: Duration,
    /// Attempts per event. Default 3.
    pub attempts: u32,
}

impl Default for PushOptions {
    fn default() -> Self {
        Self {
            allow_loopback: false,
            timeout: Duration::from_secs(10),
            attempts: 3,
        }
    }
}

/// Why a webhook URL is refused or a delivery failed. Safe to show (no tokens).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    #[error("not a URL: {0}")]
    NotAUrl(String),
    #[error("scheme {0} (only https)")]
    Scheme(String),
    #[error("{0} is {1}")]
    Address(IpAddr, &'static str),
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error("delivery failed: {0}")]
    Delivery(String),
}

#[derive(Clone)]
pub struct PushSender {
    options: PushOptions,
    resolver: Arc<dyn Resolver>,
}

impl PushSender {
    pub fn new(options: PushOptions) -> Self {
        Self::with_resolver(options, Arc::new(SystemResolver))
    }

    pub fn with_resolver(options: PushOptions, resolver: Arc<dyn Resolver>) -> Self {
        Self { options, resolver }
    }

    /// The checks that need no DNS, when a config is created: a URL, https (or http to a
    /// loopback host behind the test switch), and no refused IP literal. Delivery resolves
    /// the name and checks every address ([`Self::vet`]), since DNS answers change.
    pub fn vet_static(&self, url: &str) -> Result<(), PushError> {
        let parsed = url::Url::parse(url).map_err(|e| PushError::NotAUrl(e.to_string()))?;
        let ip = match parsed.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            Some(url::Host::Domain(_)) => None,
            None => return Err(PushError::NotAUrl("no host".into())),
        };
        let local_name = parsed
            .host_str()
            .is_some_and(|h| h.eq_ignore_ascii_case("localhost"));
        let loopback = ip.is_some_and(|ip| ip.is_loopback()) || local_name;
        if loopback && !self.options.allow_loopback {
            let ip = ip.unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
            return Err(PushError::Address(ip, "a loopback address"));
        }
        match parsed.scheme() {
            "https" => {}
            "http" if loopback => {}
            other => return Err(PushError::Scheme(other.to_owned())),
        }
        if let Some(ip) = ip.filter(|ip| !ip.is_loopback()) {
            if let Some(reason) = refusal_reason(ip) {
                return Err(PushError::Address(ip, reason));
            }
        }
        Ok(())
    }

    /// The addresses a POST to `url` may use, or why none. The error is safe to show.
    pub async fn vet(&self, url: &str) -> Result<(url::Url, Vec<SocketAddr>), PushError> {
        let parsed = url::Url::parse(url).map_err(|e| PushError::NotAUrl(e.to_string()))?;
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| PushError::NotAUrl("no port".into()))?;
        let ips: Vec<IpAddr> = match parsed.host() {
            Some(url::Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
            Some(url::Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
            Some(url::Host::Domain(name)) => self
                .resolver
                .resolve(name, port)
                .await
                .map_err(|e| PushError::Resolve(format!("{name}: {e}")))?,
            None => return Err(PushError::NotAUrl("no host".into())),
        };
        if ips.is_empty() {
            return Err(PushError::Resolve("the host has no address".into()));
        }
        let loopback_ok = |ip: &IpAddr| self.options.allow_loopback && ip.is_loopback();
        match parsed.scheme() {
            "https" => {}
            "http" if ips.iter().all(loopback_ok) => {}
            other => return Err(PushError::Scheme(other.to_owned())),
        }
        for ip in &ips {
            if loopback_ok(ip) {
                continue;
            }
            if let Some(reason) = refusal_reason(*ip) {
                return Err(PushError::Address(*ip, reason));
            }
        }
        let addrs = ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect();
        Ok((parsed, addrs))
    }

    /// Sends `event` to every webhook of the task, in the background.
    pub fn dispatch(
        &self,
        store: Arc<dyn TaskStore>,
        owner: &str,
        task_id: &str,
        event: StreamResponse,
    ) {
        let sender = self.clone();
        let owner = owner.to_owned();
        let task_id = task_id.to_owned();
        tokio::spawn(async move {
            let configs = match store.push_configs(&owner, &task_id).await {
                Ok(configs) => configs,
                Err(err) => {
                    tracing::warn!(task_id = %task_id, error = %err, "a2a push configs unreadable");
                    return;
                }
            };
            for config in configs {
                sender.deliver(&config, &event).await;
            }
        });
    }

    async fn deliver(&self, config: &TaskPushNotificationConfig, event: &StreamResponse) {
        let config_id = config.id.clone().unwrap_or_default();
        for attempt in 1..=self.options.attempts.max(1) {
            match self.post(config, event).await {
                Ok(()) => return,
                Err(why) => {
                    tracing::warn!(config_id = %config_id, attempt, error = %why, "a2a push delivery failed");
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                }
            }
        }
    }

    async fn post(
        &self,
        config: &TaskPushNotificationConfig,
        event: &StreamResponse,
    ) -> Result<(), PushError> {
        let (url, addrs) = self.vet(&config.url).await?;
        let host = url.host_str().unwrap_or_default().to_owned();
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(self.options.timeout)
            .resolve_to_addrs(&host, &addrs)
            .build()
            .map_err(|e| PushError::Delivery(format!("client: {e}")))?;
        let body =
            serde_json::to_vec(event).map_err(|e| PushError::Delivery(format!("encode: {e}")))?;
        let mut request = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/a2a+json")
            .body(body);
        if let Some(token) = &config.token {
            request = request.header("X-A2A-Notification-Token", token);
        }
        if let Some(auth) = &config.authentication {
            if let Some(credentials) = &auth.credentials {
                request = request.header(
                    reqwest::header::AUTHORIZATION,
                    format!("{} {credentials}", auth.scheme),
                );
            }
        }
        let response = request
            .send()
            .await
            .map_err(|e| PushError::Delivery(format!("send: {e}")))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(PushError::Delivery(format!("status {}", response.status())))
        }
    }
}
