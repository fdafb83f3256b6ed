//! The `lumina` command: the headless CLI (`-p`, `--list`) and, later, the interactive
//! terminal UI. It talks to `lumina-backend` only through `lumina-client` (protocol v3):
//! a local backend found via `<AppRoot>/state/run/backend.json` or started on demand, or a
//! remote one from `LUMINA_BACKEND_URL` + `LUMINA_JWT`.
//!
//! Exit codes: 0 success; 1 the run failed or was interrupted, or the backend could not be
//! reached; 2 usage or configuration errors (including no model configured, and the
//! interactive UI, which this build does not have); 130 Ctrl-C during a run.

pub mod backend;
pub mod cli;
pub mod headless;
pub mod list;
pub mod tracker;

use std::process::ExitCode;

use clap::Parser;
use lumina_config::{AppRoot, Env};

use crate::cli::Cli;

/// Printed when the interactive UI is asked for.
pub const TUI_UNAVAILABLE: &str = "the interactive terminal UI is not available in this build \
     yet; run `lumina -p \"...\"` (see `lumina --help`)";

/// Why the command stopped early: a usage/configuration problem (exit 2) or anything else
/// (exit 1). Both print one `lumina: <message>` line.
enum Failure {
    Config(String),
    Error(anyhow::Error),
}

impl Failure {
    fn config(error: impl std::fmt::Display) -> Self {
        Failure::Config(error.to_string())
    }

    fn report(self) -> ExitCode {
        match self {
            Failure::Config(message) => {
                eprintln!("lumina: {message}");
                ExitCode::from(2)
            }
            Failure::Error(error) => {
                eprintln!("lumina: {error:#}");
                ExitCode::FAILURE
            }
        }
    }
}

/// Entry point of the `lumina` binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("lumina: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli)).unwrap_or_else(Failure::report)
}

async fn run(cli: Cli) -> Result<ExitCode, Failure> {
    if cli.list {
        let (env, app_root) = app_root(&cli)?;
        let connected = backend::connect(&env, &app_root)
            .await
            .map_err(Failure::Error)?;
        list::list_sessions(&connected.client, cli.output_format)
            .await
            .map_err(Failure::Error)?;
        return Ok(ExitCode::SUCCESS);
    }
    match cli.prompt.as_deref() {
        Some(prompt) => prompt_command(&cli, prompt).await,
        None => Err(Failure::Config(TUI_UNAVAILABLE.to_string())),
    }
}

fn app_root(cli: &Cli) -> Result<(Env, AppRoot), Failure> {
    let env = Env::from_process();
    let app_root = AppRoot::resolve(cli.app_root.as_deref(), &env).map_err(Failure::config)?;
    Ok((env, app_root))
}

async fn prompt_command(cli: &Cli, prompt: &str) -> Result<ExitCode, Failure> {
    if prompt.trim().is_empty() {
        return Err(Failure::Config("the prompt given with -p is empty".into()));
    }
    let (env, app_root) = app_root(cli)?;
    let project_root = std::env::current_dir()
        .map_err(|e| Failure::Config(format!("cannot read the current directory: {e}")))?;
    let cli_layer = cli.settings_layer();
    let settings = lumina_config::load(&app_root, Some(&project_root), &env, &cli_layer)
        .map_err(Failure::config)?;
    for warning in &settings.warnings {
        eprintln!("lumina: warning: {warning}");
    }
    // A remote backend has its own model configuration; locally, fail before starting
    // anything when no model is configured.
    let remote = backend::remote_target(&env).map_err(Failure::config)?;
    if remote.is_none() {
        settings.model_endpoints().map_err(Failure::config)?;
    }
    let env_layer = lumina_config::env_layer(&env).map_err(Failure::config)?;
    let request = headless::PromptRequest {
        prompt,
        resume: cli.resume.as_deref(),
        project_root: &project_root,
        settings: cli::submit_settings(&env_layer, &cli_layer),
        format: cli.output_format,
    };
    let mut connected = backend::connect(&env, &app_root)
        .await
        .map_err(Failure::Error)?;
    headless::run_prompt(&connected.client, &mut connected.notifications, request)
        .await
        .map_err(Failure::Error)
}
