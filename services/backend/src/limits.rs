//! Per-tenant limits: WebSocket connections and concurrent runs per instance, submits per
//! minute per tenant (cluster-wide through a Redis window in the cluster profile, in the
//! process locally). A refusal is a `rate_limited` error carrying `retry_after_ms`, counted
//! in `lumina_rate_limited_total{limit}`. A limit of 0 is no limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use lumina_config::Settings;
use lumina_protocol::{ErrorCode, ErrorObject};
use serde_json::json;

use crate::metrics::Metrics;

/// The limits, from the settings (read at start-up).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitOptions {
    pub max_connections: u32,
    pub submits_per_minute: u32,
    pub max_concurrent_runs: u32,
}

impl LimitOptions {
    pub fn from_settings(settings: &Settings) -> LimitOptions {
        LimitOptions {
            max_connections: settings.tenant_max_connections,
            submits_per_minute: settings.tenant_submits_per_minute,
            max_concurrent_runs: settings.tenant_max_concurrent_runs,
        }
    }
}

/// Counts a tenant's submits in the current minute.
#[async_trait]
pub trait SubmitWindow: Send + Sync + 'static {
    /// Adds one submit of `tenant` to window `minute` (Unix minutes) and returns the count,
    /// or `None` when it cannot be counted (the submit is then let through).
    async fn count(&self, tenant: &str, minute: u64) -> Option<u64>;
}

/// The local profile's window: one process.
#[derive(Default)]
pub struct LocalWindow {
    counts: Mutex<HashMap<String, (u64, u64)>>,
}

#[async_trait]
impl SubmitWindow for LocalWindow {
    async fn count(&self, tenant: &str, minute: u64) -> Option<u64> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let entry = counts.entry(tenant.to_string()).or_insert((minute, 0));
        if entry.0 != minute {
            *entry = (minute, 0);
        }
        entry.1 += 1;
        Some(entry.1)
    }
}

/// Every limit of one server.
pub struct TenantLimits {
    options: LimitOptions,
    window: Box<dyn SubmitWindow>,
    connections: Mutex<HashMap<String, u32>>,
    metrics: Metrics,
}

/// A connection counted against its tenant until dropped.
pub struct ConnectionPermit {
    limits: Arc<TenantLimits>,
    tenant: String,
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        let mut connections = self.limits.lock_connections();
        if let Some(n) = connections.get_mut(&self.tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                connections.remove(&self.tenant);
            }
        }
    }
}

impl TenantLimits {
    pub fn new(
        options: LimitOptions,
        window: Box<dyn SubmitWindow>,
        metrics: Metrics,
    ) -> Arc<TenantLimits> {
        Arc::new(TenantLimits {
            options,
            window,
            connections: Mutex::new(HashMap::new()),
            metrics,
        })
    }

    fn lock_connections(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.connections.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits one more connection of `tenant`, or refuses it.
    pub fn connect(self: &Arc<Self>, tenant: &str) -> Result<ConnectionPermit, ErrorObject> {
        let max = self.options.max_connections;
        {
            let mut connections = self.lock_connections();
            let n = connections.entry(tenant.to_string()).or_insert(0);
            if max > 0 && *n >= max {
                drop(connections);
                return Err(self.refuse(
                    "connections",
                    format!("the tenant holds {max} connections on this instance already"),
                    Duration::from_secs(5),
                ));
            }
            *n += 1;
        }
        Ok(ConnectionPermit {
            limits: self.clone(),
            tenant: tenant.to_string(),
        })
    }

    /// Counts a submit of `tenant`, or refuses it for the rest of the minute.
    pub async fn submit(&self, tenant: &str) -> Result<(), ErrorObject> {
        let max = self.options.submits_per_minute;
        if max == 0 {
            return Ok(());
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let minute = now.as_secs() / 60;
        match self.window.count(tenant, minute).await {
            Some(n) if n > u64::from(max) => {
                let left = 60_000 - (now.as_millis() % 60_000) as u64;
                Err(self.refuse(
                    "submits_per_minute",
                    format!("the tenant made {max} submits this minute"),
                    Duration::from_millis(left),
                ))
            }
            _ => Ok(()),
        }
    }

    /// Refuses a submit that would start a run while `running` runs of the tenant are
    /// running on this instance.
    pub fn start_run(&self, running: usize) -> Result<(), ErrorObject> {
        let max = self.options.max_concurrent_runs;
        if max > 0 && running >= max as usize {
            return Err(self.refuse(
                "concurrent_runs",
                format!("the tenant has {max} runs running"),
                Duration::from_secs(1),
            ));
        }
        Ok(())
    }

    fn refuse(&self, limit: &str, why: String, retry_after: Duration) -> ErrorObject {
        self.metrics.rate_limited.with_label_values(&[limit]).inc();
        let retry_after_ms = retry_after.as_millis() as u64;
        ErrorObject {
            code: ErrorCode::RateLimited,
            message: format!(
                "rate limited: {why}; retry after {:.1} s",
                retry_after_ms as f64 / 1000.0
            ),
            data: Some(json!({ "limit": limit, "retry_after_ms": retry_after_ms })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(options: LimitOptions) -> Arc<TenantLimits> {
        TenantLimits::new(
            options,
            Box::new(LocalWindow::default()),
            Metrics::new().unwrap(),
        )
    }

    #[test]
    fn connections_are_counted_per_tenant_until_dropped() {
        let limits = limits(LimitOptions {
            max_connections: 2,
            ..LimitOptions::default()
        });
        let a = limits.connect("t1").unwrap();
        let _b = limits.connect("t1").unwrap();
        let refused = limits.connect("t1").err().unwrap();
        assert_eq!(refused.code, ErrorCode::RateLimited);
        assert_eq!(refused.data.as_ref().unwrap()["limit"], "connections");
        assert!(limits.connect("t2").is_ok());
        drop(a);
        assert!(limits.connect("t1").is_ok());
    }

    #[tokio::test]
    async fn submits_per_minute_and_concurrent_runs() {
        let limits = limits(LimitOptions {
            submits_per_minute: 3,
            max_concurrent_runs: 2,
            ..LimitOptions::default()
        });
        for _ in 0..3 {
            limits.submit("t1").await.unwrap();
        }
        let refused = limits.submit("t1").await.unwrap_err();
        let data = refused.data.unwrap();
        assert_eq!(data["limit"], "submits_per_minute");
        assert!(data["retry_after_ms"].as_u64().unwrap() <= 60_000);
        limits.submit("t2").await.unwrap();
        assert!(limits.start_run(1).is_ok());
        assert_eq!(
            limits.start_run(2).unwrap_err().code,
            ErrorCode::RateLimited
        );
    }

    #[tokio::test]
    async fn zero_is_no_limit() {
        let limits = limits(LimitOptions::default());
        let _permits: Vec<_> = (0..100).map(|_| limits.connect("t").unwrap()).collect();
        for _ in 0..100 {
            limits.submit("t").await.unwrap();
        }
        assert!(limits.start_run(10_000).is_ok());
    }
}
