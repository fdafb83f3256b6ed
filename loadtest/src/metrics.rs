//! Latency histograms (HdrHistogram, microsecond resolution, 3 significant digits), error
//! counts by kind and plain counters, shared by the tasks of a scenario.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Connect: TCP connect plus the authenticated WebSocket upgrade.
pub const CONNECT: &str = "connect";
/// `hello` round trip on a fresh connection.
pub const HELLO: &str = "hello";
/// From sending `session.submit` until its response.
pub const SUBMIT_ACK: &str = "submit_ack";
/// From sending `session.submit` until the first durable event of that run.
pub const SUBMIT_FIRST_EVENT: &str = "submit_first_event";
/// From sending `session.submit` until the run's terminal event.
pub const SUBMIT_COMPLETION: &str = "submit_completion";
/// |arrival at client B − arrival at client A| of the same event, two clients of a session.
pub const FANOUT_LAG: &str = "fanout_lag";
/// Reconnect, `hello`, `session.resume` after the last seq and backfill up to the head.
pub const RECONNECT_BACKFILL: &str = "reconnect_backfill";
/// `failover`: from `kill -9` of the owner until the session's new owner acknowledged.
pub const KILL_TO_ACK: &str = "kill_to_ack";
/// `failover`: from restarting the killed instance until its `/readyz` answered 200.
pub const RESTART_READY: &str = "restart_ready";

/// Values above this (an hour) are clamped.
const MAX_MICROS: u64 = 3_600_000_000;

/// The percentiles of one metric, in milliseconds, plus the points of its CDF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// `[ms, cumulative fraction]`, at most ~200 points, ascending.
    pub cdf: Vec<[f64; 2]>,
}

/// The data of a scenario (or of one ramp step).
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    histograms: BTreeMap<String, Histogram<u64>>,
    errors: BTreeMap<String, u64>,
    counters: BTreeMap<String, u64>,
    violations: Vec<String>,
    violation_count: u64,
}

/// Violations kept verbatim; the rest are only counted.
const MAX_VIOLATIONS_KEPT: usize = 200;

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

impl Metrics {
    pub fn record(&mut self, metric: &str, value: Duration) {
        if let Some(histogram) = self.histogram(metric) {
            histogram.saturating_record(micros(value).min(MAX_MICROS));
        }
    }

    /// The histogram of `metric`, created empty if missing.
    fn histogram(&mut self, metric: &str) -> Option<&mut Histogram<u64>> {
        if !self.histograms.contains_key(metric) {
            // The bounds are constants that HdrHistogram accepts; if it ever did not, the
            // metric is simply absent from the report.
            let histogram = Histogram::new_with_bounds(1, MAX_MICROS, 3).ok()?;
            self.histograms.insert(metric.to_string(), histogram);
        }
        self.histograms.get_mut(metric)
    }

    pub fn error(&mut self, kind: &str) {
        *self.errors.entry(kind.to_string()).or_default() += 1;
    }

    pub fn count(&mut self, counter: &str, n: u64) {
        *self.counters.entry(counter.to_string()).or_default() += n;
    }

    /// A correctness problem (lost or duplicated event, run that did not complete, …).
    pub fn violation(&mut self, what: String) {
        self.violation_count += 1;
        if self.violations.len() < MAX_VIOLATIONS_KEPT {
            self.violations.push(what);
        }
    }

    pub fn summary(&self, metric: &str) -> Option<Summary> {
        self.histograms.get(metric).map(summarize)
    }

    pub fn summaries(&self) -> BTreeMap<String, Summary> {
        self.histograms
            .iter()
            .map(|(name, h)| (name.clone(), summarize(h)))
            .collect()
    }

    pub fn errors(&self) -> &BTreeMap<String, u64> {
        &self.errors
    }

    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn counters(&self) -> &BTreeMap<String, u64> {
        &self.counters
    }

    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    pub fn violation_count(&self) -> u64 {
        self.violation_count
    }

    /// Every recorded value of every histogram as `[microseconds, count]`, ascending: what
    /// [`Metrics::with_recorded`] reads back, so reports of several generator processes
    /// merge exactly.
    pub fn recorded(&self) -> BTreeMap<String, Vec<[u64; 2]>> {
        self.histograms
            .iter()
            .map(|(name, h)| {
                let values = h
                    .iter_recorded()
                    .map(|v| [v.value_iterated_to(), v.count_at_value()])
                    .collect();
                (name.clone(), values)
            })
            .collect()
    }

    /// Metrics holding what a report recorded: its histograms, errors, counters and
    /// violations.
    pub fn with_recorded(
        recorded: &BTreeMap<String, Vec<[u64; 2]>>,
        errors: &BTreeMap<String, u64>,
        counters: &BTreeMap<String, u64>,
        violations: &[String],
        violation_count: u64,
    ) -> Metrics {
        let mut metrics = Metrics {
            errors: errors.clone(),
            counters: counters.clone(),
            violations: violations
                .iter()
                .take(MAX_VIOLATIONS_KEPT)
                .cloned()
                .collect(),
            violation_count,
            ..Metrics::default()
        };
        for (name, values) in recorded {
            if let Some(histogram) = metrics.histogram(name) {
                for &[micros, count] in values {
                    // In bounds by construction; a hand-edited one is clamped into them.
                    let _ = histogram.record_n(micros.clamp(1, MAX_MICROS), count);
                }
            }
        }
        metrics
    }

    /// Adds everything of `other` (ramp steps into the scenario total).
    pub fn merge(&mut self, other: &Metrics) {
        for (name, h) in &other.histograms {
            match self.histograms.get_mut(name) {
                Some(mine) => {
                    // Same bounds on both sides, so adding cannot fail.
                    let _ = mine.add(h);
                }
                None => {
                    self.histograms.insert(name.clone(), h.clone());
                }
            }
        }
        for (kind, n) in &other.errors {
            *self.errors.entry(kind.clone()).or_default() += n;
        }
        for (name, n) in &other.counters {
            *self.counters.entry(name.clone()).or_default() += n;
        }
        for v in &other.violations {
            if self.violations.len() < MAX_VIOLATIONS_KEPT {
                self.violations.push(v.clone());
            }
        }
        self.violation_count += other.violation_count;
    }
}

fn summarize(h: &Histogram<u64>) -> Summary {
    if h.is_empty() {
        return Summary {
            count: 0,
            min_ms: 0.0,
            mean_ms: 0.0,
            p50_ms: 0.0,
            p90_ms: 0.0,
            p99_ms: 0.0,
            p999_ms: 0.0,
            max_ms: 0.0,
            cdf: Vec::new(),
        };
    }
    let points: Vec<[f64; 2]> = h
        .iter_recorded()
        .map(|v| [ms(v.value_iterated_to()), v.quantile_iterated_to()])
        .collect();
    // Keep at most ~200 points, always including the last.
    let step = points.len().div_ceil(200).max(1);
    let mut cdf: Vec<[f64; 2]> = points.iter().step_by(step).copied().collect();
    if let (Some(last), Some(kept)) = (points.last(), cdf.last()) {
        if kept != last {
            cdf.push(*last);
        }
    }
    Summary {
        count: h.len(),
        min_ms: ms(h.min()),
        mean_ms: h.mean() / 1000.0,
        p50_ms: ms(h.value_at_quantile(0.50)),
        p90_ms: ms(h.value_at_quantile(0.90)),
        p99_ms: ms(h.value_at_quantile(0.99)),
        p999_ms: ms(h.value_at_quantile(0.999)),
        max_ms: ms(h.max()),
        cdf,
    }
}

/// A [`Metrics`] shared between tasks. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Shared(Arc<Mutex<Metrics>>);

impl Shared {
    pub fn new() -> Shared {
        Shared::default()
    }

    /// Every critical section is one update, so a poisoned lock still holds valid data.
    pub fn lock(&self) -> MutexGuard<'_, Metrics> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn record(&self, metric: &str, value: Duration) {
        self.lock().record(metric, value);
    }

    pub fn error(&self, kind: &str) {
        self.lock().error(kind);
    }

    pub fn count(&self, counter: &str, n: u64) {
        self.lock().count(counter, n);
    }

    pub fn violation(&self, what: String) {
        self.lock().violation(what);
    }

    /// A copy of the data so far.
    pub fn snapshot(&self) -> Metrics {
        self.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_cdf() {
        let mut m = Metrics::default();
        for i in 1..=1000u64 {
            m.record(SUBMIT_ACK, Duration::from_micros(i * 1000));
        }
        let s = m.summary(SUBMIT_ACK).unwrap();
        assert_eq!(s.count, 1000);
        assert!((s.p50_ms - 500.0).abs() < 1.0, "{}", s.p50_ms);
        assert!((s.p99_ms - 990.0).abs() < 2.0, "{}", s.p99_ms);
        assert!(s.cdf.len() <= 201);
        assert_eq!(s.cdf.last().unwrap()[1], 1.0);
        assert!(s.cdf.windows(2).all(|w| w[0][0] <= w[1][0]));
    }

    #[test]
    fn merge_adds_up() {
        let mut a = Metrics::default();
        a.record(CONNECT, Duration::from_millis(1));
        a.error("timeout");
        let mut b = Metrics::default();
        b.record(CONNECT, Duration::from_millis(2));
        b.error("timeout");
        b.violation("lost".into());
        a.merge(&b);
        assert_eq!(a.summary(CONNECT).unwrap().count, 2);
        assert_eq!(a.errors().get("timeout"), Some(&2));
        assert_eq!(a.violation_count(), 1);
    }
}
