//! `chaos`: faults injected while load runs, then the invariants checked against
//! PostgreSQL. Per fault kind, per trial: fresh sessions under load through every gateway
//! ([`load`]), the fault injected into the probe session's owner or into a service
//! ([`faults`]), held, healed, the time until the cluster acknowledged a submit of the
//! probe session again, then — load stopped and every run ended — the journal checks of
//! [`journal`] for every session of the trial. Needs the instances file of
//! `scripts/local-cluster --chaos` (`--netns-instance` for `partition` and
//! `slow-postgres`, `--faketime-instance` for `clock-skew`).

pub(crate) mod faults;
mod journal;
mod load;

use std::collections::HashMap;
use std::process::Child;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

pub use faults::FaultKind;

use super::{base_report, check_count, check_secs, secs, Ctx, MAX_TRIALS};
use crate::error::{Error, HarnessError, Result};
use crate::instances::{self, Instances};
use crate::metrics::Shared;
use crate::progress::Progress;
use crate::report::{ChaosDetails, ChaosKindSummary, ChaosTrial, Report};
use faults::{Fault, FaultSettings};
use journal::{Acked, Journal, Sampler};
use load::{Load, LoadSettings};

/// The longest a whole chaos run may be given (`--max-duration`).
pub const MAX_CHAOS_SECONDS: f64 = 48.0 * 3600.0;

/// `chaos` options.
#[derive(Debug, Clone, Serialize)]
pub struct ChaosOptions {
    pub faults: Vec<FaultKind>,
    /// Trials per fault kind.
    pub trials: usize,
    /// Sessions under load per trial.
    pub sessions: usize,
    /// Milliseconds between a session's submits.
    pub interval_ms: u64,
    pub max_in_flight: usize,
    /// Seconds one submit attempt may take before the client moves to another gateway.
    pub attempt_timeout_secs: f64,
    /// Seconds a submit may take, retries included, before it is given up.
    pub submit_timeout_secs: f64,
    /// Milliseconds a fault lasts (0: per kind, from the lease TTL).
    pub hold_ms: u64,
    /// The liveness TTL the instances run with (0: from the first instance's env file,
    /// else 2000).
    pub lease_ttl_ms: u64,
    /// Wall-clock offset of `clock-skew`, milliseconds (applied as + and − in turn).
    pub skew_ms: u64,
    /// Rate PostgreSQL traffic is shaped to by `slow-postgres`, kbit/s.
    pub slow_kbit: u32,
    /// Seconds the cluster may take to acknowledge a probe submit after the fault.
    pub recovery_timeout_secs: f64,
    /// Seconds an instance may take to be ready again.
    pub ready_timeout_secs: f64,
    /// No new trial starts after this many seconds.
    pub max_duration_secs: f64,
}

impl Default for ChaosOptions {
    fn default() -> ChaosOptions {
        ChaosOptions {
            faults: FaultKind::ALL.to_vec(),
            trials: 100,
            sessions: 3,
            interval_ms: 300,
            max_in_flight: 2,
            attempt_timeout_secs: 5.0,
            submit_timeout_secs: 60.0,
            hold_ms: 0,
            lease_ttl_ms: 0,
            skew_ms: 5000,
            slow_kbit: 16,
            recovery_timeout_secs: 60.0,
            ready_timeout_secs: 60.0,
            max_duration_secs: 6.0 * 3600.0,
        }
    }
}

impl ChaosOptions {
    fn validate(&self) -> Result<()> {
        check_count("--trials", self.trials, MAX_TRIALS)?;
        check_count("--sessions", self.sessions, 50)?;
        check_count("--max-in-flight", self.max_in_flight, 100)?;
        check_secs("--attempt-timeout", self.attempt_timeout_secs)?;
        check_secs("--submit-timeout", self.submit_timeout_secs)?;
        check_secs("--recovery-timeout", self.recovery_timeout_secs)?;
        check_secs("--ready-timeout", self.ready_timeout_secs)?;
        if !(self.max_duration_secs > 0.0 && self.max_duration_secs <= MAX_CHAOS_SECONDS) {
            return Err(Error::Input(format!(
                "--max-duration must be more than 0 and at most {MAX_CHAOS_SECONDS} seconds"
            )));
        }
        if !(10..=60_000).contains(&self.interval_ms) {
            return Err(Error::Input("--interval-ms must be 10..60000".into()));
        }
        if self.hold_ms > 600_000 || self.skew_ms > 3_600_000 || self.lease_ttl_ms > 600_000 {
            return Err(Error::Input(
                "--hold-ms, --lease-ttl-ms (≤ 600000) or --skew-ms (≤ 3600000) too large".into(),
            ));
        }
        if !(1..=1_000_000).contains(&self.slow_kbit) {
            return Err(Error::Input("--slow-kbit must be 1..1000000".into()));
        }
        if self.faults.is_empty() {
            return Err(Error::Input("--fault names no fault".into()));
        }
        Ok(())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn lease_ttl(o: &ChaosOptions, instances: &Instances) -> Duration {
    if o.lease_ttl_ms > 0 {
        return Duration::from_millis(o.lease_ttl_ms);
    }
    let from_env = instances.instances[0]
        .restart
        .as_ref()
        .and_then(|r| r.env_file.as_ref())
        .and_then(|f| instances::read_env_file(f).ok())
        .and_then(|env| env.get("LUMINA_CLUSTER_LEASE_TTL_MS")?.parse().ok());
    Duration::from_millis(from_env.unwrap_or(2000))
}

fn http_base(instances: &Instances, i: usize) -> Result<url::Url> {
    let raw = &instances.instances[i].http_url;
    url::Url::parse(raw).map_err(|e| Error::Input(format!("invalid http_url {raw:?}: {e}")))
}

async fn all_ready(instances: &Instances, timeout: Duration) -> Result<()> {
    for i in 0..instances.instances.len() {
        let base = http_base(instances, i)?;
        instances::wait_ready(&base, timeout)
            .await
            .map_err(|e| Error::Target(format!("instance {}: {e}", instances.instances[i].id)))?;
    }
    Ok(())
}

struct Run<'a> {
    ctx: &'a Ctx,
    o: &'a ChaosOptions,
    instances: &'a Instances,
    urls: Vec<String>,
    journal: Journal,
    ttl: Duration,
    settings: FaultSettings,
    children: HashMap<usize, Child>,
}

impl Run<'_> {
    /// One trial. `Err` only when the cluster cannot be used any more.
    async fn trial(&mut self, kind: FaultKind, n: usize) -> Result<ChaosTrial> {
        let ctx = self.ctx;
        let mut row = ChaosTrial {
            kind: kind.name().into(),
            trial: n as u64,
            ..ChaosTrial::default()
        };
        all_ready(self.instances, secs(self.o.ready_timeout_secs)).await?;
        let target = faults::pick_target(kind, self.instances, n);
        row.target = self.instances.instances[target].id.clone();
        let scratch = Shared::new();
        let opened = load::open(ctx, &scratch, &self.urls, target, self.o.sessions).await;
        let sessions = match opened {
            Ok(s) => s,
            Err(e) => {
                ctx.metrics.error("setup");
                row.error = Some(e.to_string());
                return Ok(row);
            }
        };
        let ids: Vec<String> = sessions.iter().map(|s| s.session_id.clone()).collect();
        row.sessions = ids.clone();
        let sampler = Sampler::start(self.journal.clone(), ids.clone());
        let settings = LoadSettings {
            interval: Duration::from_millis(self.o.interval_ms),
            max_in_flight: self.o.max_in_flight,
            attempt_timeout: secs(self.o.attempt_timeout_secs),
            submit_timeout: secs(self.o.submit_timeout_secs),
        };
        let mut load = Load::start(ctx, &scratch, &self.urls, sessions, &settings);
        // Warm-up: every session served once, and who owns the probe session.
        let warm = Instant::now() + Duration::from_secs(20);
        while load.sessions.iter().any(|s| s.acked_count() == 0) && Instant::now() < warm {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Some(client) = load.sessions[0].client.client() {
            if let Ok(info) = client.session_info(&ids[0]).await {
                row.probe_owner = info.owner;
            }
        }
        let hold = if self.o.hold_ms > 0 {
            Duration::from_millis(self.o.hold_ms)
        } else {
            kind.default_hold(self.ttl)
        };
        row.hold_ms = ms(hold);
        // The fault, held while the load goes on, then healed.
        let mut fault = Fault::new(
            kind,
            self.instances,
            target,
            n,
            &self.settings,
            &mut self.children,
        );
        let injected = fault.inject();
        row.method = fault.method.clone();
        if let Err(e) = injected {
            drop(fault);
            load.stop().await;
            ctx.metrics.error("inject");
            row.error = Some(format!("injecting the fault: {e}"));
            return Ok(row);
        }
        tokio::time::sleep(kind.settle()).await;
        let t0 = Instant::now();
        tokio::time::sleep(hold).await;
        let healed = fault.heal();
        drop(fault);
        if let Err(e) = healed {
            ctx.metrics.error("heal");
            row.error = Some(format!("healing the fault: {e}"));
        }
        let heal_at = Instant::now();
        let ready = all_ready(self.instances, secs(self.o.ready_timeout_secs)).await;
        if kind == FaultKind::Kill {
            row.restart_ready_ms = Some(ms(heal_at.elapsed()));
        }
        if let Err(e) = ready {
            load.stop().await;
            return Err(Error::Target(format!("after {} #{n}: {e}", kind.name())));
        }
        // Until the probe session was served again.
        let limit = t0 + secs(self.o.recovery_timeout_secs);
        let recovered = loop {
            if let Some(at) = load.sessions[0].first_ack_since(t0) {
                break Some(at - t0);
            }
            if Instant::now() > limit {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        match recovered {
            Some(d) => {
                row.recovery_ms = Some(ms(d));
                ctx.metrics.record(&format!("recovery:{}", kind.name()), d);
            }
            None => row.violations.push(format!(
                "liveness: no probe submit acknowledged within {:.0} s of the fault",
                self.o.recovery_timeout_secs
            )),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        load.stop().await;
        self.verify(&load, &sampler, &scratch, &mut row).await;
        drop(sampler);
        for s in &load.sessions {
            s.client.kill().await;
        }
        for (k, count) in scratch.snapshot().errors() {
            ctx.metrics.count(&format!("transient:{k}"), *count);
        }
        for v in &row.violations {
            ctx.metrics.violation(format!("[{} #{n}] {v}", kind.name()));
        }
        row.ok = row.violations.is_empty() && row.error.is_none();
        Ok(row)
    }

    /// Waits for the runs to end and the clients to catch up, then checks the invariants.
    async fn verify(&self, load: &Load, sampler: &Sampler, scratch: &Shared, row: &mut ChaosTrial) {
        let ctx = self.ctx;
        let ids: Vec<String> = load.sessions.iter().map(|s| s.session_id.clone()).collect();
        let deadline = Instant::now() + ctx.run_timeout();
        if !journal::wait_idle(&self.journal, &ids, deadline).await {
            row.violations
                .push("runs still unfinished in the journal after --run-timeout".into());
        }
        let c = match self.journal.connect().await {
            Ok(c) => c,
            Err(e) => {
                ctx.metrics.error("verify:postgres");
                row.error = Some(e.to_string());
                return;
            }
        };
        let samples = sampler.taken();
        for s in &load.sessions {
            let id = &s.session_id;
            let read = async {
                let rows = self.journal.events(&c, id).await?;
                let results = self.journal.command_results(&c, id).await?;
                let fence = self.journal.fence(&c, id).await?;
                Ok::<_, HarnessError>((rows, results, fence))
            };
            let (rows, results, fence) = match read.await {
                Ok(r) => r,
                Err(e) => {
                    ctx.metrics.error("verify:postgres");
                    row.error = Some(e.to_string());
                    return;
                }
            };
            let head = rows.last().map(|r| r.seq).unwrap_or(0);
            let until = Instant::now() + Duration::from_secs(20);
            if !load::catch_up(ctx, scratch, &self.urls, s, head, until).await {
                row.violations.push(format!(
                    "session {id}: the client did not catch up to seq {head}"
                ));
            }
            let submits = s.submits();
            row.submits += submits.len() as u64;
            let acked: Vec<Acked> = submits
                .iter()
                .filter_map(|x| {
                    x.run_id.clone().map(|run_id| Acked {
                        key: x.key.clone(),
                        run_id,
                    })
                })
                .collect();
            row.acked += acked.len() as u64;
            row.events_checked += rows.len() as u64;
            let session_samples = samples.get(id).cloned().unwrap_or_default();
            row.fence_samples += session_samples.len() as u64;
            row.max_fence = row.max_fence.max(fence);
            let mut found = journal::check_session(
                id,
                &rows,
                fence,
                &results,
                &session_samples,
                &acked,
                &[s.client.frames().await],
            );
            for e in s.client.pump_errors().await {
                found.push(format!("session {id}: client: {e}"));
            }
            row.violations.extend(found);
        }
    }
}

fn summarize(ctx: &Ctx, kinds: &[FaultKind], trials: &[ChaosTrial]) -> Vec<ChaosKindSummary> {
    let snapshot = ctx.metrics.snapshot();
    kinds
        .iter()
        .map(|kind| {
            let rows: Vec<&ChaosTrial> = trials.iter().filter(|t| t.kind == kind.name()).collect();
            let recovery = snapshot.summary(&format!("recovery:{}", kind.name()));
            ChaosKindSummary {
                kind: kind.name().into(),
                trials_run: rows.len() as u64,
                trials_ok: rows.iter().filter(|t| t.ok).count() as u64,
                violations: rows.iter().map(|t| t.violations.len() as u64).sum(),
                acked_submits: rows.iter().map(|t| t.acked).sum(),
                recovery_p50_ms: recovery.as_ref().map(|s| s.p50_ms),
                recovery_p99_ms: recovery.as_ref().map(|s| s.p99_ms),
                recovery_max_ms: recovery.as_ref().map(|s| s.max_ms),
            }
        })
        .collect()
}

pub(crate) async fn run(
    ctx: &Ctx,
    o: &ChaosOptions,
    name: &str,
    started: (SystemTime, Instant),
) -> Result<Report> {
    o.validate()?;
    let Some(instances) = ctx.target().instances.clone() else {
        return Err(Error::Input(
            "chaos needs --instances FILE (written by scripts/local-cluster --chaos)".into(),
        ));
    };
    let services = instances.services.clone().ok_or_else(|| {
        Error::Input(
            "chaos checks the journal in PostgreSQL: the instances file has no services \
             (start the cluster with scripts/local-cluster --chaos)"
                .into(),
        )
    })?;
    for kind in &o.faults {
        faults::preflight(*kind, &instances).map_err(|e| Error::Input(e.to_string()))?;
    }
    let tenant = instances
        .auth
        .as_ref()
        .map(|a| a.tenant.clone())
        .unwrap_or_else(|| "local".into());
    let journal = Journal::new(&services.postgres_url, &tenant);
    journal
        .connect()
        .await
        .map_err(|e| Error::Target(e.to_string()))?;
    all_ready(&instances, Duration::from_secs(30)).await?;
    let mut run = Run {
        ctx,
        o,
        urls: instances
            .instances
            .iter()
            .map(|i| i.ws_url.clone())
            .collect(),
        journal,
        ttl: lease_ttl(o, &instances),
        settings: FaultSettings {
            skew: Duration::from_millis(o.skew_ms),
            slow_kbit: o.slow_kbit,
        },
        children: HashMap::new(),
        instances: &instances,
    };
    let begin = Instant::now();
    let max_duration = Duration::from_secs_f64(o.max_duration_secs);
    let total = (o.trials * o.faults.len()) as u64;
    let progress = Progress::new(ctx.progress, total, "trials");
    let mut trials = Vec::new();
    let mut fatal = None;
    'kinds: for kind in &o.faults {
        for n in 0..o.trials {
            if begin.elapsed() > max_duration {
                ctx.metrics.count("trials_skipped_by_max_duration", 1);
                continue;
            }
            match run.trial(*kind, n).await {
                Ok(row) => {
                    if !row.ok {
                        ctx.metrics.error("trial_failed");
                    }
                    let line = format!("{} #{n}: {} violations", kind.name(), row.violations.len());
                    // Without a progress bar (a long run in the background), one line per
                    // trial shows how far it got.
                    if !ctx.progress {
                        eprintln!("chaos {line}");
                    }
                    progress.message(line);
                    trials.push(row);
                }
                Err(e) => {
                    ctx.metrics
                        .violation(format!("stopped in {} #{n}: {e}", kind.name()));
                    fatal = Some(e);
                    break 'kinds;
                }
            }
            progress.inc(1);
        }
    }
    progress.finish();
    let mut report = base_report(ctx, name, o, started);
    report.chaos = Some(ChaosDetails {
        lease_ttl_ms: run.ttl.as_millis() as u64,
        kinds: summarize(ctx, &o.faults, &trials),
        trials,
    });
    if fatal.is_some() {
        report.ok = false;
    }
    Ok(report)
}
