//! `steady` (S sessions, each submitting at a target rate for D seconds) and `ramp` (the
//! total rate raised step by step until p99 submit→first event passes a threshold).
//!
//! Submits are open-loop: each session has its own schedule, a submit is sent on time even
//! while earlier runs are still going (the server queues it as a follow-up), up to
//! `max_in_flight` unfinished runs per session; a tick beyond that is counted as
//! `skipped_submits` instead.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use tokio::task::JoinSet;

use super::{
    base_report, check_count, check_rate, check_secs, close_slots, open_slots, secs, verify_slots,
    Ctx, Slot, MAX_SECONDS, MAX_SESSIONS,
};
use crate::error::{Error, Result};
use crate::metrics::{self, Metrics, Shared};
use crate::progress::Progress;
use crate::report::{RampDetails, RampStep, Report};
use crate::track::{Terminal, Tracked};

/// `steady` options.
#[derive(Debug, Clone, Serialize)]
pub struct SteadyOptions {
    pub sessions: usize,
    /// Submits per second of each session.
    pub rate_per_session: f64,
    pub duration_secs: f64,
    /// Unfinished runs per session before ticks are skipped.
    pub max_in_flight: usize,
    /// A second client per session (on the next URL) for the fan-out lag.
    pub observers: bool,
    /// Unix time at which the submits begin once the sessions are open (several generator
    /// processes driving one cluster together); none: at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_unix_secs: Option<f64>,
}

/// `ramp` options.
#[derive(Debug, Clone, Serialize)]
pub struct RampOptions {
    pub sessions: usize,
    /// Total submits per second of the first step.
    pub start_rate: f64,
    /// Added to the total rate at each step.
    pub step_rate: f64,
    pub step_secs: f64,
    pub max_steps: usize,
    /// p99 submit→first event that ends the ramp.
    pub threshold_ms: f64,
    pub max_in_flight: usize,
}

impl SteadyOptions {
    fn validate(&self) -> Result<()> {
        check_count("--sessions", self.sessions, MAX_SESSIONS)?;
        check_rate("--rate", self.rate_per_session)?;
        check_secs("--duration", self.duration_secs)?;
        check_count("--max-in-flight", self.max_in_flight, 1000)?;
        if let Some(at) = self.start_at_unix_secs {
            let now = unix_secs(SystemTime::now());
            if !(at.is_finite() && at <= now + MAX_SECONDS) {
                return Err(Error::Input(format!(
                    "--start-at must be a Unix time within {MAX_SECONDS} s from now"
                )));
            }
        }
        Ok(())
    }
}

fn unix_secs(t: SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Sleeps until `at` (Unix seconds). If `at` has passed (the sessions took longer to open
/// than the processes were given), starts at once and counts how late as `start_late_ms`.
async fn start_at(at: f64, metrics: &Shared) {
    let wait = at - unix_secs(SystemTime::now());
    if wait > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    } else {
        metrics.count("start_late_ms", (-wait * 1000.0) as u64);
    }
}

impl RampOptions {
    fn validate(&self) -> Result<()> {
        check_count("--sessions", self.sessions, MAX_SESSIONS)?;
        check_rate("--start-rate", self.start_rate)?;
        check_rate("--step-rate", self.step_rate)?;
        check_secs("--step-duration", self.step_secs)?;
        check_count("--max-steps", self.max_steps, 100)?;
        check_count("--max-in-flight", self.max_in_flight, 1000)?;
        check_secs(
            "--step-duration × --max-steps",
            self.step_secs * self.max_steps as f64,
        )?;
        if !(self.threshold_ms.is_finite() && self.threshold_ms > 0.0) {
            return Err(Error::Input("--threshold-ms must be positive".into()));
        }
        Ok(())
    }
}

/// Submits `prompt` on `slot` and follows the run to its end, recording the latencies.
async fn one_run(slot: Arc<Slot>, prompt: String, metrics: Shared, run_timeout: Duration) -> bool {
    let tracked: &Tracked = &slot.tracked;
    let Ok((run_id, sent)) = tracked.submit(&prompt, &metrics).await else {
        return false;
    };
    slot.add_run(run_id.clone());
    let deadline = sent + run_timeout;
    match tracked.wait_terminal(&run_id, deadline).await {
        Some(times) => {
            let mut m = metrics.lock();
            if let Some(first) = times.first_event {
                m.record(
                    metrics::SUBMIT_FIRST_EVENT,
                    first.saturating_duration_since(sent),
                );
            }
            match times.terminal {
                Some((at, Terminal::Completed)) => {
                    m.record(
                        metrics::SUBMIT_COMPLETION,
                        at.saturating_duration_since(sent),
                    );
                    m.count("runs_completed", 1);
                    true
                }
                Some((_, Terminal::Failed(code))) => {
                    m.error(&format!("run_failed:{code}"));
                    false
                }
                Some((_, Terminal::Interrupted(_))) => {
                    m.error("run_interrupted");
                    false
                }
                None => false,
            }
        }
        None => {
            metrics.error("run_timeout");
            false
        }
    }
}

/// Drives every slot at `rate_per_session` for `duration`, then waits (bounded by the run
/// timeout) for the runs in flight. Latencies go to `metrics`.
async fn drive(
    ctx: &Ctx,
    slots: &[Arc<Slot>],
    rate_per_session: f64,
    duration: Duration,
    max_in_flight: usize,
    metrics: &Shared,
    label: &str,
) {
    let interval = Duration::from_secs_f64(1.0 / rate_per_session);
    let start = Instant::now();
    let end = start + duration;
    let run_timeout = ctx.run_timeout();
    let expected = (duration.as_secs_f64() * rate_per_session * slots.len() as f64).ceil();
    let progress = Progress::new(ctx.progress, expected as u64, label);
    let mut sessions = JoinSet::new();
    for (k, slot) in slots.iter().enumerate() {
        // Spread the sessions' phases over one interval.
        let phase = interval.mul_f64(k as f64 / slots.len().max(1) as f64);
        let slot = Arc::clone(slot);
        let metrics = metrics.clone();
        let prompt = ctx.common.prompt.clone();
        let progress = progress.clone();
        sessions.spawn(async move {
            let mut runs = JoinSet::new();
            let mut next = start + phase;
            while next < end {
                tokio::time::sleep_until(next.into()).await;
                while runs.try_join_next().is_some() {}
                if runs.len() >= max_in_flight {
                    metrics.count("skipped_submits", 1);
                } else {
                    metrics.count("submits", 1);
                    runs.spawn(one_run(
                        Arc::clone(&slot),
                        prompt.clone(),
                        metrics.clone(),
                        run_timeout,
                    ));
                }
                progress.inc(1);
                next += interval;
            }
            let drain_deadline = tokio::time::Instant::now() + run_timeout;
            while !runs.is_empty() {
                if tokio::time::timeout_at(drain_deadline, runs.join_next())
                    .await
                    .is_err()
                {
                    metrics.count("runs_abandoned", runs.len() as u64);
                    runs.abort_all();
                    break;
                }
            }
        });
    }
    while sessions.join_next().await.is_some() {}
    progress.finish();
}

pub(crate) async fn steady(
    ctx: &Ctx,
    o: &SteadyOptions,
    name: &str,
    started: (SystemTime, Instant),
) -> Result<Report> {
    o.validate()?;
    ctx.preflight().await?;
    let slots = open_slots(ctx, o.sessions, o.observers).await?;
    if let Some(at) = o.start_at_unix_secs {
        start_at(at, &ctx.metrics).await;
    }
    drive(
        ctx,
        &slots,
        o.rate_per_session,
        secs(o.duration_secs),
        o.max_in_flight,
        &ctx.metrics,
        "submits",
    )
    .await;
    let verification = verify_slots(ctx, &slots).await;
    close_slots(&slots).await;
    let mut report = base_report(ctx, name, o, started);
    report.verification = Some(verification);
    Ok(report)
}

fn step_row(target_rate: f64, duration: Duration, m: &Metrics) -> RampStep {
    let p = |metric: &str, f: fn(&crate::metrics::Summary) -> f64| {
        m.summary(metric).map(|s| f(&s)).unwrap_or(0.0)
    };
    let submits = m.counter("submits");
    RampStep {
        target_rate,
        achieved_rate: submits as f64 / duration.as_secs_f64().max(1e-6),
        submits,
        p50_ack_ms: p(metrics::SUBMIT_ACK, |s| s.p50_ms),
        p99_ack_ms: p(metrics::SUBMIT_ACK, |s| s.p99_ms),
        p50_first_event_ms: p(metrics::SUBMIT_FIRST_EVENT, |s| s.p50_ms),
        p99_first_event_ms: p(metrics::SUBMIT_FIRST_EVENT, |s| s.p99_ms),
        p99_completion_ms: p(metrics::SUBMIT_COMPLETION, |s| s.p99_ms),
        errors: m.error_total(),
    }
}

pub(crate) async fn ramp(
    ctx: &Ctx,
    o: &RampOptions,
    name: &str,
    started: (SystemTime, Instant),
) -> Result<Report> {
    o.validate()?;
    ctx.preflight().await?;
    let slots = open_slots(ctx, o.sessions, false).await?;
    let step_duration = secs(o.step_secs);
    let mut steps = Vec::new();
    let mut max_ok = None;
    let mut crossed = None;
    for step in 0..o.max_steps {
        let rate = o.start_rate + o.step_rate * step as f64;
        let step_metrics = Shared::new();
        drive(
            ctx,
            &slots,
            rate / slots.len() as f64,
            step_duration,
            o.max_in_flight,
            &step_metrics,
            &format!("step {rate:.0}/s"),
        )
        .await;
        let snapshot = step_metrics.snapshot();
        ctx.metrics.lock().merge(&snapshot);
        let row = step_row(rate, step_duration, &snapshot);
        let passed = row.p99_first_event_ms > o.threshold_ms || row.submits == 0;
        steps.push(row);
        if passed {
            crossed = Some(rate);
            break;
        }
        max_ok = Some(rate);
    }
    let verification = verify_slots(ctx, &slots).await;
    close_slots(&slots).await;
    let mut report = base_report(ctx, name, o, started);
    report.verification = Some(verification);
    report.ramp = Some(RampDetails {
        threshold_ms: o.threshold_ms,
        steps,
        max_rate_within_threshold: max_ok,
        crossed_at_rate: crossed,
    });
    Ok(report)
}
