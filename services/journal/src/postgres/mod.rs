//! The PostgreSQL backend of the cluster profile: every session of every tenant in one
//! database (schema in `sql/postgres/`, applied by [`migrate()`]), over a
//! `deadpool_postgres` connection pool.
//!
//! Every write is one transaction that first locks the session's `session_fences` row
//! (`SELECT fence … FOR UPDATE`): the lock serializes the session's writers across all
//! instances, and the value refuses a writer whose fence is older than the recorded one
//! (SYSTEM.md §6). Appends take `seq` from `sessions.head_seq` and `stream_seq` from
//! `streams`, so nothing scans `events`, and insert the whole batch with one statement.
//! Statements that need no answer in between are pipelined on the connection.
//!
//! Every operation is bounded: connecting and checking out a connection time out after a
//! few seconds, and statements after [`PgOptions::statement_timeout_ms`] (server side,
//! and client side for a server that stopped answering), so a lost database surfaces as
//! [`Error::Unavailable`], never as a hang.

mod error;
pub mod migrate;
mod read;
mod tx;
mod write;

use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use serde::{Deserialize, Serialize};
use tracing::instrument;

pub use self::error::redact_url;
use self::error::{PgResultExt, PoolResultExt};
pub use self::migrate::{migrate, schema_version, MigrationReport, SCHEMA_VERSION};
use crate::{
    AppendBatch, Error, Fence, JournalStore, Result, SessionKey, SessionRecord, StoredEvent,
};
/// The driver and pool crates, so callers of [`PgJournal::from_pool`], [`migrate()`] and
/// [`schema_version()`] need no version-matched dependency of their own.
pub use {deadpool_postgres, tokio_postgres};

/// Connection settings of [`PgJournal::connect_with`]. The defaults suit a cluster node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PgOptions {
    /// Pooled connections at most (default 16).
    pub pool_size: usize,
    /// Establishing a connection, including its startup, fails after this (default 2000).
    pub connect_timeout_ms: u64,
    /// Waiting for a free pooled connection fails after this (default 5000).
    pub wait_timeout_ms: u64,
    /// One statement (lock waits included) fails after this (default 30000); operations
    /// also give up client side after it, in case the server stopped answering.
    pub statement_timeout_ms: u64,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            pool_size: 16,
            connect_timeout_ms: 2_000,
            wait_timeout_ms: 5_000,
            statement_timeout_ms: 30_000,
        }
    }
}

/// A [`JournalStore`] over PostgreSQL, serving every tenant. Cheap to clone (the pool is
/// shared).
#[derive(Clone)]
pub struct PgJournal {
    pool: Pool,
    /// Client-side bound of one operation.
    op_timeout: Duration,
}

impl std::fmt::Debug for PgJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.pool.status();
        f.debug_struct("PgJournal")
            .field("pool_size", &status.max_size)
            .field("pooled", &status.size)
            .finish_non_exhaustive()
    }
}

impl PgJournal {
    /// A store over a new pool of at most `pool_size` connections to `url`
    /// (`postgres://user:password@host:port/db`, or key-value form), with the other
    /// [`PgOptions`] at their defaults. Connects lazily: a wrong address shows on first use
    /// (or in [`Self::health`]). Errors never contain the URL's password.
    pub fn connect(url: &str, pool_size: usize) -> Result<Self> {
        Self::connect_with(
            url,
            &PgOptions {
                pool_size,
                ..PgOptions::default()
            },
        )
    }

    /// [`Self::connect`] with explicit [`PgOptions`].
    pub fn connect_with(url: &str, options: &PgOptions) -> Result<Self> {
        // The parser's own message may quote the offending part of the string: not shown.
        let mut config = tokio_postgres::Config::from_str(url).map_err(|_| {
            Error::Unavailable(format!(
                "postgres: invalid connection URL {}",
                redact_url(url)
            ))
        })?;
        let connect_timeout = Duration::from_millis(options.connect_timeout_ms.max(1));
        config.connect_timeout(connect_timeout);
        // Server-side bound on every statement; appended so the URL's own options stay.
        let statement_timeout = format!("-c statement_timeout={}", options.statement_timeout_ms);
        let startup_options = match config.get_options() {
            Some(existing) if !existing.trim().is_empty() => {
                format!("{existing} {statement_timeout}")
            }
            _ => statement_timeout,
        };
        config.options(startup_options);
        if config.get_application_name().is_none() {
            config.application_name("lumina-journal");
        }
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_millis(options.wait_timeout_ms.max(1))))
            .create_timeout(Some(connect_timeout))
            .recycle_timeout(Some(connect_timeout))
            .build()
            .map_err(|e| Error::Unavailable(format!("postgres: cannot build the pool: {e}")))?;
        Ok(Self::with_timeout(
            pool,
            Duration::from_millis(options.statement_timeout_ms.max(1)),
        ))
    }

    /// A store over an existing pool (whose configuration decides connection timeouts);
    /// operations give up client side after the default statement timeout.
    pub fn from_pool(pool: Pool) -> Self {
        Self::with_timeout(
            pool,
            Duration::from_millis(PgOptions::default().statement_timeout_ms),
        )
    }

    fn with_timeout(pool: Pool, statement_timeout: Duration) -> Self {
        // A little slack so the server's own timeout (a clearer error) usually fires first.
        Self {
            pool,
            op_timeout: statement_timeout + Duration::from_secs(2),
        }
    }

    /// The pool this store uses.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// `SELECT 1` through the pool: [`Error::Unavailable`] when the database cannot be
    /// reached.
    pub async fn health(&self) -> Result<()> {
        self.bounded(async {
            let client = self.client().await?;
            client.simple_query("SELECT 1").await.pg("health check")?;
            Ok(())
        })
        .await
    }

    /// Applies pending migrations through the pool (see [`migrate()`]).
    pub async fn migrate(&self) -> Result<MigrationReport> {
        let mut client = self.client().await?;
        migrate::migrate(&mut client).await
    }

    /// The database's schema version (see [`schema_version()`]).
    pub async fn schema_version(&self) -> Result<Option<i32>> {
        self.bounded(async {
            let client = self.client().await?;
            migrate::schema_version(&client).await
        })
        .await
    }

    async fn client(&self) -> Result<deadpool_postgres::Client> {
        self.pool.get().await.pool()
    }

    /// Runs one operation with a fresh pooled connection, bounded by the client-side
    /// timeout. A transaction abandoned by the timeout is rolled back when it drops.
    async fn run<'a, T, F, Fut>(&'a self, op: &'static str, work: F) -> Result<T>
    where
        F: FnOnce(deadpool_postgres::Client) -> Fut + Send + 'a,
        Fut: Future<Output = Result<T>> + Send + 'a,
        T: Send,
    {
        self.bounded(async move {
            let client = self.client().await.map_err(|e| match e {
                Error::Unavailable(m) => Error::Unavailable(format!("{op}: {m}")),
                other => other,
            })?;
            work(client).await
        })
        .await
    }

    async fn bounded<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        match tokio::time::timeout(self.op_timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(Error::Unavailable(format!(
                "postgres: no answer within {} ms",
                self.op_timeout.as_millis()
            ))),
        }
    }
}

/// A contract integer (sequence, fence, offset) as a BIGINT.
fn to_sql_int(value: u64, what: &str) -> Result<i64> {
    i64::try_from(value)
        .map_err(|_| Error::Unavailable(format!("{what} {value} exceeds the storable range")))
}

/// A BIGINT read back as a contract integer; negative means the data is damaged.
fn from_sql_int(value: i64, what: &str) -> Result<u64> {
    u64::try_from(value).map_err(|_| Error::Corrupt(format!("negative {what} {value}")))
}

#[async_trait]
impl JournalStore for PgJournal {
    /// Also registers the tenant and the project root.
    #[instrument(level = "debug", skip_all, fields(tenant = %record.tenant, session_id = %record.session_id, fence = fence))]
    async fn create_session(&self, record: &SessionRecord, fence: Fence) -> Result<()> {
        self.run("create session", |c| async move {
            write::create_session(c, record, fence).await
        })
        .await
    }

    async fn session(&self, tenant: &str, session_id: &str) -> Result<Option<SessionRecord>> {
        self.run("read session", |c| async move {
            read::session(&c, tenant, session_id).await
        })
        .await
    }

    async fn list_sessions(
        &self,
        tenant: &str,
        include_archived: bool,
    ) -> Result<Vec<SessionRecord>> {
        self.run("list sessions", |c| async move {
            read::list_sessions(&c, tenant, include_archived).await
        })
        .await
    }

    #[instrument(level = "debug", skip_all, fields(tenant = %session.tenant, session_id = %session.session_id, fence = fence, stream = %batch.stream))]
    async fn append(
        &self,
        session: &SessionKey,
        fence: Fence,
        batch: AppendBatch,
    ) -> Result<Vec<StoredEvent>> {
        self.run("append", |c| async move {
            write::append(c, session, fence, batch).await
        })
        .await
    }

    async fn read(
        &self,
        session: &SessionKey,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>> {
        self.run("read events", |c| async move {
            read::events(&c, session, None, after_seq, limit).await
        })
        .await
    }

    async fn read_stream(
        &self,
        session: &SessionKey,
        stream: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>> {
        self.run("read stream", |c| async move {
            read::events(&c, session, Some(stream), after, limit).await
        })
        .await
    }

    async fn head(&self, session: &SessionKey) -> Result<u64> {
        self.run(
            "read head",
            |c| async move { read::head(&c, session).await },
        )
        .await
    }

    async fn heads(&self, tenant: &str, session_ids: &[String]) -> Result<Vec<(String, u64)>> {
        self.run("read heads", |c| async move {
            read::heads(&c, tenant, session_ids).await
        })
        .await
    }

    async fn command_result(
        &self,
        session: &SessionKey,
        key: &str,
    ) -> Result<Option<serde_json::Value>> {
        self.run("read command result", |c| async move {
            read::command_result(&c, session, key).await
        })
        .await
    }

    /// Blobs are content-addressed per tenant: every session of the tenant can read them.
    #[instrument(level = "debug", skip_all, fields(tenant = %session.tenant, session_id = %session.session_id, fence = fence, len = bytes.len()))]
    async fn put_blob(&self, session: &SessionKey, fence: Fence, bytes: &[u8]) -> Result<String> {
        self.run("put blob", |c| async move {
            write::put_blob(c, session, fence, bytes).await
        })
        .await
    }

    async fn get_blob(&self, session: &SessionKey, sha256: &str) -> Result<Option<Vec<u8>>> {
        self.run("get blob", |c| async move {
            read::blob(&c, session, sha256).await
        })
        .await
    }

    async fn consumer_offset(&self, session: &SessionKey, consumer: &str) -> Result<u64> {
        self.run("read consumer offset", |c| async move {
            read::consumer_offset(&c, session, consumer).await
        })
        .await
    }

    #[instrument(level = "debug", skip_all, fields(tenant = %session.tenant, session_id = %session.session_id, fence = fence, consumer = %consumer, offset = offset))]
    async fn set_consumer_offset(
        &self,
        session: &SessionKey,
        fence: Fence,
        consumer: &str,
        offset: u64,
    ) -> Result<()> {
        self.run("set consumer offset", |c| async move {
            write::set_consumer_offset(c, session, fence, consumer, offset).await
        })
        .await
    }

    #[instrument(level = "debug", skip_all, fields(tenant = %session.tenant, session_id = %session.session_id, fence = fence))]
    async fn put_summary(
        &self,
        session: &SessionKey,
        fence: Fence,
        summary: &serde_json::Value,
    ) -> Result<()> {
        self.run("put summary", |c| async move {
            write::put_summary(c, session, fence, summary).await
        })
        .await
    }

    /// Sets the flag; nothing moves.
    #[instrument(level = "debug", skip_all, fields(tenant = %session.tenant, session_id = %session.session_id, fence = fence))]
    async fn archive(&self, session: &SessionKey, fence: Fence) -> Result<()> {
        self.run("archive", |c| async move {
            write::archive(c, session, fence).await
        })
        .await
    }

    #[instrument(level = "debug", skip_all, fields(tenant = %session.tenant, session_id = %session.session_id, fence = fence))]
    async fn claim(&self, session: &SessionKey, fence: Fence) -> Result<()> {
        self.run(
            "claim",
            |c| async move { write::claim(c, session, fence).await },
        )
        .await
    }

    async fn list_audit(
        &self,
        tenant: &str,
        query: &crate::AuditQuery,
    ) -> Result<Vec<crate::AuditRecord>> {
        self.run("list audit", |c| async move {
            read::list_audit(&c, tenant, query).await
        })
        .await
    }

    async fn fence(&self, session: &SessionKey) -> Result<Fence> {
        self.run(
            "read fence",
            |c| async move { read::fence(&c, session).await },
        )
        .await
    }
}
