//! The result of a scenario: one JSON document ([`Report`]) and an HTML page with SVG plots
//! of it ([`html`]). Neither ever contains a token.

mod chaos_html;
pub mod html;
mod merge;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::metrics::{Metrics, Summary};
use crate::target::Target;

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    pub version: String,
    pub scenario: String,
    pub started_at_ms: u64,
    pub duration_ms: u64,
    pub target: TargetSummary,
    /// The scenario's options as given (limits applied).
    pub parameters: serde_json::Value,
    /// True when nothing failed: no counted error and no correctness violation.
    pub ok: bool,
    /// Latency metrics by name (see `crate::metrics` for the names).
    pub metrics: BTreeMap<String, Summary>,
    /// Every recorded latency by metric, `[microseconds, count]`: what `merge` adds up when
    /// several generator processes drove one cluster.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub recorded: BTreeMap<String, Vec<[u64; 2]>>,
    /// Errors by kind (`connect:timeout`, `submit:server:unavailable`, `run_failed:…`).
    pub errors: BTreeMap<String, u64>,
    pub counters: BTreeMap<String, u64>,
    /// Correctness problems (lost or duplicated events, runs that did not complete); the
    /// first 200 verbatim, all counted in `violation_count`.
    pub violations: Vec<String>,
    pub violation_count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<VerificationSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<IdleDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storm: Option<StormDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp: Option<RampDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chaos: Option<ChaosDetails>,
}

/// The target, without credentials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetSummary {
    pub urls: Vec<String>,
    /// Where the bearer token came from (`token file …`, `minted …`, `local endpoint file`).
    pub auth: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<String>,
}

/// The exactly-once check of every client against the journal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VerificationSummary {
    pub sessions: u64,
    /// Clients checked (a session's primary and its observer count as two).
    pub clients: u64,
    /// Journal events compared, summed over clients.
    pub events_checked: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub out_of_order: u64,
    pub mismatched: u64,
    pub runs_submitted: u64,
    /// Submitted runs with exactly one `run.started` and one terminal event in the journal,
    /// or a follow-up queued once and cancelled before it started (how each ended is
    /// counted elsewhere: `runs_completed`, `run_failed:<code>`).
    pub runs_well_formed: u64,
    /// Submitted runs missing from the journal or with lifecycle events counted twice or
    /// out of place (a violation each), unfinished ones apart.
    pub runs_malformed: u64,
    /// Submitted runs accepted (started, or queued as a follow-up) but still open when the
    /// verification's drain ran out (60 s after the load stopped): slow, not wrong; not a
    /// violation.
    #[serde(default)]
    pub runs_unfinished: u64,
    /// Frames the client's view dropped as already applied (normal after a reconnect).
    pub wire_duplicates: u64,
    /// Gaps the client backfilled with `session.events`.
    pub gaps_backfilled: u64,
}

impl VerificationSummary {
    pub fn clean(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.out_of_order == 0
            && self.mismatched == 0
            && self.runs_malformed == 0
    }
}

/// `idle`: what holding the connections cost the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleDetails {
    pub connections_requested: u64,
    pub connections_open: u64,
    /// Connections the server closed during the hold.
    pub closed_early: u64,
    pub hold_ms: u64,
    pub bind_ips: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_pid: Option<u32>,
    /// `VmRSS` of the server before connecting and with every connection open, KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_before_kib: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_after_kib: Option<u64>,
    /// `(after − before) / connections_open`, as the kernel counts resident memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kib_per_connection: Option<f64>,
}

/// `connect-storm`: how fast connections were accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StormDetails {
    pub connections_requested: u64,
    pub connected: u64,
    pub concurrency: u64,
    pub wall_ms: u64,
    pub connects_per_sec: f64,
}

/// `ramp`: one row per step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RampDetails {
    pub threshold_ms: f64,
    pub steps: Vec<RampStep>,
    /// The highest step rate whose p99 submit→first event stayed within the threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rate_within_threshold: Option<f64>,
    /// The first step rate that passed it (none: never passed within the steps run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crossed_at_rate: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RampStep {
    /// Submits per second over all sessions.
    pub target_rate: f64,
    pub achieved_rate: f64,
    pub submits: u64,
    pub p50_ack_ms: f64,
    pub p99_ack_ms: f64,
    pub p50_first_event_ms: f64,
    pub p99_first_event_ms: f64,
    pub p99_completion_ms: f64,
    pub errors: u64,
}

/// `failover`: one row per trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailoverDetails {
    pub trials_run: u64,
    pub trials_ok: u64,
    pub trials: Vec<FailoverTrial>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FailoverTrial {
    pub trial: u64,
    pub session_id: String,
    /// The owner that was killed, and its pid.
    pub killed: String,
    pub killed_pid: u32,
    /// The instance the submit went through.
    pub submitted_via: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_owner: Option<String>,
    pub submit_attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_event_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_ready_ms: Option<f64>,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `chaos`: a summary per fault kind and one row per trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChaosDetails {
    /// The instances' liveness TTL the holds were derived from.
    pub lease_ttl_ms: u64,
    pub kinds: Vec<ChaosKindSummary>,
    pub trials: Vec<ChaosTrial>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChaosKindSummary {
    pub kind: String,
    pub trials_run: u64,
    pub trials_ok: u64,
    /// Invariant violations over the kind's trials.
    pub violations: u64,
    pub acked_submits: u64,
    /// From the fault to the first acknowledged probe submit sent after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_max_ms: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChaosTrial {
    pub kind: String,
    pub trial: u64,
    /// The instance the fault hit (for service faults: the probe session's creator).
    pub target: String,
    /// The probe session's owner just before the fault.
    pub probe_owner: String,
    /// What exactly was done (`kill -9 4242`, `i3 veth down`, `wall clock +5s`, …).
    pub method: String,
    pub hold_ms: f64,
    pub sessions: Vec<String>,
    pub submits: u64,
    pub acked: u64,
    pub events_checked: u64,
    pub fence_samples: u64,
    pub max_fence: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_ready_ms: Option<f64>,
    pub violations: Vec<String>,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl Report {
    /// The common part of every report; the scenario fills in its details afterwards.
    pub fn new(
        scenario: &str,
        parameters: serde_json::Value,
        target: &Target,
        started: (SystemTime, Instant),
        metrics: &Metrics,
    ) -> Report {
        let target = TargetSummary {
            urls: target.urls.clone(),
            auth: target.auth_source.clone(),
            instances: target
                .instances
                .as_ref()
                .map(|i| i.instances.iter().map(|x| x.id.clone()).collect())
                .unwrap_or_default(),
        };
        let duration_ms = u64::try_from(started.1.elapsed().as_millis()).unwrap_or(u64::MAX);
        Report::from_metrics(
            scenario,
            parameters,
            target,
            (unix_ms(started.0), duration_ms),
            metrics,
        )
    }

    /// A report of `metrics` over `span` (`started_at_ms`, `duration_ms`), without
    /// scenario details; `ok` when nothing was counted as an error or a violation.
    fn from_metrics(
        scenario: &str,
        parameters: serde_json::Value,
        target: TargetSummary,
        span: (u64, u64),
        metrics: &Metrics,
    ) -> Report {
        let mut report = Report {
            tool: "lumina-loadtest".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            scenario: scenario.into(),
            started_at_ms: span.0,
            duration_ms: span.1,
            target,
            parameters,
            ok: false,
            metrics: metrics.summaries(),
            recorded: metrics.recorded(),
            errors: metrics.errors().clone(),
            counters: metrics.counters().clone(),
            violations: metrics.violations().to_vec(),
            violation_count: metrics.violation_count(),
            verification: None,
            idle: None,
            storm: None,
            ramp: None,
            failover: None,
            chaos: None,
        };
        report.ok = report.errors.is_empty() && report.violation_count == 0;
        report
    }

    /// `report.json` and `report.html` in `dir` (created if missing); their paths.
    pub fn write(&self, dir: &Path) -> Result<(PathBuf, PathBuf)> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Report(format!("cannot create {}: {e}", dir.display())))?;
        let json_path = dir.join("report.json");
        let json = serde_json::to_string_pretty(self)
            .map_err(|e| Error::Report(format!("cannot encode the report: {e}")))?;
        std::fs::write(&json_path, json + "\n")
            .map_err(|e| Error::Report(format!("cannot write {}: {e}", json_path.display())))?;
        let html_path = dir.join("report.html");
        let page = html::render(self)?;
        std::fs::write(&html_path, page)
            .map_err(|e| Error::Report(format!("cannot write {}: {e}", html_path.display())))?;
        Ok((json_path, html_path))
    }

    /// A few lines for the terminal.
    pub fn text_summary(&self) -> String {
        let mut out = format!(
            "{} {} in {:.1} s: {}\n",
            self.tool,
            self.scenario,
            self.duration_ms as f64 / 1000.0,
            if self.ok { "OK" } else { "FAILED" }
        );
        for (name, s) in &self.metrics {
            out.push_str(&format!(
                "  {name:<20} n={:<7} p50={:>9.2} ms  p99={:>9.2} ms  max={:>9.2} ms\n",
                s.count, s.p50_ms, s.p99_ms, s.max_ms
            ));
        }
        if !self.counters.is_empty() {
            let counters: Vec<String> = self
                .counters
                .iter()
                .map(|(k, n)| format!("{k}={n}"))
                .collect();
            out.push_str(&format!("  counters: {}\n", counters.join(" ")));
        }
        for (kind, n) in &self.errors {
            out.push_str(&format!("  error {kind}: {n}\n"));
        }
        if self.violation_count > 0 {
            out.push_str(&format!("  violations: {}\n", self.violation_count));
            for v in self.violations.iter().take(5) {
                out.push_str(&format!("    {v}\n"));
            }
        }
        if let Some(ramp) = &self.ramp {
            match ramp.max_rate_within_threshold {
                Some(rate) => out.push_str(&format!(
                    "  max rate with p99 submit→first event ≤ {} ms: {rate:.1}/s\n",
                    ramp.threshold_ms
                )),
                None => out.push_str("  even the first step passed the threshold\n"),
            }
        }
        if let Some(storm) = &self.storm {
            out.push_str(&format!(
                "  connected {} of {} in {} ms: {:.0}/s\n",
                storm.connected, storm.connections_requested, storm.wall_ms, storm.connects_per_sec
            ));
        }
        if let Some(idle) = &self.idle {
            if let Some(kib) = idle.kib_per_connection {
                out.push_str(&format!("  server RSS per connection: {kib:.1} KiB\n"));
            }
        }
        if let Some(c) = &self.chaos {
            for k in &c.kinds {
                out.push_str(&format!(
                    "  chaos {:<17} trials {:>4} ok {:>4} violations {:>3}  recovery p50 {} p99 {}\n",
                    k.kind,
                    k.trials_run,
                    k.trials_ok,
                    k.violations,
                    k.recovery_p50_ms.map_or("-".into(), |v| format!("{v:.0} ms")),
                    k.recovery_p99_ms.map_or("-".into(), |v| format!("{v:.0} ms")),
                ));
            }
        }
        if let Some(f) = &self.failover {
            out.push_str(&format!(
                "  failover trials: {} ok of {}\n",
                f.trials_ok, f.trials_run
            ));
        }
        out
    }
}
