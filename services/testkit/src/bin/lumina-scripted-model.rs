//! `lumina-scripted-model`: the scripted model server as a process, for the README demo and
//! end-to-end tests of the real binaries.
//!
//! Prints `LUMINA_SCRIPTED_MODEL_URL=http://127.0.0.1:PORT` once listening, then serves
//! until SIGTERM or ctrl-c.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use lumina_testkit::{ScriptedModelServer, Turn};

#[derive(Debug, Parser)]
#[command(
    name = "lumina-scripted-model",
    about = "Scripted Anthropic/OpenAI-compatible model server for tests"
)]
struct Args {
    /// JSON file with an array of turns, answered in order.
    #[arg(long)]
    script: Option<PathBuf>,
    /// Port on 127.0.0.1 (0 = any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Answer text once the script is used up.
    #[arg(long, default_value = "ok")]
    default_text: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let turns: Vec<Turn> = match &args.script {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        None => Vec::new(),
    };
    let server = ScriptedModelServer::start_on_port(args.port, turns)?;
    server.set_default_turn(Turn::text(args.default_text));
    let mut out = std::io::stdout().lock();
    writeln!(out, "LUMINA_SCRIPTED_MODEL_URL={}", server.base_url())?;
    out.flush()?;
    drop(out);
    wait_for_signal().await?;
    server.shutdown().await;
    Ok(())
}

#[cfg(unix)]
async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}

#[cfg(not(unix))]
async fn wait_for_signal() -> anyhow::Result<()> {
    tokio::signal::ctrl_c().await?;
    Ok(())
}
