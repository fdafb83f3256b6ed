//! Push-notification delivery. Every webhook URL goes through the public-address guard
//! ([`crate::outbound`], `web_fetch`'s): the connection is pinned to the vetted addresses,
//! no proxy, no redirects. HTTPS only; plain HTTP to a loopback address only behind the
//! explicit test switch [`PushOptions::allow_loopback`]. Each POST carries the config's token in
//! `X-A2A-Notification-Token`; failures are retried a few times, then logged.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use lumina_tools::builtin::{Resolver, SystemResolver};

use crate::outbound::{GuardError, OutboundGuard};

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

impl From<GuardError> for PushError {
    fn from(error: GuardError) -> Self {
        match error {
            GuardError::NotAUrl(why) => Self::NotAUrl(why),
            GuardError::Scheme(scheme) => Self::Scheme(scheme),
            GuardError::Address(ip, why) => Self::Address(ip, why),
            GuardError::Resolve(why) => Self::Resolve(why),
        }
    }
}

#[derive(Clone)]
pub struct PushSender {
    options: PushOptions,
    guard: OutboundGuard,
}

impl PushSender {
    pub fn new(options: PushOptions) -> Self {
        Self::with_resolver(options, Arc::new(SystemResolver))
    }

    pub fn with_resolver(options: PushOptions, resolver: Arc<dyn Resolver>) -> Self {
        let guard = OutboundGuard::new(options.allow_loopback, resolver);
        Self { options, guard }
    }

    /// The checks that need no DNS, when a config is created: a URL, https (or http to a
    /// loopback host behind the test switch), and no refused IP literal. Delivery resolves
    /// the name and checks every address ([`Self::vet`]), since DNS answers change.
    pub fn vet_static(&self, url: &str) -> Result<(), PushError> {
        Ok(self.guard.vet_static(url)?)
    }

    /// The addresses a POST to `url` may use, or why none. The error is safe to show.
    pub async fn vet(&self, url: &str) -> Result<(url::Url, Vec<SocketAddr>), PushError> {
        Ok(self.guard.vet(url).await?)
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
        let client = self
            .guard
            .pinned_client(&url, &addrs, Some(self.options.timeout))
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
