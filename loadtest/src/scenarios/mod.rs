//! The scenarios and what they share: options with hard limits, the context (connector,
//! metrics, progress), opening tracked sessions, and the end-of-run verification.

pub mod chaos;
mod connect;
mod failover;
mod reconnect;
mod steady;
mod verify;

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt as _;
use lumina_client::{ClientError, ConnectOptions};
use serde::Serialize;

use crate::error::{error_kind, Error, Result};
use crate::metrics::Shared;
use crate::report::Report;
use crate::target::{Target, TargetOptions};
use crate::track::{Connector, Tracked};

pub use chaos::{ChaosOptions, FaultKind};
pub use connect::{ConnectStormOptions, IdleOptions};
pub use failover::FailoverOptions;
pub use reconnect::ReconnectOptions;
pub use steady::{RampOptions, SteadyOptions};
pub(crate) use verify::verify_slots;

/// Added to prompts of runs that should take a while: the scripted model server answers
/// such requests with the slow turns `scripts/local-cluster` (and the tests) give it
/// (`match_contains`), everything else with its fast default answer.
pub const SLOW_MARKER: &str = "[lumina-loadtest:slow]";

/// Hard limits: every scenario is bounded in count and time.
pub const MAX_CONNECTIONS: usize = 200_000;
pub const MAX_SESSIONS: usize = 20_000;
pub const MAX_SECONDS: f64 = 3600.0;
pub const MAX_RATE: f64 = 10_000.0;
pub const MAX_TRIALS: usize = 10_000;

/// Options every scenario uses.
#[derive(Debug, Clone, Serialize)]
pub struct Common {
    /// `project_root` of created sessions (default: the server's working directory).
    pub project_root: Option<String>,
    pub prompt: String,
    /// Time a call may take before it counts as a `timeout` error.
    pub call_timeout_secs: f64,
    /// Time a run may take from submit to its terminal event.
    pub run_timeout_secs: f64,
    /// Connections opened at once while setting up.
    pub connect_concurrency: usize,
}

impl Default for Common {
    fn default() -> Common {
        Common {
            project_root: None,
            prompt: "Say ok.".into(),
            call_timeout_secs: 30.0,
            run_timeout_secs: 60.0,
            connect_concurrency: 64,
        }
    }
}

/// Which scenario, with its options.
#[derive(Debug, Clone)]
pub enum Scenario {
    Idle(IdleOptions),
    Steady(SteadyOptions),
    Ramp(RampOptions),
    ConnectStorm(ConnectStormOptions),
    ReconnectStorm(ReconnectOptions),
    Failover(FailoverOptions),
    Chaos(ChaosOptions),
}

impl Scenario {
    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Idle(_) => "idle",
            Scenario::Steady(_) => "steady",
            Scenario::Ramp(_) => "ramp",
            Scenario::ConnectStorm(_) => "connect-storm",
            Scenario::ReconnectStorm(_) => "reconnect-storm",
            Scenario::Failover(_) => "failover",
            Scenario::Chaos(_) => "chaos",
        }
    }
}

/// A whole run: target, shared options, scenario.
#[derive(Debug, Clone)]
pub struct Config {
    pub target: TargetOptions,
    pub common: Common,
    pub scenario: Scenario,
    /// Draw progress bars on the terminal.
    pub progress: bool,
}

pub(crate) fn check_count(name: &str, value: usize, max: usize) -> Result<()> {
    if value == 0 || value > max {
        return Err(Error::Input(format!("{name} must be between 1 and {max}")));
    }
    Ok(())
}

pub(crate) fn check_secs(name: &str, value: f64) -> Result<()> {
    if !(value.is_finite() && value > 0.0 && value <= MAX_SECONDS) {
        return Err(Error::Input(format!(
            "{name} must be more than 0 and at most {MAX_SECONDS} seconds"
        )));
    }
    Ok(())
}

pub(crate) fn check_rate(name: &str, value: f64) -> Result<()> {
    if !(value.is_finite() && value > 0.0 && value <= MAX_RATE) {
        return Err(Error::Input(format!(
            "{name} must be more than 0 and at most {MAX_RATE} per second"
        )));
    }
    Ok(())
}

pub(crate) fn secs(value: f64) -> Duration {
    Duration::from_secs_f64(value.clamp(0.0, MAX_SECONDS))
}

impl Common {
    fn validate(&self) -> Result<()> {
        check_secs("--call-timeout", self.call_timeout_secs)?;
        check_secs("--run-timeout", self.run_timeout_secs)?;
        check_count("--connect-concurrency", self.connect_concurrency, 10_000)?;
        if self.prompt.trim().is_empty() {
            return Err(Error::Input("--prompt must not be empty".into()));
        }
        if let Some(root) = &self.project_root {
            if !std::path::Path::new(root).is_absolute() {
                return Err(Error::Input(
                    "--project-root must be an absolute path".into(),
                ));
            }
        }
        Ok(())
    }
}

/// What a scenario works with.
pub(crate) struct Ctx {
    pub connector: Connector,
    pub common: Common,
    pub metrics: Shared,
    pub progress: bool,
}

impl Ctx {
    pub fn target(&self) -> &Target {
        &self.connector.target
    }

    pub fn run_timeout(&self) -> Duration {
        secs(self.common.run_timeout_secs)
    }

    /// One connection and `hello` to the first URL, so that a dead target or refused
    /// credentials fail clearly before any load is sent.
    pub async fn preflight(&self) -> Result<()> {
        let probe = Shared::new();
        let url = self.target().url(0).to_string();
        match self.connector.connect(&url, &probe).await {
            Ok((client, _notes)) => {
                client.close();
                Ok(())
            }
            Err(error) => Err(Error::Target(format!(
                "cannot use {url}: {error} ({})",
                error_kind(&error)
            ))),
        }
    }
}

/// A session under load: its primary client, an optional observer (a second client of the
/// same session, on the next gateway URL) and the runs submitted to it.
pub(crate) struct Slot {
    pub index: usize,
    pub tracked: Arc<Tracked>,
    pub observer: Option<Arc<Tracked>>,
    pub runs: StdMutex<Vec<String>>,
}

impl Slot {
    pub fn add_run(&self, run_id: String) {
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(run_id);
    }

    pub fn runs(&self) -> Vec<String> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Opens `n` sessions (session `i` on URL `i`, its observer on URL `i + 1`). Sessions that
/// cannot be opened are counted as errors; none at all is a target error.
pub(crate) async fn open_slots(ctx: &Ctx, n: usize, observers: bool) -> Result<Vec<Arc<Slot>>> {
    let progress = crate::progress::Progress::new(ctx.progress, n as u64, "sessions");
    let opened: Vec<std::result::Result<Slot, ClientError>> = futures::stream::iter(0..n)
        .map(|i| {
            let progress = progress.clone();
            async move {
                let slot = open_slot(ctx, i, observers).await;
                progress.inc(1);
                slot
            }
        })
        .buffer_unordered(ctx.common.connect_concurrency)
        .collect()
        .await;
    progress.finish();
    let mut slots = Vec::new();
    let mut first_error = None;
    for slot in opened {
        match slot {
            Ok(slot) => slots.push(Arc::new(slot)),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    if slots.is_empty() {
        return Err(Error::Target(format!(
            "could not open any session: {}",
            first_error.map(|e| e.to_string()).unwrap_or_default()
        )));
    }
    slots.sort_by_key(|s| s.index);
    Ok(slots)
}

async fn open_slot(ctx: &Ctx, i: usize, observers: bool) -> std::result::Result<Slot, ClientError> {
    let metrics = &ctx.metrics;
    let counted = |what: &'static str| {
        move |e: ClientError| {
            metrics.error(&format!("{what}:{}", error_kind(&e)));
            e
        }
    };
    let (client, notes) = ctx.connector.connect(ctx.target().url(i), metrics).await?;
    let session_id = Tracked::create_session(
        &client,
        ctx.common.project_root.as_deref(),
        &format!("loadtest {i}"),
    )
    .await
    .map_err(counted("create"))?;
    let tracked = Tracked::subscribe(client, notes, &session_id, observers)
        .await
        .map_err(counted("resume"))?;
    let observer = if observers {
        let (client, notes) = ctx
            .connector
            .connect(ctx.target().url(i + 1), metrics)
            .await?;
        let observer = Tracked::subscribe(client, notes, &session_id, true)
            .await
            .map_err(counted("resume"))?;
        Some(Arc::new(observer))
    } else {
        None
    };
    Ok(Slot {
        index: i,
        tracked: Arc::new(tracked),
        observer,
        runs: StdMutex::new(Vec::new()),
    })
}

/// Closes every client of the slots.
pub(crate) async fn close_slots(slots: &[Arc<Slot>]) {
    for slot in slots {
        slot.tracked.kill().await;
        if let Some(observer) = &slot.observer {
            observer.kill().await;
        }
    }
}

/// Runs the configured scenario and returns its report (not yet written to disk).
pub async fn run(config: &Config) -> Result<Report> {
    config.common.validate()?;
    let target = config.target.resolve()?;
    let options = ConnectOptions {
        call_timeout: secs(config.common.call_timeout_secs),
        connect_timeout: Duration::from_secs(10),
    };
    let ctx = Ctx {
        connector: Connector {
            target,
            options,
            client_name: "lumina-loadtest".into(),
        },
        common: config.common.clone(),
        metrics: Shared::new(),
        progress: config.progress,
    };
    let started = (SystemTime::now(), Instant::now());
    let name = config.scenario.name();
    let mut report = match &config.scenario {
        Scenario::Idle(o) => connect::idle(&ctx, o, name, started).await?,
        Scenario::ConnectStorm(o) => connect::storm(&ctx, o, name, started).await?,
        Scenario::Steady(o) => steady::steady(&ctx, o, name, started).await?,
        Scenario::Ramp(o) => steady::ramp(&ctx, o, name, started).await?,
        Scenario::ReconnectStorm(o) => reconnect::run(&ctx, o, name, started).await?,
        Scenario::Failover(o) => failover::run(&ctx, o, name, started).await?,
        Scenario::Chaos(o) => chaos::run(&ctx, o, name, started).await?,
    };
    if let Some(v) = &report.verification {
        if !v.clean() {
            report.ok = false;
        }
    }
    Ok(report)
}

/// The report from the context's metrics, with `parameters` from the options.
pub(crate) fn base_report(
    ctx: &Ctx,
    name: &str,
    parameters: &impl Serialize,
    started: (SystemTime, Instant),
) -> Report {
    let mut params = serde_json::to_value(parameters).unwrap_or(serde_json::Value::Null);
    if let serde_json::Value::Object(map) = &mut params {
        if let Ok(common) = serde_json::to_value(&ctx.common) {
            map.insert("common".into(), common);
        }
    }
    Report::new(name, params, ctx.target(), started, &ctx.metrics.snapshot())
}
