//! Prometheus metrics served on `/metrics`. Labels are bounded (no session ids); every metric
//! is documented in `docs/operations.md`.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// All metrics of one backend process.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    pub sessions_owned: IntGauge,
    pub leases_acquired: IntCounter,
    pub leases_renewed: IntCounter,
    pub leases_lost: IntCounter,
    pub fenced_writes_refused: IntCounter,
    pub rpc_latency: Histogram,
    pub rpc_requests: IntCounterVec,
    pub rate_limited: IntCounterVec,
    pub ws_connections: IntGauge,
    pub ws_auth_failures: IntCounter,
    pub journal_append_latency: Histogram,
    pub draining: IntGauge,
}

fn counter(registry: &Registry, name: &str, help: &str) -> prometheus::Result<IntCounter> {
    let c = IntCounter::new(name, help)?;
    registry.register(Box::new(c.clone()))?;
    Ok(c)
}

fn gauge(registry: &Registry, name: &str, help: &str) -> prometheus::Result<IntGauge> {
    let g = IntGauge::new(name, help)?;
    registry.register(Box::new(g.clone()))?;
    Ok(g)
}

fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    buckets: Vec<f64>,
) -> prometheus::Result<Histogram> {
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))?;
    registry.register(Box::new(h.clone()))?;
    Ok(h)
}

/// Latency buckets from 100 µs to 10 s.
fn latency_buckets() -> Vec<f64> {
    vec![
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
        5.0, 10.0,
    ]
}

impl Metrics {
    pub fn new() -> prometheus::Result<Metrics> {
        let registry = Registry::new();
        let rpc_requests = IntCounterVec::new(
            Opts::new(
                "lumina_rpc_requests_total",
                "Cross-instance RPC requests sent, by outcome (ok, error, timeout).",
            ),
            &["outcome"],
        )?;
        registry.register(Box::new(rpc_requests.clone()))?;
        let rate_limited = IntCounterVec::new(
            Opts::new(
                "lumina_rate_limited_total",
                "Requests refused by a per-tenant limit, by limit (connections, submits_per_minute, concurrent_runs).",
            ),
            &["limit"],
        )?;
        registry.register(Box::new(rate_limited.clone()))?;
        // Every limit's series exists from the start (a scrape shows 0, not nothing).
        for limit in ["connections", "submits_per_minute", "concurrent_runs"] {
            rate_limited.with_label_values(&[limit]);
        }
        Ok(Metrics {
            sessions_owned: gauge(
                &registry,
                "lumina_sessions_owned",
                "Sessions this instance currently owns (holds the lease of).",
            )?,
            leases_acquired: counter(
                &registry,
                "lumina_leases_acquired_total",
                "Session leases acquired by this instance.",
            )?,
            leases_renewed: counter(
                &registry,
                "lumina_leases_renewed_total",
                "Liveness heartbeats confirmed (each renews every lease the instance holds).",
            )?,
            leases_lost: counter(
                &registry,
                "lumina_leases_lost_total",
                "Session leases lost (liveness not confirmed in time, or the registry entry lapsed).",
            )?,
            fenced_writes_refused: counter(
                &registry,
                "lumina_fenced_writes_refused_total",
                "Journal writes refused because a newer fence was recorded for the session.",
            )?,
            rpc_latency: histogram(
                &registry,
                "lumina_rpc_latency_seconds",
                "Round trip of cross-instance RPC requests through Redis Streams.",
                latency_buckets(),
            )?,
            rpc_requests,
            rate_limited,
            ws_connections: gauge(
                &registry,
                "lumina_websocket_connections",
                "Open WebSocket connections.",
            )?,
            ws_auth_failures: counter(
                &registry,
                "lumina_websocket_auth_failures_total",
                "WebSocket upgrades refused with 401.",
            )?,
            journal_append_latency: histogram(
                &registry,
                "lumina_journal_append_seconds",
                "Latency of journal appends (one transaction).",
                latency_buckets(),
            )?,
            draining: gauge(
                &registry,
                "lumina_draining",
                "1 while this instance is draining or shutting down.",
            )?,
            registry,
        })
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        if let Err(err) = TextEncoder::new().encode(&self.registry.gather(), &mut buffer) {
            tracing::error!(error = %err, "metrics encoding failed");
        }
        String::from_utf8(buffer).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_metric_family() {
        let m = Metrics::new().unwrap();
        m.rpc_requests.with_label_values(&["ok"]).inc();
        m.rate_limited.with_label_values(&["connections"]).inc();
        m.rpc_latency.observe(0.001);
        let text = m.render();
        for name in [
            "lumina_sessions_owned",
            "lumina_leases_acquired_total",
            "lumina_leases_renewed_total",
            "lumina_leases_lost_total",
            "lumina_fenced_writes_refused_total",
            "lumina_rpc_latency_seconds_bucket",
            "lumina_rpc_requests_total",
            "lumina_rate_limited_total",
            "lumina_websocket_connections",
            "lumina_websocket_auth_failures_total",
            "lumina_journal_append_seconds_bucket",
            "lumina_draining",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }
}
