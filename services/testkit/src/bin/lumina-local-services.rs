//! `lumina-local-services`: a real PostgreSQL (with pgvector) and a real Redis on free
//! loopback ports, for the local development cluster (`scripts/local-cluster`). Prints
//! `LUMINA_POSTGRES_URL=…` and `LUMINA_REDIS_URL=…`, then runs until SIGTERM or ctrl-c and
//! removes both on exit.

use std::io::Write as _;

use anyhow::Context as _;
use lumina_testkit::postgres::PgServer;
use lumina_testkit::redis::RedisServer;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let pg = PgServer::start().context("starting PostgreSQL")?;
    let database = pg
        .create_database("lumina")
        .context("creating the database")?;
    let redis = RedisServer::start().context("starting Redis")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "LUMINA_POSTGRES_URL={database}")?;
    writeln!(out, "LUMINA_REDIS_URL={}", redis.url())?;
    out.flush()?;
    drop(out);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    drop(redis);
    drop(pg);
    Ok(())
}
