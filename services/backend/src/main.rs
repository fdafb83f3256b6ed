//! `lumina-backend` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lumina_backend::{bench, local};
use lumina_config::{AppRoot, Env};

#[derive(Parser)]
#[command(name = "lumina-backend", version, about = "The Lumina agent runtime")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the local profile: 127.0.0.1, a free port, SQLite, backend.json.
    Serve {
        /// AppRoot (default: $LUMINA_HOME or ~/.lumina).
        #[arg(long)]
        app_root: Option<PathBuf>,
        /// Port on 127.0.0.1 (default: any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
    /// Measure performance (figures for docs/benchmarks.md).
    Bench {
        #[command(subcommand)]
        what: bench::BenchCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("lumina-backend: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve { app_root, port } => {
                let env = Env::from_process();
                let app_root = AppRoot::resolve(app_root.as_deref(), &env)?;
                let project_root = std::env::current_dir()?;
                local::serve(local::LocalOptions {
                    app_root,
                    env,
                    port,
                    project_root,
                })
                .await
            }
            Command::Bench { what } => bench::run(what).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lumina-backend: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("LUMINA_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,tower_http=warn"));
    let json = std::env::var("LUMINA_LOG_FORMAT").is_ok_and(|v| v == "json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.with_ansi(false).init();
    }
}
