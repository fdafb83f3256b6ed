//! The `lumina` command: the interactive terminal UI ([`ui`]) and the headless CLI (`-p`,
//! `--list`, `--web`). It talks to `lumina-backend` only through `lumina-client` (protocol v3):
//! a local backend found via `<AppRoot>/state/run/backend.json` or started on demand, or a
//! remote one from `LUMINA_BACKEND_URL` + `LUMINA_JWT`.
//!
//! Exit codes: 0 success; 1 the run failed or was interrupted, or the backend could not be
//! reached; 2 usage or configuration errors (including no model configured for `-p`, and the
//! interactive UI without a terminal); 130 Ctrl-C during a `-p` run.

pub mod backend;
pub mod cli;
pub mod headless;
pub mod list;
pub mod team_report;
pub mod tracker;
pub mod ui;
pub mod web;

use std::process::ExitCode;

use clap::Parser;
use lumina_config::{AppRoot, Env};

use crate::cli::Cli;

/// Printed when the interactive UI is asked for without a terminal.
pub const TUI_NEEDS_TERMINAL: &str = "the interactive terminal UI needs a terminal on stdin and \
     stdout; run `lumina -p \"...\"` for a one-shot prompt (see `lumina --help`)";

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
    if cli.bench_render {
        let report = ui::bench::run(10_000, 250, 70);
        print!("{}", ui::bench::format(&report));
        return Ok(ExitCode::SUCCESS);
    }
    if cli.web {
        let (env, app_root) = app_root(&cli)?;
        let url = web::console_url(&env, &app_root)
            .await
            .map_err(Failure::Error)?;
        println!("{url}");
        if cli.open {
            web::open(&url).map_err(Failure::Error)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
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
        None => interactive(&cli).await,
    }
}

/// `lumina` without `-p`: the full-screen UI.
async fn interactive(cli: &Cli) -> Result<ExitCode, Failure> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(Failure::Config(TUI_NEEDS_TERMINAL.to_string()));
    }
    let (env, app_root) = app_root(cli)?;
    let project_root = std::env::current_dir()
        .map_err(|e| Failure::Config(format!("cannot read the current directory: {e}")))?;
    let cli_layer = cli.settings_layer();
    let settings = lumina_config::load(&app_root, Some(&project_root), &env, &cli_layer)
        .map_err(Failure::config)?;
    let mut notices: Vec<(ui::transcript::Level, String)> = settings
        .warnings
        .iter()
        .map(|w| (ui::transcript::Level::Warning, w.clone()))
        .collect();
    let remote = backend::remote_target(&env).map_err(Failure::config)?;
    if remote.is_none() {
        // The UI still opens (sessions can be browsed); the first prompt would fail anyway.
        if let Err(missing) = settings.model_endpoints() {
            notices.push((ui::transcript::Level::Error, missing.to_string()));
        }
    }
    let env_layer = lumina_config::env_layer(&env).map_err(Failure::config)?;
    let first = backend::connect(&env, &app_root)
        .await
        .map_err(Failure::Error)?;
    if let Some(id) = &cli.resume {
        if let Err(error) = first.client.session_info(id).await {
            return Err(Failure::Error(match error.server_error() {
                Some(e) if e.code == lumina_client::protocol::ErrorCode::NotFound => {
                    anyhow::anyhow!("no session {id} (see `lumina --list`)")
                }
                _ => anyhow::anyhow!("cannot open session {id}: {error}"),
            }));
        }
    }
    let history_file = app_root.state_dir().join("prompt-history.jsonl");
    let options = ui::app::AppOptions {
        project: project_root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| project_root.display().to_string()),
        model: settings.api_model.clone(),
        settings: cli::submit_settings(&env_layer, &cli_layer),
        history: ui::load_history(&history_file),
    };
    let connector: ui::connection::Connector = {
        let env = env.clone();
        let app_root = app_root.clone();
        std::sync::Arc::new(move || {
            let env = env.clone();
            let app_root = app_root.clone();
            Box::pin(async move { backend::connect(&env, &app_root).await })
        })
    };
    let setup = ui::Setup {
        options,
        connector,
        first,
        project_root,
        resume: cli.resume.clone(),
        history_file: Some(history_file),
        notices,
    };
    let session = ui::run(setup).await.map_err(Failure::Error)?;
    if let Some(id) = session {
        eprintln!("lumina: session {id} — continue it with `lumina --resume {id}`");
    }
    Ok(ExitCode::SUCCESS)
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
        team: cli.team.as_deref(),
    };
    let mut connected = backend::connect(&env, &app_root)
        .await
        .map_err(Failure::Error)?;
    headless::run_prompt(&connected.client, &mut connected.notifications, request)
        .await
        .map_err(Failure::Error)
}
