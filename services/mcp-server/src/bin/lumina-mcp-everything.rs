//! `lumina-mcp-everything`: the MCP conformance suite's fixture server
//! ([`lumina_mcp_server::fixtures::Everything`]).
//!
//! `lumina-mcp-everything --listen 127.0.0.1:PORT` serves Streamable HTTP at `/mcp` and prints
//! the bound address on the first stdout line; `--stdio` serves stdin/stdout.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, Result};
use lumina_mcp_server::fixtures::Everything;
use lumina_mcp_server::Handler;

async fn run(args: Vec<String>) -> Result<()> {
    let handler: Arc<dyn Handler> = Arc::new(Everything);
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["--stdio"] => Ok(lumina_mcp_server::serve_process_stdio(handler, terminated()).await?),
        ["--listen", addr] => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow!("cannot bind {addr}: {e}"))?;
            let bound = listener.local_addr()?;
            println!("{bound}");
            let options = lumina_mcp_server::http::HttpOptions::default();
            Ok(lumina_mcp_server::http::serve(listener, handler, options, terminated()).await?)
        }
        _ => Err(anyhow!(
            "usage: lumina-mcp-everything (--stdio | --listen HOST:PORT)"
        )),
    }
}

/// Completes on SIGINT or SIGTERM.
async fn terminated() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

fn main() -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LUMINA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("lumina-mcp-everything: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(std::env::args().skip(1).collect())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lumina-mcp-everything: {e}");
            ExitCode::FAILURE
        }
    }
}
