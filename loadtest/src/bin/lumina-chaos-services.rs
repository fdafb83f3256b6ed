//! `lumina-chaos-services`: the PostgreSQL (with pgvector) and Redis of a chaos run
//! (`scripts/local-cluster --chaos`), like `lumina-local-services` but controllable, so the
//! `chaos` scenario can restart them while load runs:
//!
//! - `--listen ADDR` (repeatable): listen on ADDR as well as 127.0.0.1 — the host end of a
//!   veth pair, so an instance in a network namespace reaches both; `--trust-net CIDR`
//!   lets PostgreSQL accept that instance's address (`trust`, like loopback).
//! - `--forward LISTEN=TARGET` (repeatable): a plain TCP forwarder, e.g. from the veth
//!   address to the scripted model server on loopback (which listens on 127.0.0.1 only).
//! - `--control PATH`: a Unix socket taking one command per line and answering `ok` or
//!   `error: …` when done: `ping`, `redis stop`, `redis start` (empty, same port, as after a
//!   crash), `postgres stop` (fast shutdown), `postgres kill` (immediate shutdown, crash
//!   recovery on the next start), `postgres start` (same port and data).
//!
//! Prints `LUMINA_POSTGRES_URL=…` (the database `lumina`), `LUMINA_REDIS_URL=…`,
//! `CHAOS_POSTGRES_PORT=…` and `CHAOS_REDIS_PORT=…`, then runs until SIGTERM or ctrl-c and
//! removes both servers on exit, leaving PostgreSQL's log as `postgres.log` beside the
//! control socket. Everything listens on loopback or on the addresses given.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context as _};
use clap::Parser;
use lumina_testkit::postgres::{PgOptions, PgServer};
use lumina_testkit::redis::RedisServer;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

#[derive(Parser)]
#[command(
    name = "lumina-chaos-services",
    about = "PostgreSQL and Redis for chaos runs"
)]
struct Args {
    /// Also listen on this address (repeatable).
    #[arg(long)]
    listen: Vec<IpAddr>,
    /// A client network PostgreSQL trusts besides loopback (repeatable), e.g. 10.200.7.2/32.
    #[arg(long)]
    trust_net: Vec<String>,
    /// LISTEN_ADDR:PORT=TARGET_ADDR:PORT, a TCP forwarder (repeatable).
    #[arg(long)]
    forward: Vec<String>,
    /// The control socket.
    #[arg(long)]
    control: PathBuf,
}

struct Services {
    pg: Mutex<PgServer>,
    redis: Mutex<RedisServer>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Services {
    /// Runs one control command (blocking: the servers are managed synchronously).
    fn command(&self, line: &str) -> anyhow::Result<()> {
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["ping"] => Ok(()),
            ["redis", "stop"] => {
                lock(&self.redis).stop();
                Ok(())
            }
            ["redis", "start"] => lock(&self.redis).restart(),
            ["postgres", "stop"] => lock(&self.pg).stop(),
            ["postgres", "kill"] => lock(&self.pg).kill(),
            ["postgres", "start"] => {
                let mut pg = lock(&self.pg);
                if pg.is_running() {
                    return Ok(());
                }
                pg.start_again()
            }
            _ => bail!("unknown command {line:?}"),
        }
    }
}

fn parse_forward(spec: &str) -> anyhow::Result<(SocketAddr, SocketAddr)> {
    let (listen, target) = spec
        .split_once('=')
        .with_context(|| format!("--forward {spec:?}: want LISTEN=TARGET"))?;
    let listen: SocketAddr = listen
        .parse()
        .with_context(|| format!("--forward {spec:?}: bad listen address"))?;
    let target: SocketAddr = target
        .parse()
        .with_context(|| format!("--forward {spec:?}: bad target address"))?;
    if !target.ip().is_loopback() {
        bail!("--forward {spec:?}: the target must be on loopback");
    }
    Ok((listen, target))
}

async fn forward(listener: tokio::net::TcpListener, target: SocketAddr) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

async fn serve_control(listener: tokio::net::UnixListener, services: Arc<Services>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let services = services.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let services = services.clone();
                let command = line.clone();
                let outcome = tokio::task::spawn_blocking(move || services.command(&command))
                    .await
                    .map_err(anyhow::Error::from)
                    .and_then(|r| r);
                let reply = match outcome {
                    Ok(()) => "ok\n".to_string(),
                    Err(e) => format!("error: {}\n", format!("{e:#}").replace('\n', " ")),
                };
                eprintln!("control: {line} -> {}", reply.trim());
                if write.write_all(reply.as_bytes()).await.is_err() {
                    break;
                }
            }
        });
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let forwards: Vec<(SocketAddr, SocketAddr)> = args
        .forward
        .iter()
        .map(|s| parse_forward(s))
        .collect::<anyhow::Result<_>>()?;
    let pg = PgServer::start_with(PgOptions {
        extra_listen: args.listen.clone(),
        trust_clients: args.trust_net.clone(),
    })
    .context("starting PostgreSQL")?;
    let database = pg
        .create_database("lumina")
        .context("creating the database")?;
    let redis = RedisServer::start_with_binds(&args.listen).context("starting Redis")?;
    let (pg_port, redis_port, redis_url) = (pg.port(), redis.port(), redis.url());
    let services = Arc::new(Services {
        pg: Mutex::new(pg),
        redis: Mutex::new(redis),
    });
    for (listen, target) in forwards {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding the forwarder on {listen}"))?;
        tokio::spawn(forward(listener, target));
    }
    let _ = std::fs::remove_file(&args.control);
    let control = tokio::net::UnixListener::bind(&args.control)
        .with_context(|| format!("binding {}", args.control.display()))?;
    tokio::spawn(serve_control(control, services.clone()));

    let mut out = std::io::stdout().lock();
    writeln!(out, "LUMINA_POSTGRES_URL={database}")?;
    writeln!(out, "LUMINA_REDIS_URL={redis_url}")?;
    writeln!(out, "CHAOS_POSTGRES_PORT={pg_port}")?;
    writeln!(out, "CHAOS_REDIS_PORT={redis_port}")?;
    out.flush()?;
    drop(out);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    let _ = std::fs::remove_file(&args.control);
    // The server's log outlives its directory, for the chaos run's post-mortem.
    let log = args.control.with_file_name("postgres.log");
    tokio::task::spawn_blocking(move || {
        let _ = std::fs::write(&log, lock(&services.pg).log());
        // Stopped here even if a control connection still holds the services; dropping
        // them (below) also removes their directories.
        lock(&services.redis).stop();
        let _ = lock(&services.pg).kill();
        drop(Arc::try_unwrap(services).ok());
    })
    .await?;
    Ok(())
}
