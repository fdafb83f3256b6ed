//! `lumina-loadtest`: the command line over the `lumina_loadtest` library.
//!
//! Exit status: 0 when the scenario ran and nothing failed, 1 when it ran with errors or
//! violations (or the target could not be used), 2 for bad input.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use lumina_loadtest::{
    target::parse_bind_ips, AuthOptions, ChaosOptions, Common, Config, ConnectStormOptions,
    FailoverOptions, FaultKind, IdleOptions, RampOptions, ReconnectOptions, Scenario, Secret,
    SteadyOptions, TargetOptions,
};

#[derive(Parser)]
#[command(
    name = "lumina-loadtest",
    version,
    about = "Load generator for lumina-backend (protocol v3)",
    after_help = "Targets must be on loopback unless --allow-remote is given. \
                  Exit status: 0 ok, 1 errors or violations, 2 bad input."
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    scenario: Command,
}

#[derive(Args)]
struct Global {
    /// Gateway WebSocket URL(s), repeatable or comma-separated (ws://127.0.0.1:PORT/v1/ws).
    #[arg(long, global = true, value_delimiter = ',')]
    url: Vec<String>,
    /// instances.json written by scripts/local-cluster (URLs, pids, restart commands).
    #[arg(long, global = true)]
    instances: Option<PathBuf>,
    /// AppRoot of a local backend: URL, token and pid from <DIR>/state/run/backend.json.
    #[arg(long, global = true)]
    app_root: Option<PathBuf>,
    /// Bearer token (prefer --token-file: command lines are visible to other users).
    #[arg(long, global = true)]
    token: Option<String>,
    /// File holding the bearer token.
    #[arg(long, global = true)]
    token_file: Option<PathBuf>,
    /// `cluster init-local` directory (<AppRoot>/config/cluster) to mint a JWT with.
    #[arg(long, global = true)]
    signing_key_dir: Option<PathBuf>,
    /// `sub` of a minted token.
    #[arg(long, global = true, default_value = "loadtest")]
    sub: String,
    /// Tenant of a minted token (default: the instances file's, else "local").
    #[arg(long, global = true)]
    tenant: Option<String>,
    /// Scopes of a minted token, space- or comma-separated.
    #[arg(
        long,
        global = true,
        default_value = "lumina:session:read lumina:session:write"
    )]
    scopes: String,
    /// Allow targets that are not on loopback.
    #[arg(long, global = true)]
    allow_remote: bool,
    /// Server pid whose RSS `idle` reads (default: the endpoint file's pid).
    #[arg(long, global = true)]
    server_pid: Option<u32>,
    /// Directory for report.json and report.html.
    #[arg(long, global = true, default_value = "loadtest-report")]
    out: PathBuf,
    /// No progress bars (default: shown when stderr is a terminal).
    #[arg(long, global = true)]
    no_progress: bool,
    /// Absolute project root of created sessions (default: the server's working directory).
    #[arg(long, global = true)]
    project_root: Option<String>,
    /// Prompt of every submit.
    #[arg(long, global = true, default_value = "Say ok.")]
    prompt: String,
    /// Seconds a call may take before it counts as a timeout.
    #[arg(long, global = true, default_value_t = 30.0)]
    call_timeout: f64,
    /// Seconds a run may take from submit to its end.
    #[arg(long, global = true, default_value_t = 60.0)]
    run_timeout: f64,
    /// Connections opened at once during set-up.
    #[arg(long, global = true, default_value_t = 64)]
    connect_concurrency: usize,
}

#[derive(Subcommand)]
enum Command {
    /// Open N connections, say hello, hold them; connect time and server RSS per connection.
    Idle {
        #[arg(long, default_value_t = 1000)]
        connections: usize,
        /// Seconds to hold the connections.
        #[arg(long, default_value_t = 10.0)]
        hold: f64,
        /// Loopback source addresses to use in turn (127.0.0.2,127.0.0.3,…).
        #[arg(long, value_delimiter = ',')]
        bind_ips: Vec<String>,
    },
    /// S sessions, each submitting at a target rate for D seconds.
    Steady {
        #[arg(long, default_value_t = 10)]
        sessions: usize,
        /// Submits per second of each session.
        #[arg(long, default_value_t = 1.0)]
        rate: f64,
        /// Seconds.
        #[arg(long, default_value_t = 10.0)]
        duration: f64,
        #[arg(long, default_value_t = 4)]
        max_in_flight: usize,
        /// A second client per session (next URL) for the fan-out lag: true or false.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        observers: bool,
        /// Unix time (seconds) at which the submits begin once the sessions are open, so
        /// several generator processes drive one cluster together (see `merge`).
        #[arg(long)]
        start_at: Option<f64>,
    },
    /// Raise the total submit rate step by step until p99 submit→first event passes a threshold.
    Ramp {
        #[arg(long, default_value_t = 20)]
        sessions: usize,
        /// Total submits per second of the first step.
        #[arg(long, default_value_t = 10.0)]
        start_rate: f64,
        /// Added to the rate at every step.
        #[arg(long, default_value_t = 10.0)]
        step_rate: f64,
        /// Seconds per step.
        #[arg(long, default_value_t = 10.0)]
        step_duration: f64,
        #[arg(long, default_value_t = 10)]
        max_steps: usize,
        #[arg(long, default_value_t = 500.0)]
        threshold_ms: f64,
        #[arg(long, default_value_t = 8)]
        max_in_flight: usize,
    },
    /// N connects as fast as possible.
    ConnectStorm {
        #[arg(long, default_value_t = 1000)]
        connections: usize,
        /// Connects in flight at once (0: all).
        #[arg(long, default_value_t = 0)]
        concurrency: usize,
        #[arg(long, value_delimiter = ',')]
        bind_ips: Vec<String>,
    },
    /// Runs in flight, connections dropped, reconnect + resume + backfill; nothing lost or doubled.
    ReconnectStorm {
        #[arg(long, default_value_t = 20)]
        sessions: usize,
        /// Seconds during which new rounds start.
        #[arg(long, default_value_t = 10.0)]
        duration: f64,
        #[arg(long, default_value_t = 20)]
        max_rounds: usize,
        /// Milliseconds between the runs' first events and dropping the connections.
        #[arg(long, default_value_t = 200)]
        kill_after_ms: u64,
    },
    /// kill -9 a session's owner, submit through a survivor, restart it; T trials.
    Failover {
        #[arg(long, default_value_t = 100)]
        trials: usize,
        /// Seconds the submit after the kill may take, retries included.
        #[arg(long, default_value_t = 30.0)]
        submit_timeout: f64,
        /// Seconds a restarted instance may take to be ready.
        #[arg(long, default_value_t = 60.0)]
        ready_timeout: f64,
        /// Seconds after which no new trial starts.
        #[arg(long, default_value_t = 1800.0)]
        max_duration: f64,
    },
    /// Faults under load (needs the instances file of `scripts/local-cluster --chaos`);
    /// invariants checked against PostgreSQL after every trial.
    Chaos {
        /// Comma-separated: kill, sigstop, redis-restart, postgres-restart, partition,
        /// slow-postgres, clock-skew, or all.
        #[arg(long, default_value = "all")]
        fault: String,
        /// Trials per fault kind.
        #[arg(long, default_value_t = 100)]
        trials: usize,
        /// Sessions under load per trial.
        #[arg(long, default_value_t = 3)]
        sessions: usize,
        /// Milliseconds between a session's submits.
        #[arg(long, default_value_t = 300)]
        interval_ms: u64,
        #[arg(long, default_value_t = 2)]
        max_in_flight: usize,
        /// Seconds one submit attempt may take before the client moves to another gateway.
        #[arg(long, default_value_t = 5.0)]
        attempt_timeout: f64,
        /// Seconds a submit may take, retries included.
        #[arg(long, default_value_t = 60.0)]
        submit_timeout: f64,
        /// Milliseconds each fault lasts (0: per kind, from the lease TTL).
        #[arg(long, default_value_t = 0)]
        hold_ms: u64,
        /// The instances' liveness TTL (0: from the instances' env files, else 2000).
        #[arg(long, default_value_t = 0)]
        lease_ttl_ms: u64,
        /// Wall-clock offset of clock-skew, applied as + and − in turn.
        #[arg(long, default_value_t = 5000)]
        skew_ms: u64,
        /// Rate slow-postgres shapes PostgreSQL traffic to, kbit/s.
        #[arg(long, default_value_t = 16)]
        slow_kbit: u32,
        /// Seconds the cluster may take to serve a probe submit after the fault.
        #[arg(long, default_value_t = 60.0)]
        recovery_timeout: f64,
        /// Seconds an instance may take to be ready again.
        #[arg(long, default_value_t = 60.0)]
        ready_timeout: f64,
        /// Seconds after which no new trial starts.
        #[arg(long, default_value_t = 21600.0)]
        max_duration: f64,
    },
    /// One report from the report.json files of several generator processes that drove one
    /// cluster side by side (steady or reconnect-storm), written to --out: one process holds
    /// only as many connections as its open-file limit allows.
    Merge {
        /// The report.json files (or the directories holding them).
        #[arg(required = true)]
        reports: Vec<PathBuf>,
    },
}

fn config(cli: Cli) -> Result<(Config, PathBuf), lumina_loadtest::Error> {
    let g = cli.global;
    let allow_remote = g.allow_remote;
    let scenario = match cli.scenario {
        Command::Idle {
            connections,
            hold,
            bind_ips,
        } => Scenario::Idle(IdleOptions {
            connections,
            hold_secs: hold,
            bind_ips: parse_bind_ips(&bind_ips, allow_remote)?,
        }),
        Command::Steady {
            sessions,
            rate,
            duration,
            max_in_flight,
            observers,
            start_at,
        } => Scenario::Steady(SteadyOptions {
            sessions,
            rate_per_session: rate,
            duration_secs: duration,
            max_in_flight,
            observers,
            start_at_unix_secs: start_at,
        }),
        Command::Ramp {
            sessions,
            start_rate,
            step_rate,
            step_duration,
            max_steps,
            threshold_ms,
            max_in_flight,
        } => Scenario::Ramp(RampOptions {
            sessions,
            start_rate,
            step_rate,
            step_secs: step_duration,
            max_steps,
            threshold_ms,
            max_in_flight,
        }),
        Command::ConnectStorm {
            connections,
            concurrency,
            bind_ips,
        } => Scenario::ConnectStorm(ConnectStormOptions {
            connections,
            concurrency,
            bind_ips: parse_bind_ips(&bind_ips, allow_remote)?,
        }),
        Command::ReconnectStorm {
            sessions,
            duration,
            max_rounds,
            kill_after_ms,
        } => Scenario::ReconnectStorm(ReconnectOptions {
            sessions,
            duration_secs: duration,
            max_rounds,
            kill_after_ms,
        }),
        Command::Failover {
            trials,
            submit_timeout,
            ready_timeout,
            max_duration,
        } => Scenario::Failover(FailoverOptions {
            trials,
            submit_timeout_secs: submit_timeout,
            ready_timeout_secs: ready_timeout,
            max_duration_secs: max_duration,
        }),
        Command::Chaos {
            fault,
            trials,
            sessions,
            interval_ms,
            max_in_flight,
            attempt_timeout,
            submit_timeout,
            hold_ms,
            lease_ttl_ms,
            skew_ms,
            slow_kbit,
            recovery_timeout,
            ready_timeout,
            max_duration,
        } => Scenario::Chaos(ChaosOptions {
            faults: FaultKind::parse_list(&fault)?,
            trials,
            sessions,
            interval_ms,
            max_in_flight,
            attempt_timeout_secs: attempt_timeout,
            submit_timeout_secs: submit_timeout,
            hold_ms,
            lease_ttl_ms,
            skew_ms,
            slow_kbit,
            recovery_timeout_secs: recovery_timeout,
            ready_timeout_secs: ready_timeout,
            max_duration_secs: max_duration,
        }),
        Command::Merge { .. } => {
            return Err(lumina_loadtest::Error::Input(
                "merge runs no scenario".into(),
            ))
        }
    };
    let auth = AuthOptions {
        token: g.token.filter(|t| !t.is_empty()).map(Secret::new),
        token_file: g.token_file,
        signing_key_dir: g.signing_key_dir,
        sub: g.sub,
        tenant: g.tenant,
        scopes: g
            .scopes
            .split([' ', ','])
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        ttl: Duration::from_secs(6 * 3600),
    };
    let config = Config {
        target: TargetOptions {
            urls: g.url,
            instances_file: g.instances,
            app_root: g.app_root,
            auth,
            allow_remote,
            server_pid: g.server_pid,
        },
        common: Common {
            project_root: g.project_root,
            prompt: g.prompt,
            call_timeout_secs: g.call_timeout,
            run_timeout_secs: g.run_timeout,
            connect_concurrency: g.connect_concurrency,
        },
        scenario,
        progress: !g.no_progress && std::io::stderr().is_terminal(),
    };
    Ok((config, g.out))
}

async fn run(config: Config, out: PathBuf) -> anyhow::Result<bool> {
    let report = lumina_loadtest::run(&config).await?;
    show(&report, &out)
}

/// Writes `report` to `out` and prints its summary; whether it passed.
fn show(report: &lumina_loadtest::Report, out: &std::path::Path) -> anyhow::Result<bool> {
    let (json, html) = report.write(out)?;
    print!("{}", report.text_summary());
    println!("report: {} and {}", json.display(), html.display());
    Ok(report.ok)
}

/// The reports named on the command line (a directory stands for its report.json).
fn read_reports(paths: &[PathBuf]) -> Result<Vec<lumina_loadtest::Report>, lumina_loadtest::Error> {
    paths
        .iter()
        .map(|path| {
            let file = if path.is_dir() {
                path.join("report.json")
            } else {
                path.clone()
            };
            let text = std::fs::read_to_string(&file).map_err(|e| {
                lumina_loadtest::Error::Input(format!("cannot read {}: {e}", file.display()))
            })?;
            serde_json::from_str(&text).map_err(|e| {
                lumina_loadtest::Error::Input(format!(
                    "{} is not a lumina-loadtest report: {e}",
                    file.display()
                ))
            })
        })
        .collect()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("LUMINA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let outcome = (|| -> anyhow::Result<bool> {
        if let Command::Merge { reports } = &cli.scenario {
            let merged = lumina_loadtest::Report::merge(&read_reports(reports)?)?;
            return show(&merged, &cli.global.out);
        }
        let (config, out) = config(cli)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        runtime.block_on(run(config, out))
    })();
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("lumina-loadtest: {error:#}");
            let code = error
                .downcast_ref::<lumina_loadtest::Error>()
                .map(lumina_loadtest::Error::exit_code)
                .unwrap_or(1);
            ExitCode::from(code)
        }
    }
}
