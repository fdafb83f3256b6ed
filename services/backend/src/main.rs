//! `lumina-backend` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use std::time::Duration;

use lumina_backend::{bench, cluster, doctor, local, memory_setup};
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
        /// Port on 127.0.0.1 (default: the port of the crashed backend this one replaces
        /// when it is free, so open console pages reconnect; else any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
    /// Apply the PostgreSQL migrations in sql/postgres (cluster profile; safe to run
    /// concurrently).
    Migrate {
        #[arg(long)]
        app_root: Option<PathBuf>,
    },
    /// The cluster profile.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Serve Lumina to other agents as an MCP server (stdio, or Streamable HTTP with --http).
    McpServer(lumina_backend::mcp_server::McpServerArgs),
    /// Lumina as an A2A agent: the TCK fixture server, the Agent Card (docs/a2a.md).
    A2a {
        #[command(subcommand)]
        command: lumina_backend::a2a::A2aCommand,
    },
    /// Measure performance (figures for docs/benchmarks.md).
    Bench {
        #[command(subcommand)]
        what: bench::BenchCommand,
    },
    /// The Memory Fabric's models (the local embedding model).
    Memory {
        #[command(subcommand)]
        command: memory_setup::MemoryCommand,
    },
    /// The approvals audit (docs/audit.md).
    Audit {
        #[command(subcommand)]
        command: lumina_backend::audit::AuditCommand,
    },
    /// Check this host and the settings: the shell's confinement level (docs/sandbox.md),
    /// the AppRoot, the settings, the model. Exits non-zero when a check fails.
    Doctor {
        /// AppRoot (default: $LUMINA_HOME or ~/.lumina).
        #[arg(long)]
        app_root: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Serve one cluster instance (settings: see docs/operations.md). Fail-closed.
    Serve {
        #[arg(long)]
        app_root: Option<PathBuf>,
    },
    /// Write an Ed25519 key, a JWKS and an admin JWT under <AppRoot>/config/cluster/ for a
    /// cluster on this machine, and print the export lines to use them.
    InitLocal {
        #[arg(long, default_value = "local")]
        tenant: String,
        #[arg(long, default_value = "lumina-local")]
        issuer: String,
        #[arg(long, default_value = "lumina")]
        audience: String,
        /// Lifetime of the admin token, hours.
        #[arg(long, default_value_t = 24 * 30)]
        admin_ttl_hours: u64,
        #[arg(long)]
        app_root: Option<PathBuf>,
    },
    /// Drain an instance: call admin.drain on it (with the admin JWT from $LUMINA_ADMIN_JWT,
    /// or $LUMINA_JWT) and wait until it has released every lease. Used as the pod's
    /// preStop hook.
    Drain {
        /// The instance's WebSocket URL.
        #[arg(long, default_value = "ws://127.0.0.1:8080/v1/ws")]
        url: String,
    },
    /// Mint a user JWT with the key written by init-local (printed on stdout).
    MintToken {
        #[arg(long)]
        sub: String,
        #[arg(long, default_value = "local")]
        tenant: String,
        /// Space- or comma-separated scopes.
        #[arg(long, default_value = "lumina:session:read lumina:session:write")]
        scopes: String,
        #[arg(long, default_value_t = 3600)]
        ttl_secs: u64,
        #[arg(long)]
        app_root: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let instance = std::env::var("LUMINA_INSTANCE_ID")
        .unwrap_or_else(|_| format!("local-{}", std::process::id()));
    let telemetry = lumina_backend::telemetry::init(&instance);
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
                    allow_loopback_agents: false,
                })
                .await
            }
            Command::Bench { what } => bench::run(what).await,
            Command::Memory { command } => memory_setup::run(command),
            Command::Doctor { app_root, json } => doctor::run(app_root, json),
            Command::Migrate { app_root } => {
                let env = Env::from_process();
                let app_root = AppRoot::resolve(app_root.as_deref(), &env)?;
                cluster::migrate(&app_root, &env).await
            }
            Command::Cluster { command } => run_cluster(command).await,
            Command::Audit { command } => lumina_backend::audit::run(command).await,
            Command::McpServer(args) => lumina_backend::mcp_server::run(args).await,
            Command::A2a { command } => lumina_backend::a2a::run(command).await,
        }
    });
    telemetry.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lumina-backend: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run_cluster(command: ClusterCommand) -> anyhow::Result<()> {
    let env = Env::from_process();
    match command {
        ClusterCommand::Serve { app_root } => {
            let app_root = AppRoot::resolve(app_root.as_deref(), &env)?;
            cluster::serve(cluster::ClusterOptions {
                app_root,
                env,
                project_root: std::env::current_dir()?,
            })
            .await
        }
        ClusterCommand::InitLocal {
            tenant,
            issuer,
            audience,
            admin_ttl_hours,
            app_root,
        } => {
            let app_root = AppRoot::resolve(app_root.as_deref(), &env)?;
            let dir = app_root.config_dir().join("cluster");
            let local = lumina_auth::init_local(
                &dir,
                &tenant,
                &issuer,
                &audience,
                Duration::from_secs(admin_ttl_hours * 3600),
            )?;
            eprintln!(
                "wrote {} (issuer {issuer}, audience {audience}, tenant {tenant}); instances need LUMINA_JWT_ISSUER={issuer} LUMINA_JWT_AUDIENCE={audience}",
                dir.display()
            );
            println!("{}", local.export_lines());
            Ok(())
        }
        ClusterCommand::Drain { url } => cluster::drain_instance(&url, &env).await,
        ClusterCommand::MintToken {
            sub,
            tenant,
            scopes,
            ttl_secs,
            app_root,
        } => {
            let app_root = AppRoot::resolve(app_root.as_deref(), &env)?;
            let dir = app_root.config_dir().join("cluster");
            let scopes: Vec<&str> = scopes.split([' ', ',']).filter(|s| !s.is_empty()).collect();
            let token =
                lumina_auth::mint(&dir, &sub, &tenant, &scopes, Duration::from_secs(ttl_secs))?;
            println!("{token}");
            Ok(())
        }
    }
}
